"""kernels/features.py: the FEATURES constexpr (the kernels' flags in one int) and the size of the
kernels' signatures it keeps small."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flash_attention_amd.kernels import features

KERNELS = Path(__file__).resolve().parents[1] / "src" / "flash_attention_amd" / "kernels"
MAX_PARAMS = 30  # every @triton.jit function: runtime and constexpr parameters together


def test_pack_unpack_round_trip():
    value = features.pack(IS_CAUSAL=True, HAS_DROPOUT=True, GQA=False, SPLIT_KV=True)
    flags = features.unpack(value)
    assert {n for n, on in flags.items() if on} == {"IS_CAUSAL", "HAS_DROPOUT", "SPLIT_KV"}
    assert features.pack(**flags) == value
    assert features.with_flags(value, IS_CAUSAL=False, MASKED=True) == features.pack(
        HAS_DROPOUT=True, SPLIT_KV=True, MASKED=True)
    assert features.pack() == 0
    assert len(set(features.FLAGS)) == len(features.FLAGS)
    with pytest.raises(KeyError):
        features.pack(IS_CASUAL=True)  # a misspelt flag is an error, not a flag left off


def test_kernel_side_decoding_agrees():
    """common.has / with_flags (constexpr functions, called here as plain Python) read the same bits."""
    pytest.importorskip("triton")
    from flash_attention_amd.kernels import common

    value = features.pack(HAS_WINDOW=True, V_T=True, DBIAS_ATOMIC=True)
    for name in features.FLAGS:
        assert common.has(value, name) == features.has(value, name), name
    assert common.with_flags(value, MASKED=True, V_T=False) == features.with_flags(value, MASKED=True, V_T=False)
    with pytest.raises(ValueError):
        common.has(value, "NO_SUCH_FLAG")


_KEY_SCRIPT = """
import sys
import flash_attention_amd.kernels.features as F
if sys.argv[1] == "rotated":
    F.FLAGS = F.FLAGS[1:] + F.FLAGS[:1]
from flash_attention_amd.kernels import bwd, common, decode, fwd
assert common.FLAG_BITS.value == F.FLAGS
for k in (fwd.attn_fwd_kernel, bwd.bwd_dkdv, decode.decode_split_kernel):
    key = k.cache_key
    assert not key.startswith("recursion") and any(n == "FLAG_BITS" for n, _ in k.used_global_vals), k
    print(key)
"""


def test_bit_table_is_in_the_kernels_cache_key():
    """The flag table is a constexpr global read by has / with_flags: Triton puts its value into
    every kernel's cache key (its on-disk cache too), so another bit order cannot reuse binaries
    built for the old one. Real JIT functions: a process without the interpreter."""
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    src = str(KERNELS.parents[1])
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")

    def keys(order):
        run = subprocess.run([sys.executable, "-c", _KEY_SCRIPT, order], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-2000:]
        return run.stdout.split()

    plain, rotated = keys("plain"), keys("rotated")
    assert len(plain) == 3 and all(a != b for a, b in zip(plain, rotated))


def _jit_functions():
    for path in sorted(KERNELS.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any("triton.jit" in ast.unparse(d) for d in node.decorator_list):
                yield path.name, node


def test_kernel_signatures_stay_short():
    """Issue #12: every @triton.jit function takes at most MAX_PARAMS parameters (flags go into
    FEATURES, strides and scalars into tuples)."""
    found = {}
    for file, node in _jit_functions():
        n = len(node.args.args) + len(node.args.kwonlyargs)
        found[f"{file}:{node.name}"] = n
        assert n <= MAX_PARAMS, (file, node.name, n)
    assert "fwd.py:attn_fwd_kernel" in found and "bwd.py:bwd_dkdv" in found
