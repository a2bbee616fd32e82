"""``flash-attention-amd check-kernels``: compile every kernel config for AMD and NVIDIA targets
on any machine (no GPU needed) and check the resources each one uses. ``check-amd`` is its old
name, kept as an alias.

Every launcher module (``launch/fwd.py``, ``launch/bwd.py``, ``launch/decode.py``) exposes
``compile_specs(arch) -> list[CompileSpec]`` (``launch/spec.py``). For each spec and each
target architecture the checker runs ``triton.compile(ASTSource(...), target=GPUTarget(...))``
(Triton ships LLVM with the AMDGPU backend and NVIDIA's ptxas, so this works offline on a CPU)
and reads back registers, spills, scratch / local memory, shared memory (LDS), occupancy and
whether every ``tl.dot`` became matrix-core instructions.

A config FAILS when it does not compile, spills registers or uses scratch / local memory,
needs more shared memory than one workgroup may have on the arch (the launch would raise
OutOfResources), or lowers a ``tl.dot`` without matrix instructions; the command then exits 1.
SGPRs spilled into VGPR lanes and compiler warnings only make a row ``warn``.

Which configs: every row of each launcher's tables (main, options and dropout tiers), fp16 and
bf16, in the variants the row serves (plain / causal / every option / every option and
dropout); the backward dK/dV kernel in its MHA (``group`` == 1, a constant) and GQA builds.

Modules:

- ``archs``: the targets (``ARCHS``: register files, LDS, wave limits, with sources) and the
  occupancy formulas (``occupancy_amd``, ``occupancy_nvidia``).
- ``asm``: reading AMDGCN metadata, PTX, ``cuobjdump`` / ``ptxas -v`` output and TTGIR layouts.
- ``jobs``: the spec sources (``LAUNCHERS``), ``Job`` / ``Row``, ``collect``, ``quick_subset``.
- ``compile``: the spawn worker pool (``run_jobs``), ``compile_one``, ``judge``.
- ``report``: the table, Markdown and JSON formats.
- ``cli``: the options and ``main``.
"""
from .archs import ARCHS, QUICK_ARCHS, ArchInfo, occupancy_amd, occupancy_nvidia
from .asm import amd_matrix_instrs, dot_lowering, nvidia_matrix_instrs, parse_amdgcn, parse_cuobjdump
from .cli import ALIASES, COMMAND, build_parser, main
from .compile import compile_one, describe, judge, run_jobs
from .jobs import LAUNCHERS, QUICK_PER_KERNEL, Job, Row, collect, quick_subset
from .report import format_markdown, format_table, summarize

__all__ = [
    "ALIASES", "ARCHS", "COMMAND", "LAUNCHERS", "QUICK_ARCHS", "QUICK_PER_KERNEL", "ArchInfo", "Job", "Row",
    "amd_matrix_instrs", "build_parser", "collect", "compile_one", "describe", "dot_lowering", "format_markdown",
    "format_table", "judge", "main", "nvidia_matrix_instrs", "occupancy_amd", "occupancy_nvidia", "parse_amdgcn",
    "parse_cuobjdump", "quick_subset", "run_jobs", "summarize",
]
