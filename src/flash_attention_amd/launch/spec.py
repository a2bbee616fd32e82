"""Static compile specs: how ``check-amd`` compiles every kernel config without a GPU."""
from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any


def arg_positions(fn: Any, names: Collection[str]) -> tuple[int, ...]:
    """Positions, among a Triton kernel's non-constexpr parameters (the ``args`` of a launch,
    launch/runtime.py), of those named in ``names``: a KernelSlot's ``dynamic`` positions from the
    kernel's own signature. fn: a JITFunction or (TRITON_INTERPRET=1) an InterpretedFunction."""
    import inspect

    import triton.language as tl

    params = inspect.signature(fn.fn).parameters.values()
    runtime = [p.name for p in params if p.annotation not in (tl.constexpr, "tl.constexpr", "constexpr")]
    return tuple(i for i, n in enumerate(runtime) if n in names)


@dataclass(frozen=True)
class CompileSpec:
    """One kernel in one launchable configuration, for ``triton.compile(ASTSource(...), target=...)``.

    ``signature`` maps every non-constexpr argument name to its Triton type string
    ("*fp16", "*bf16", "*fp32", "*i32", "i32", "i64", "fp32"); ``constexprs`` maps the
    constexpr argument names to values; ``options`` holds num_warps, num_stages and, on
    AMD, waves_per_eu / matrix_instr_nonkdim / kpack.
    """

    kernel: str  # "fwd", "bwd_dkdv", "bwd_dq", "bwd_pre", "decode", "combine", ...
    fn: Callable[..., Any]
    signature: dict[str, str]
    constexprs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    label: str = ""  # human-readable: "bf16 d=128 causal BLOCK 128x64 w4 s2"
    # NVIDIA only: why register spills of this config are accepted (a measurement showing it is
    # still the fastest, e.g. "fastest on an H100, benchmarks/results/bwd_h100.md"). check-amd
    # then reports its spills as a warning. AMD spills are never accepted.
    accepted_spills: str = ""
    # integer arguments (not named stride*; "name[j]": element j of a tuple argument) that a launch
    # passes divisible by 16 when the call's tensors are (e.g. seqlen_k, sizes[3] of the forward, as
    # V's head-dim stride in the FP8 forward's [b, hk, dv, sk] layout)
    divisible: tuple[str, ...] = ()


S3 = ("i32", "i32", "i32")  # a (batch, row, head) stride triple


def specialised_specs(rows, kernel: str, fn: Any, signature: Callable[[str], dict[str, Any]],
                      what: str = "") -> list[CompileSpec]:
    """The bf16 and fp16 builds of a warp-specialised kernel (launch/fwd_ws.py, launch/bwd_ws.py) for each
    table row of one arch: HEAD_DIM the row's head dim, the row's tile, FEATURES WARP_SPEC;
    signature(dtype) gives the argument types of a 16-bit dtype name."""
    from ..kernels.features import pack

    specs = []
    for row in rows:
        cfg = row.config
        for dtype in ("bf16", "fp16"):
            specs.append(CompileSpec(kernel=kernel, fn=fn, signature=signature(dtype),
                                     constexprs=dict(HEAD_DIM=row.max_d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                                                     FEATURES=pack(WARP_SPEC=True)),
                                     options=cfg.launch_options(False), accepted_spills=cfg.spills_ok,
                                     label=f"{dtype} d={row.max_d} {what}{cfg.label()} warp-specialised"))
    return specs
