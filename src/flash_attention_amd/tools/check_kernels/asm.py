"""Reading a compiled kernel's resources from Triton's outputs.

- AMD (``.asm["amdgcn"]``): the ``.amdgpu_metadata`` block (``.vgpr_count`` (includes AGPRs),
  ``.agpr_count``, ``.sgpr_count``, ``.vgpr_spill_count``, ``.sgpr_spill_count``,
  ``.private_segment_fixed_size`` = scratch bytes per lane), LLVM's ``; Occupancy:`` line and
  the ``v_mfma_*`` / ``v_wmma_*`` instructions.
- NVIDIA (``.asm["cubin"]``, ``.asm["ptx"]``): registers / local memory / stack from
  ``cuobjdump --dump-resource-usage``, spill stores from ``ptxas -v`` (both shipped in the
  Triton wheel), and ``mma`` / ``wgmma`` in the PTX.
- Both: from the TTIR / TTGIR, whether each ``tt.dot`` got a matrix-core layout (``amd_mfma``,
  ``amd_wmma``, ``nvidia_mma``) or fell back to FMA (``blocked``).
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

from .archs import ArchInfo

_AMD_META = re.compile(
    r"^\s+(?:-\s+)?\.(vgpr_count|agpr_count|sgpr_count|vgpr_spill_count|sgpr_spill_count|"
    r"private_segment_fixed_size|group_segment_fixed_size|wavefront_size):\s+(\d+)",
    re.M,
)
_AMD_MATRIX = re.compile(r"^\s+v_(s?mfma\w*|s?wmma\w*|swmmac\w*)\b", re.M)
_NV_MATRIX = re.compile(r"^\s*(?:@!?%p\d+\s+)?(wgmma\.mma_async[\w.]*|mma\.sync[\w.]*)", re.M)


def parse_amdgcn(text: str) -> dict[str, int]:
    """Resource figures from an AMDGCN assembly listing (one kernel)."""
    out: dict[str, int] = {}
    for key, val in _AMD_META.findall(text):
        out.setdefault(key, int(val))
    m = re.search(r"; Occupancy: (\d+)", text)
    out["llvm_occupancy"] = int(m.group(1)) if m else -1
    m = re.search(r"; ScratchSize: (\d+)", text)
    out["scratch_size"] = int(m.group(1)) if m else 0
    if "vgpr_count" not in out:
        raise ValueError("no .vgpr_count in the AMDGCN metadata (unexpected Triton/LLVM output)")
    return out


def amd_matrix_instrs(text: str) -> dict[str, int]:
    """MFMA / WMMA instructions of an AMDGCN listing by name: {"mfma_f32_32x32x8_f16": 2}."""
    counts: dict[str, int] = {}
    for name in _AMD_MATRIX.findall(text):
        counts[name] = counts.get(name, 0) + 1
    return counts


def nvidia_matrix_instrs(ptx: str) -> dict[str, int]:
    """mma / wgmma instructions by shape: {"wgmma.m64n64k16": 4, "mma.m16n8k16": 8}."""
    counts: dict[str, int] = {}
    for ins in _NV_MATRIX.findall(ptx):
        shape = re.search(r"\.(m\d+n\d+k\d+)", ins)
        name = ins.split(".")[0] + "." + (shape.group(1) if shape else "?")
        counts[name] = counts.get(name, 0) + 1
    return counts


def parse_cuobjdump(text: str) -> dict[str, int]:
    """REG / STACK / SHARED / LOCAL of the (single) function in ``cuobjdump -res-usage``."""
    m = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", text)
    if not m:
        raise ValueError(f"cannot read cuobjdump resource usage: {text[:200]!r}")
    return dict(zip(("regs", "stack", "static_shared", "local"), map(int, m.groups())))


def dot_lowering(ttir: str, ttgir: str) -> tuple[int, int]:
    """(dots in the kernel, dots given a matrix-core layout) from the TTIR / TTGIR text."""
    n_dots = len(re.findall(r"= tt\.dot ", ttir))
    kinds = dict(re.findall(r"^#(\w+) = #ttg\.(\w+)<", ttgir, re.M))
    matrix = 0
    for line in ttgir.splitlines():
        if re.search(r"= (tt\.dot|ttng\.warp_group_dot) ", line):
            enc = re.search(r"-> tensor<[^>]*#(\w+)>", line)
            if enc and kinds.get(enc.group(1), "") in ("amd_mfma", "amd_wmma", "nvidia_mma"):
                matrix += 1
    return n_dots, matrix


def cubin_resources(cubin: bytes) -> dict[str, int]:
    """``parse_cuobjdump`` of ``cuobjdump --dump-resource-usage`` run on a cubin (Triton's cuobjdump)."""
    import triton

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([triton.knobs.nvidia.cuobjdump.path, "--dump-resource-usage", f.name],
                             capture_output=True, text=True, check=True).stdout
    return parse_cuobjdump(out)


def _ptxas(arch: int) -> str:
    """The ptxas Triton itself compiles this arch with: Triton 3.9 takes its newer ptxas ("ptxas-blackwell")
    from sm90 on, whose PTX (.version 9.4) the other one rejects; Triton 3.6 from sm100 on."""
    import triton

    try:
        from triton.backends.nvidia.compiler import get_ptxas
    except ImportError:
        return triton.knobs.nvidia.ptxas.path
    return get_ptxas(arch).path


def ptxas_spill_stores(ptx: str, info: ArchInfo) -> int:
    """Bytes of spill stores ptxas reports (``ptxas -v``) for this PTX; run only when the
    cubin has a stack frame or local memory, to tell register spills from other local use."""
    gpu = f"sm_{info.target_arch}" + ("a" if info.target_arch == 90 else "")
    with tempfile.NamedTemporaryFile(suffix=".ptx", mode="w") as f:
        f.write(ptx)
        f.flush()
        log = subprocess.run([_ptxas(info.target_arch), "-lineinfo", "-v", f"--gpu-name={gpu}", f.name,
                              "-o", os.devnull], capture_output=True, text=True, check=True).stderr
    m = re.search(r"(\d+) bytes spill stores", log)
    if not m:
        raise ValueError(f"cannot read ptxas -v: {log[-300:]!r}")
    return int(m.group(1))
