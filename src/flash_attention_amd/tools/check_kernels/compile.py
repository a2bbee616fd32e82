"""Compiling the jobs: ``run_jobs`` (a pool of ``spawn`` worker processes), ``compile_one``
(``triton.compile(ASTSource(...), target=GPUTarget(...))`` for one spec and one arch, then its
resources) and ``judge`` (the verdict of a compiled row).

Each kernel is compiled as Triton's JIT specialises it for a launch on torch tensors:
pointers 16-byte aligned (and within 2 GiB on AMD, for buffer loads) and, by default, the
``stride*`` arguments divisible by 16 (``aligned_strides=False`` checks the variant Triton
builds for other strides, e.g. head dim 40).

The workers switch Triton's interpreter off (the kernels must be real ``JITFunction``s, even
when the caller runs under TRITON_INTERPRET=1).
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from .archs import ARCHS, ArchInfo, occupancy_amd, occupancy_nvidia
from .asm import (
    amd_matrix_instrs,
    cubin_resources,
    dot_lowering,
    nvidia_matrix_instrs,
    parse_amdgcn,
    ptxas_spill_stores,
)
from .jobs import Job, Row, specs_of


# ----------------------------------------------------------------------------- worker side
def worker_init(sys_path: list[str], cache_dir: str | None) -> None:
    """Runs first in each spawned worker: real JIT functions, optional private cache.

    Triton decides interpreter-or-compiler when each @jit function is created, its own
    standard library included, so the interpreter switch must be off before Triton is first
    imported in this process (a worker spawned from a test run inherits TRITON_INTERPRET=1).
    """
    sys.path[:] = sys_path
    already = "triton" in sys.modules
    os.environ.pop("TRITON_INTERPRET", None)  # this worker process only; nothing is read here
    import triton

    if already and triton.knobs.runtime.interpret:
        raise RuntimeError("check-kernels worker: Triton was imported in interpreter mode before the worker started")
    triton.knobs.runtime.interpret = False
    if cache_dir:
        triton.knobs.cache.dir = cache_dir


def attrs_for(fn: Any, signature: dict[str, Any], backend: str, aligned_strides: bool = True,
              divisible: tuple[str, ...] = ()) -> dict:
    """The specialisation Triton's JIT gives a launch with torch tensors: pointers 16-byte
    aligned (and, on AMD with buffer ops, within 2 GiB); with ``aligned_strides`` the integer
    arguments named ``stride*`` (and those the spec names in ``divisible``: an argument's name, or
    ``name[j]`` for element j of a tuple argument) divisible by 16 (contiguous tensors whose head
    dim is a multiple of 16). Other integers (lengths, seeds, window bounds) get no hint. Tuples may
    nest (a kernel's ``strides``: one tuple per tensor): every element at its path, all of them
    ``stride*`` elements when the argument's name is."""
    import triton

    attrs = {}
    buffer_ops = backend == "hip" and triton.knobs.amd.use_buffer_ops

    def leaves(path, ty, label):
        # a tuple argument (e.g. a tensor's strides): its elements, at paths (index, position, ...)
        if isinstance(ty, tuple):
            for j, t in enumerate(ty):
                yield from leaves((*path, j), t, f"{label}[{j}]")
        else:
            yield path, ty, label

    for name, ty in signature.items():
        for path, elem, label in leaves((fn.arg_names.index(name),), ty, name):
            if elem.startswith("*"):
                attrs[path] = [["tt.divisibility", 16]] + ([["tt.pointer_range", 32]] if buffer_ops else [])
            elif aligned_strides and elem in ("i32", "i64") and (
                    name.startswith("stride") or name in divisible or label in divisible):
                attrs[path] = [["tt.divisibility", 16]]
    return attrs


NVIDIA_RESERVED_SMEM = 1024  # shared memory the CUDA driver reserves per block (sm80+), in cuobjdump's SHARED


def compile_one(spec: Any, info: ArchInfo, aligned_strides: bool = True) -> Row:
    """Compile one spec (a launch/spec.py CompileSpec) for one arch and fill a Row (raises on
    compile errors)."""
    import triton
    from triton.backends.compiler import GPUTarget

    row = Row(spec.kernel, info.name, spec.label)
    options = dict(spec.options)
    row.num_warps = int(options.get("num_warps", 4))
    target = GPUTarget(info.backend, info.target_arch, info.warp_size)
    source = triton.compiler.ASTSource
    if getattr(spec.fn, "is_gluon", lambda: False)():  # a Gluon kernel (launch/fwd_gluon.py)
        from triton.experimental.gluon._runtime import GluonASTSource as source
    src = source(
        fn=spec.fn, signature=dict(spec.signature), constexprs=dict(spec.constexprs),
        attrs=attrs_for(spec.fn, spec.signature, info.backend, aligned_strides, getattr(spec, "divisible", ())),
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ck = triton.compile(src, target=target, options=options)
    row.compile_s = time.perf_counter() - t0
    row.warnings = sorted({f"Triton: {w.message}".splitlines()[0][:200] for w in caught})
    asm = ck.asm
    row.dots, row.matrix_dots = dot_lowering(asm.get("ttir", ""), asm.get("ttgir", ""))
    row.lds = int(ck.metadata.shared or 0)
    if info.backend == "hip":
        res = parse_amdgcn(asm["amdgcn"])
        row.vgprs, row.agprs, row.sgprs = res["vgpr_count"], res.get("agpr_count", 0), res.get("sgpr_count", -1)
        row.spills = res.get("vgpr_spill_count", 0)
        row.sgpr_spills = res.get("sgpr_spill_count", 0)
        row.scratch = max(res.get("private_segment_fixed_size", 0), res["scratch_size"])
        row.lds += res.get("group_segment_fixed_size", 0)
        row.llvm_occupancy = res["llvm_occupancy"]
        row.matrix = amd_matrix_instrs(asm["amdgcn"])
        row.occupancy, row.occ_by_regs, row.occ_by_lds = occupancy_amd(info, row.vgprs, row.lds, row.num_warps)
    else:
        res = cubin_resources(asm["cubin"])
        row.vgprs = res["regs"]
        row.scratch = res["local"] + res["stack"]
        row.spills = ptxas_spill_stores(asm["ptx"], info) // 4 if row.scratch else 0
        # cuobjdump's SHARED counts the 1 KiB the driver reserves per block on sm80+ (a Triton kernel whose PTX
        # declares no static shared memory shows 1024), which the per-block limit (227 KiB on sm90) leaves out and
        # occupancy_nvidia adds itself: an sm90 Gluon build with 231,968 B of dynamic shared memory launched on an
        # H100 (benchmarks/results/run32/h100_d64_m128_*.md), where 1 KiB of static memory would leave 231,424
        row.lds += max(0, res["static_shared"] - NVIDIA_RESERVED_SMEM)
        row.matrix = nvidia_matrix_instrs(asm["ptx"])
        row.occupancy, row.occ_by_regs, row.occ_by_lds = occupancy_nvidia(info, row.vgprs, row.lds, row.num_warps)
    judge(row, info, spec.accepted_spills)
    return row


def judge(row: Row, info: ArchInfo, accepted_spills: str = "") -> None:
    """Append the problems of a compiled row; status FAIL when there is any.

    A config FAILS when it spills registers or uses scratch / local memory, needs more shared
    memory than one workgroup may have on the arch (the launch would raise OutOfResources), or
    lowers a ``tl.dot`` without matrix instructions. SGPRs spilled into VGPR lanes and compiler
    warnings only make it ``warn``. On NVIDIA a spec may carry ``accepted_spills`` (the
    measurement that keeps a spilling config: spill traffic there stays in L1); its spills then
    count as a warning. Never on AMD."""
    if accepted_spills and info.backend == "cuda" and (row.spills or row.scratch):
        row.warnings.append(f"spills {row.spills} registers, {row.scratch} B local memory; accepted: {accepted_spills}")
    else:
        if row.spills > 0:
            row.problems.append(f"spills {row.spills} vector registers")
        if row.scratch > 0:
            row.problems.append(f"uses {row.scratch} B scratch/local memory")
    if row.lds > info.lds_per_group:
        row.problems.append(f"needs {row.lds} B shared memory > {info.lds_per_group} B per workgroup")
    if row.dots > row.matrix_dots:
        row.problems.append(f"{row.dots - row.matrix_dots} of {row.dots} tl.dot without matrix cores (FMA)")
    elif row.dots > 0 and not row.matrix:
        row.problems.append("tl.dot present but no MFMA/WMMA/mma/wgmma instruction in the binary")
    row.status = "FAIL" if row.problems else ("warn" if row.sgpr_spills or row.warnings else "ok")
    if row.sgpr_spills:
        row.problems.append(f"(warning) {row.sgpr_spills} SGPRs spilled to VGPR lanes")
    row.problems.extend(f"(warning) {w}" for w in row.warnings)


def describe(exc: BaseException, limit: int = 400) -> str:
    """One line: the exception, its innermost cause, and where that was raised."""
    def first(e: BaseException) -> str:
        text = str(e).strip()
        return f"{e.__class__.__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")

    inner = exc
    while inner.__cause__ is not None or inner.__context__ is not None:
        inner = inner.__cause__ or inner.__context__
    msg = first(exc)
    if inner is not exc:
        msg += f" <- {first(inner)}"
    tb = traceback.extract_tb(inner.__traceback__)
    if tb:
        msg += f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})"
    return msg[:limit]


def run_job(job: Job) -> Row:
    """One job in a worker: its spec looked up again by index (specs are not pickled)."""
    info = ARCHS[job.arch]
    try:
        specs = specs_of(job.source, job.arch)
        spec = specs[job.index] if job.index < len(specs) else None
        if spec is None or (spec.label or f"#{job.index}") != job.label:
            raise RuntimeError(f"{job.source}.compile_specs({job.arch!r}) changed during the run; run again")
        row = compile_one(spec, info, job.aligned_strides)
    except Exception as exc:  # a compile error is a result, not a crash of the checker
        row = Row(job.kernel, job.arch, job.label, status="FAIL", problems=[f"compile failed: {describe(exc)}"])
    row.source = job.source
    return row


def probe_arch(arch: str) -> str | None:
    """None when the installed Triton/LLVM can compile for arch, else the reason."""
    info = ARCHS[arch]
    try:
        import triton
        from triton.backends.compiler import GPUTarget

        src = triton.compiler.ASTSource(fn=_probe_kernel(), signature={"x_ptr": "*fp32"}, constexprs={})
        triton.compile(src, target=GPUTarget(info.backend, info.target_arch, info.warp_size),
                       options={"num_warps": 1})
        return None
    except Exception as exc:
        return describe(exc, 200)


_PROBE = None


def _probe_kernel() -> Any:
    global _PROBE
    if _PROBE is None:
        import triton
        import triton.language as tl

        @triton.jit
        def check_kernels_probe(x_ptr):
            tl.store(x_ptr + tl.arange(0, 64), tl.zeros([64], tl.float32))

        _PROBE = check_kernels_probe
    return _PROBE


# ----------------------------------------------------------------------------- the pool
def run_jobs(jobs: list[Job], procs: int = 2, fresh_cache: bool = False,
             progress: Callable[[int, int, Row], None] | None = None) -> tuple[list[Row], dict[str, str], list[str]]:
    """Compile every job in ``procs`` spawned workers -> (rows, skipped archs with the reason,
    notes). An arch the installed Triton cannot target gives one FAIL row when it is
    ``required``, else a note and no rows. ``fresh_cache``: compile into a new empty Triton
    cache (honest compile times). ``progress(i, n, row)`` is called as each job finishes."""
    procs = max(1, procs)
    rows: list[Row] = []
    notes: list[str] = []
    cache = tempfile.TemporaryDirectory(prefix="check_kernels_cache_") if fresh_cache else None
    ctx = multiprocessing.get_context("spawn")
    # The spawned workers import the parent's main module (and so Triton) before their
    # initializer runs: without TRITON_INTERPRET in their environment that import makes real
    # JIT functions (with it, compiling failed whenever Triton's cache missed).
    interpret = os.environ.pop("TRITON_INTERPRET", None)
    try:
        pool = ProcessPoolExecutor(max_workers=procs, mp_context=ctx, initializer=worker_init,
                                   initargs=(list(sys.path), cache.name if cache else None))
        # start every worker now, without TRITON_INTERPRET (one is spawned per task submitted while
        # none is idle)
        for f in [pool.submit(time.sleep, 0.2) for _ in range(procs)]:
            f.result()
    finally:
        if interpret is not None:
            os.environ["TRITON_INTERPRET"] = interpret
    with pool:
        used_archs = sorted({j.arch for j in jobs}, key=list(ARCHS).index)
        probes = dict(zip(used_archs, pool.map(probe_arch, used_archs)))
        skipped = {a: why for a, why in probes.items() if why is not None}
        for arch, why in skipped.items():
            if ARCHS[arch].required:
                rows.append(Row("probe", arch, "-", status="FAIL",
                                problems=[f"Triton cannot compile for {arch}: {why}"]))
            else:
                notes.append(f"{arch}: not supported by the installed Triton/LLVM, skipped ({why})")
        todo = [j for j in jobs if j.arch not in skipped]
        for i, row in enumerate(pool.map(run_job, todo), 1):
            rows.append(row)
            if progress is not None:
                progress(i, len(todo), row)
    if cache:
        cache.cleanup()
    return rows, skipped, notes
