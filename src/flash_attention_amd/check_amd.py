"""``flash-attention-amd check-amd``: compile every kernel config for AMD and NVIDIA targets
on any machine (no GPU needed) and check the resources each one uses.

Every launcher module (``launch/fwd.py``, ``launch/bwd.py``, ``launch/decode.py``) exposes
``compile_specs(arch) -> list[CompileSpec]``. For each spec and each target architecture this
module runs ``triton.compile(ASTSource(...), target=GPUTarget(...))`` (Triton ships LLVM with
the AMDGPU backend and NVIDIA's ptxas, so this works offline on a CPU) and reads back:

- AMD (``.asm["amdgcn"]``): the ``.amdgpu_metadata`` block (``.vgpr_count`` (includes AGPRs),
  ``.agpr_count``, ``.sgpr_count``, ``.vgpr_spill_count``, ``.sgpr_spill_count``,
  ``.private_segment_fixed_size`` = scratch bytes per lane), LLVM's ``; Occupancy:`` line and
  the ``v_mfma_*`` / ``v_wmma_*`` instructions.
- NVIDIA (``.asm["cubin"]``, ``.asm["ptx"]``): registers / local memory / stack from
  ``cuobjdump --dump-resource-usage``, spill stores from ``ptxas -v`` when there is local
  memory (both shipped in the Triton wheel), and ``mma`` / ``wgmma`` in the PTX.
- Both: the shared memory (LDS) Triton allocates (``metadata.shared``) and, from the TTGIR,
  whether each ``tt.dot`` got a matrix-core layout (``amd_mfma``, ``amd_wmma``, ``nvidia_mma``)
  or fell back to FMA (``blocked``).

A config FAILS when it does not compile, spills registers or uses scratch / local memory,
needs more shared memory than one workgroup may have on the arch (the launch would raise
OutOfResources), or lowers a ``tl.dot`` without matrix instructions. ``main`` returns 1 then.
SGPRs spilled into VGPR lanes and compiler warnings only make a row ``warn``.

Occupancy (waves per SIMD on AMD, warps per SM sub-partition on NVIDIA) is computed here, see
``occupancy_amd`` / ``occupancy_nvidia`` for the formulas and their sources; on AMD it is
cross-checked against the occupancy LLVM prints (which ignores Triton's dynamic LDS).

Which configs: every row of each launcher's tables (main, options and dropout tiers), fp16 and
bf16, in the variants the row serves (plain / causal / every option / every option and
dropout); the backward dK/dV kernel in its MHA (``group`` == 1, a constant) and GQA builds.

Each kernel is compiled as Triton's JIT specialises it for a launch on torch tensors:
pointers 16-byte aligned (and within 2 GiB on AMD, for buffer loads) and, by default, the
``stride*`` arguments divisible by 16 (``--strides unaligned`` checks the variant Triton builds
for other strides, e.g. head dim 40).

Compilation runs in ``spawn`` worker processes that switch Triton's interpreter off (the
kernels must be real ``JITFunction``s, even when the caller runs under TRITON_INTERPRET=1).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

LAUNCHERS = (
    "flash_attention_amd.launch.fwd",
    "flash_attention_amd.launch.bwd",
    "flash_attention_amd.launch.decode",
)


@dataclass(frozen=True)
class ArchInfo:
    """Static facts of one target. AMD: per SIMD; NVIDIA: per SM (4 sub-partitions)."""

    name: str  # the name launchers use: "gfx942", "sm90"
    backend: str  # "hip" | "cuda"
    target_arch: Any  # GPUTarget.arch: "gfx942" | 90
    warp_size: int
    family: str
    required: bool  # False: skipped with a note when the installed Triton/LLVM lacks it
    regs_total: int  # AMD: VGPRs per lane per SIMD (AGPRs included); NVIDIA: 32-bit regs per SM
    reg_granule: int  # AMD: VGPRs per allocation block; NVIDIA: registers per warp allocation
    max_waves: int  # AMD: waves per SIMD; NVIDIA: warps per SM
    lds_per_cu: int  # bytes of LDS / shared memory per CU (WGP on RDNA) / SM
    lds_per_group: int  # bytes one workgroup / block may allocate
    simds: int = 4  # SIMDs per CU (or WGP); NVIDIA: SM sub-partitions
    max_blocks: int = 32  # NVIDIA: resident blocks per SM


# AMD figures: LLVM AMDGPU backend, llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.cpp,
# IsaInfo::getVGPRAllocGranule / getTotalNumVGPRs / getMaxWavesPerEU /
# getNumWavesPerEUWithNumVGPRs (gfx90a-class: granule 8, 512 unified VGPR+AGPR, 8 waves;
# gfx11/gfx12 with the 1.5x register file: granule 24, 1536 VGPRs in wave32, 16 waves);
# LDS sizes from getLocalMemorySize / AMD's CDNA3, CDNA4, RDNA3 ISA guides (64 KiB per CU on
# CDNA2/3, 160 KiB on CDNA4, 128 KiB per WGP on RDNA3/4 with 64 KiB per workgroup).
# NVIDIA figures: CUDA C Programming Guide, "Technical Specifications per Compute Capability"
# (64K registers and 64 warps per SM, register allocation unit 256 per warp, shared memory
# per SM 164 KiB / 228 KiB and per block 163 KiB / 227 KiB on sm80 / sm90, 1 KiB reserved
# per block).
ARCHS: dict[str, ArchInfo] = {
    a.name: a
    for a in (
        ArchInfo("gfx90a", "hip", "gfx90a", 64, "CDNA2 MI200", True, 512, 8, 8, 65536, 65536),
        ArchInfo("gfx942", "hip", "gfx942", 64, "CDNA3 MI300", True, 512, 8, 8, 65536, 65536),
        ArchInfo("gfx950", "hip", "gfx950", 64, "CDNA4 MI350", False, 512, 8, 8, 163840, 163840),
        ArchInfo("gfx1100", "hip", "gfx1100", 32, "RDNA3 RX 7900", True, 1536, 24, 16, 131072, 65536),
        ArchInfo("gfx1201", "hip", "gfx1201", 32, "RDNA4 RX 9070", False, 1536, 24, 16, 131072, 65536),
        ArchInfo("sm80", "cuda", 80, 32, "Ampere A100", True, 65536, 256, 64, 167936, 166912),
        ArchInfo("sm90", "cuda", 90, 32, "Hopper H100", True, 65536, 256, 64, 233472, 232448),
    )
}
QUICK_ARCHS = ("gfx90a", "gfx942", "gfx1100")  # NVIDIA kernels also run on the team's H100
QUICK_PER_KERNEL = 2  # configs per (kernel, arch) in --quick: the heaviest and the lightest


# ----------------------------------------------------------------------------- occupancy
def occupancy_amd(info: ArchInfo, vgprs: int, lds_bytes: int, num_warps: int) -> tuple[int, int, int]:
    """(waves per SIMD, VGPR-limited, LDS-limited) for one workgroup of num_warps waves.

    VGPR limit (LLVM's getNumWavesPerEUWithNumVGPRs): min(max_waves, regs_total //
    roundup(vgprs, granule)), max_waves below one granule. ``vgprs`` is ``.vgpr_count``, which
    on gfx90a+ already counts the AGPRs (arch VGPRs rounded to 4, then + AGPRs).
    LDS limit: workgroups per CU = lds_per_cu // lds_bytes, their waves spread over the SIMDs.
    """
    if vgprs < info.reg_granule:
        by_vgpr = info.max_waves
    else:
        rounded = -(-vgprs // info.reg_granule) * info.reg_granule
        by_vgpr = min(info.max_waves, max(1, info.regs_total // rounded))
    if lds_bytes <= 0:
        by_lds = info.max_waves
    else:
        groups = info.lds_per_cu // lds_bytes
        by_lds = min(info.max_waves, (groups * num_warps) // info.simds)
    return min(by_vgpr, by_lds), by_vgpr, by_lds


def occupancy_nvidia(info: ArchInfo, regs: int, smem_bytes: int, num_warps: int) -> tuple[int, int, int]:
    """(warps per SM sub-partition, register-limited, smem-limited), CUDA occupancy rules.

    Registers are allocated per warp in units of 256 (regs * 32 rounded up); resident warps
    = 65536 // that, whole blocks only. Shared memory: blocks = smem_per_SM // (smem + 1 KiB).
    Reported per sub-partition (SM / 4) to compare with AMD's waves per SIMD (max 16).
    """
    per_warp = max(1, -(-regs * info.warp_size // info.reg_granule)) * info.reg_granule
    blocks_reg = min(info.max_blocks, (info.regs_total // per_warp) // num_warps)
    blocks_smem = info.max_blocks if smem_bytes <= 0 else info.lds_per_cu // (smem_bytes + 1024)
    blocks_warps = info.max_waves // num_warps
    cap = blocks_warps * num_warps // info.simds
    by_reg = min(cap, blocks_reg * num_warps // info.simds)
    by_smem = min(cap, blocks_smem * num_warps // info.simds)
    return min(by_reg, by_smem), by_reg, by_smem


# ----------------------------------------------------------------------------- parsing
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


# ----------------------------------------------------------------------------- jobs
@dataclass
class Job:
    source: str  # launcher module name, or a .py file path
    arch: str
    index: int  # position in source.compile_specs(arch)
    kernel: str = ""
    label: str = ""
    weight: float = 0.0
    aligned_strides: bool = True


@dataclass
class Row:
    kernel: str
    arch: str
    label: str
    source: str = ""
    status: str = "ok"  # ok | warn (SGPR spills, compiler warnings) | FAIL
    problems: list[str] = field(default_factory=list)
    num_warps: int = 0
    vgprs: int = -1  # AMD .vgpr_count (AGPRs included); NVIDIA registers per thread
    agprs: int = 0
    sgprs: int = -1
    spills: int = 0  # AMD .vgpr_spill_count; NVIDIA ptxas "bytes spill stores" / 4
    sgpr_spills: int = 0  # AMD SGPRs spilled into VGPR lanes (no memory traffic): a warning only
    scratch: int = 0  # AMD private segment bytes per lane; NVIDIA local + stack bytes per thread
    lds: int = 0  # shared memory bytes per workgroup
    occupancy: int = -1
    occ_by_regs: int = -1
    occ_by_lds: int = -1
    llvm_occupancy: int = -1
    dots: int = 0
    matrix_dots: int = 0
    matrix: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # compiler warnings (e.g. deprecated options)
    compile_s: float = 0.0


def _load_source(source: str):
    if source.endswith(".py"):
        path = Path(source).resolve()
        name = "_check_amd_specs_" + re.sub(r"\W", "_", path.stem)
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {source}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(source)


_SPEC_CACHE: dict[tuple[str, str], list] = {}


def _specs(source: str, arch: str) -> list:
    key = (source, arch)
    if key not in _SPEC_CACHE:
        _SPEC_CACHE[key] = list(_load_source(source).compile_specs(arch))
    return _SPEC_CACHE[key]


def _spec_weight(spec) -> float:
    """How heavy a config is likely to be: tile sizes, head dim, flags switched on."""
    w = 0.0
    for name, val in spec.constexprs.items():
        if isinstance(val, bool):
            w += 1.0 if val else 0.0
        elif isinstance(val, int) and re.search(r"BLOCK|HEAD|DIM", name.upper()):
            w += math.log2(max(1, val)) * 4.0
    return w


def collect(sources: list[str], archs: list[str]) -> tuple[list[Job], list[Row], list[str]]:
    """Jobs for every (source, arch, spec); rows for sources that failed; notes."""
    jobs: list[Job] = []
    failed: list[Row] = []
    notes: list[str] = []
    for source in sources:
        try:
            mod = _load_source(source)
        except ModuleNotFoundError as exc:
            if exc.name == source:
                notes.append(f"{source}: not present yet, skipped")
                continue
            failed.append(Row("import", "-", source, source, "FAIL", [f"import failed: {exc!r}"]))
            continue
        except Exception as exc:
            failed.append(Row("import", "-", source, source, "FAIL", [f"import failed: {exc!r}"]))
            continue
        if not callable(getattr(mod, "compile_specs", None)):
            notes.append(f"{source}: has no compile_specs(arch), skipped")
            continue
        for arch in archs:
            try:
                specs = _specs(source, arch)
            except Exception as exc:
                failed.append(Row("compile_specs", arch, source, source, "FAIL",
                                  [f"compile_specs({arch!r}) raised {exc!r}"]))
                continue
            if not specs:
                notes.append(f"{source}: no configs for {arch}")
            for i, spec in enumerate(specs):
                jobs.append(Job(source, arch, i, spec.kernel, spec.label or f"#{i}", _spec_weight(spec)))
    return jobs, failed, notes


def quick_subset(jobs: list[Job]) -> list[Job]:
    """Per (source, kernel, arch): the heaviest and the lightest config (by _spec_weight)."""
    groups: dict[tuple[str, str, str], list[Job]] = {}
    for job in jobs:
        groups.setdefault((job.source, job.kernel, job.arch), []).append(job)
    keep: list[Job] = []
    for group in groups.values():
        ordered = sorted(group, key=lambda j: (-j.weight, j.index))
        picked = [ordered[0]] + ([ordered[-1]] if len(ordered) > 1 else [])
        keep.extend(sorted(picked[:QUICK_PER_KERNEL], key=lambda j: j.index))
    order = {id(j): i for i, j in enumerate(jobs)}
    return sorted(keep, key=lambda j: order[id(j)])


# ----------------------------------------------------------------------------- worker side
def _worker_init(sys_path: list[str], cache_dir: str | None) -> None:
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
        raise RuntimeError("check-amd worker: Triton was imported in interpreter mode before the worker started")
    triton.knobs.runtime.interpret = False
    if cache_dir:
        triton.knobs.cache.dir = cache_dir


def _attrs_for(fn, signature: dict[str, str], backend: str, aligned_strides: bool = True) -> dict:
    """The specialisation Triton's JIT gives a launch with torch tensors: pointers 16-byte
    aligned (and, on AMD with buffer ops, within 2 GiB); with ``aligned_strides`` the integer
    arguments named ``stride*`` divisible by 16 (contiguous tensors whose head dim is a
    multiple of 16). Other integers (lengths, seeds, window bounds) get no hint."""
    import triton

    attrs = {}
    buffer_ops = backend == "hip" and triton.knobs.amd.use_buffer_ops
    for name, ty in signature.items():
        index = fn.arg_names.index(name)
        # a tuple argument (e.g. a tensor's strides): its elements, at paths (index, position)
        for path, elem in ([((index, j), t) for j, t in enumerate(ty)] if isinstance(ty, tuple) else [((index,), ty)]):
            if elem.startswith("*"):
                attrs[path] = [["tt.divisibility", 16]] + ([["tt.pointer_range", 32]] if buffer_ops else [])
            elif aligned_strides and elem in ("i32", "i64") and name.startswith("stride"):
                attrs[path] = [["tt.divisibility", 16]]
    return attrs


def _cuobjdump_path() -> str:
    import triton

    return triton.knobs.nvidia.cuobjdump.path


def _ptxas_spill_stores(ptx: str, info: ArchInfo) -> int:
    """Bytes of spill stores ptxas reports (``ptxas -v``) for this PTX; run only when the
    cubin has a stack frame or local memory, to tell register spills from other local use."""
    import triton

    gpu = f"sm_{info.target_arch}" + ("a" if info.target_arch == 90 else "")
    with tempfile.NamedTemporaryFile(suffix=".ptx", mode="w") as f:
        f.write(ptx)
        f.flush()
        log = subprocess.run([triton.knobs.nvidia.ptxas.path, "-lineinfo", "-v", f"--gpu-name={gpu}", f.name,
                              "-o", os.devnull], capture_output=True, text=True, check=True).stderr
    m = re.search(r"(\d+) bytes spill stores", log)
    if not m:
        raise ValueError(f"cannot read ptxas -v: {log[-300:]!r}")
    return int(m.group(1))


def compile_one(spec, info: ArchInfo, aligned_strides: bool = True) -> Row:
    """Compile one spec for one arch and fill a Row (raises on compile errors)."""
    import triton
    from triton.backends.compiler import GPUTarget

    row = Row(spec.kernel, info.name, spec.label)
    options = dict(spec.options)
    row.num_warps = int(options.get("num_warps", 4))
    target = GPUTarget(info.backend, info.target_arch, info.warp_size)
    src = triton.compiler.ASTSource(
        fn=spec.fn, signature=dict(spec.signature), constexprs=dict(spec.constexprs),
        attrs=_attrs_for(spec.fn, spec.signature, info.backend, aligned_strides),
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
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(asm["cubin"])
            f.flush()
            out = subprocess.run([_cuobjdump_path(), "--dump-resource-usage", f.name],
                                 capture_output=True, text=True, check=True).stdout
        res = parse_cuobjdump(out)
        row.vgprs = res["regs"]
        row.scratch = res["local"] + res["stack"]
        row.spills = _ptxas_spill_stores(asm["ptx"], info) // 4 if row.scratch else 0
        row.lds += res["static_shared"]
        row.matrix = nvidia_matrix_instrs(asm["ptx"])
        row.occupancy, row.occ_by_regs, row.occ_by_lds = occupancy_nvidia(info, row.vgprs, row.lds, row.num_warps)
    judge(row, info, spec.accepted_spills)
    return row


def judge(row: Row, info: ArchInfo, accepted_spills: str = "") -> None:
    """Append the problems of a compiled row; status FAIL when there is any.

    On NVIDIA a spec may carry ``accepted_spills`` (the measurement that keeps a spilling config:
    spill traffic there stays in L1); its spills then count as a warning. Never on AMD."""
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
    def first(e):
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


def _run_job(job: Job) -> Row:
    info = ARCHS[job.arch]
    try:
        specs = _specs(job.source, job.arch)
        spec = specs[job.index] if job.index < len(specs) else None
        if spec is None or (spec.label or f"#{job.index}") != job.label:
            raise RuntimeError(f"{job.source}.compile_specs({job.arch!r}) changed during the run; run again")
        row = compile_one(spec, info, job.aligned_strides)
    except Exception as exc:  # a compile error is a result, not a crash of the checker
        row = Row(job.kernel, job.arch, job.label, status="FAIL", problems=[f"compile failed: {describe(exc)}"])
    row.source = job.source
    return row


def _probe_arch(arch: str) -> str | None:
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


def _probe_kernel():
    global _PROBE
    if _PROBE is None:
        import triton
        import triton.language as tl

        @triton.jit
        def check_amd_probe(x_ptr):
            tl.store(x_ptr + tl.arange(0, 64), tl.zeros([64], tl.float32))

        _PROBE = check_amd_probe
    return _PROBE


# ----------------------------------------------------------------------------- report
_HEAD = ("kernel", "arch", "config", "VGPR(AGPR)/REG", "SGPR", "spill", "scratch", "LDS", "occ",
         "matrix instructions", "status")


def _cells(r: Row) -> tuple[str, ...]:
    regs = "-" if r.vgprs < 0 else (f"{r.vgprs}({r.agprs})" if r.agprs else str(r.vgprs))
    occ = "-" if r.occupancy < 0 else f"{r.occupancy}"
    if r.occupancy >= 0 and r.occ_by_lds < r.occ_by_regs:
        occ += "L"  # limited by LDS / shared memory
    mat = ", ".join(f"{k} x{v}" for k, v in sorted(r.matrix.items())) or ("-" if r.dots == 0 else "NONE")
    status = r.status if not r.problems else f"{r.status}: " + "; ".join(r.problems)
    spill = str(r.spills) + (f"+{r.sgpr_spills}s" if r.sgpr_spills else "")
    return (r.kernel, r.arch, r.label, regs, "-" if r.sgprs < 0 else str(r.sgprs), spill,
            str(r.scratch), str(r.lds), occ, mat, status)


def format_table(rows: list[Row]) -> str:
    """Plain-text table, one line per config."""
    lines = [_cells(r) for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(_HEAD)]
    widths[-1] = len(_HEAD[-1])
    fmt = lambda cells: " | ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [fmt(_HEAD), "-+-".join("-" * w for w in widths)]
    out.extend(fmt(line) for line in lines)
    return "\n".join(out)


def summarize(rows: list[Row]) -> list[dict[str, Any]]:
    """Per (kernel, arch): config count, ok / warn / FAIL, VGPR and occupancy ranges, worst spill."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.kernel, r.arch), []).append(r)
    out = []
    for (kernel, arch), rs in groups.items():
        built = [r for r in rs if r.vgprs >= 0]
        out.append(dict(
            kernel=kernel, arch=arch, configs=len(rs), ok=sum(r.status == "ok" for r in rs),
            warn=sum(r.status == "warn" for r in rs), fail=sum(r.status == "FAIL" for r in rs),
            compile_errors=sum(r.vgprs < 0 for r in rs),
            vgprs=(min(r.vgprs for r in built), max(r.vgprs for r in built)) if built else None,
            max_spills=max((r.spills for r in built), default=0),
            occupancy=(min(r.occupancy for r in built), max(r.occupancy for r in built)) if built else None,
        ))
    return out


def format_markdown(rows: list[Row]) -> str:
    """Markdown: the per-(kernel, arch) summary, then every config."""
    esc = lambda c: c.replace("|", "\\|")  # noqa: E731
    span = lambda t: "-" if t is None else (str(t[0]) if t[0] == t[1] else f"{t[0]}-{t[1]}")  # noqa: E731
    out = ["| kernel | arch | configs | ok | warn | FAIL | of which compile errors | VGPR/REG | worst spill | occ |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summarize(rows):
        out.append(f"| {s['kernel']} | {s['arch']} | {s['configs']} | {s['ok']} | {s['warn']} | {s['fail']} | "
                   f"{s['compile_errors']} | {span(s['vgprs'])} | {s['max_spills']} | {span(s['occupancy'])} |")
    out += ["", "| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
    out.extend("| " + " | ".join(esc(c) for c in _cells(r)) + " |" for r in rows)
    return "\n".join(out) + "\n"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="flash-attention-amd check-amd",
        description="Compile every kernel config for AMD (gfx90a, gfx942, gfx1100, gfx950, gfx1201) "
        "and NVIDIA (sm80, sm90) targets without a GPU; fail on spills, scratch, shared memory "
        "overflow, tl.dot without matrix instructions, or compile errors.",
    )
    p.add_argument("--arch", action="append", default=None,
                   help=f"target(s), comma separated or repeated; default all: {','.join(ARCHS)}")
    p.add_argument("--kernel", action="append", default=None,
                   help="only these kernels (fwd, bwd_dkdv, bwd_dq, decode, ...), comma separated or repeated")
    p.add_argument("--quick", action="store_true",
                   help=f"CI subset: archs {','.join(QUICK_ARCHS)} (unless --arch), and per kernel and arch "
                   "the heaviest and the lightest config")
    p.add_argument("--json", metavar="PATH", help="also write the rows and a summary as JSON")
    p.add_argument("--markdown", metavar="PATH", help="also write the summary and the table as Markdown")
    p.add_argument("--jobs", type=int, default=2, help="compile processes (default 2)")
    p.add_argument("--specs", action="append", default=None, metavar="MODULE_OR_FILE",
                   help="compile_specs sources instead of the library's launchers (module name or .py file)")
    p.add_argument("--progress", action="store_true", help="print each config to stderr as it is done")
    p.add_argument("--strides", choices=("aligned", "unaligned"), default="aligned",
                   help="aligned (default): compile the variant Triton specialises for stride arguments "
                   "divisible by 16 (contiguous tensors, head dim a multiple of 16); unaligned: the variant "
                   "for other strides (e.g. head dim 40 or 72), which needs more registers")
    p.add_argument("--fresh-cache", action="store_true",
                   help="compile into a new empty Triton cache (honest compile times)")
    return p.parse_args(argv)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for vals in (values or []) for v in vals.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code (0 all configs pass, 1 a failure, 2 bad usage)."""
    args = _parse_args(argv)
    t_start = time.perf_counter()
    archs = _split(args.arch) or list(QUICK_ARCHS if args.quick else ARCHS)
    bad = [a for a in archs if a not in ARCHS]
    if bad:
        print(f"check-amd: unknown arch {', '.join(bad)}; known: {', '.join(ARCHS)}", file=sys.stderr)
        return 2
    sources = _split(args.specs) or list(LAUNCHERS)
    kernels = set(_split(args.kernel))
    jobs, rows, notes = collect(sources, archs)
    if kernels:
        jobs = [j for j in jobs if j.kernel in kernels]
    if args.quick:
        jobs = quick_subset(jobs)
    for job in jobs:
        job.aligned_strides = args.strides == "aligned"
    if not jobs and not rows:
        for n in notes:
            print(f"note: {n}")
        print("check-amd: no kernel configs to check (no launcher exposes compile_specs?)", file=sys.stderr)
        return 1

    cache = tempfile.TemporaryDirectory(prefix="check_amd_cache_") if args.fresh_cache else None
    ctx = multiprocessing.get_context("spawn")
    # The spawned workers import the parent's main module (and so Triton) before their
    # initializer runs: without TRITON_INTERPRET in their environment that import makes real
    # JIT functions (with it, compiling failed whenever Triton's cache missed).
    interpret = os.environ.pop("TRITON_INTERPRET", None)
    try:
        pool = ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx, initializer=_worker_init,
                                   initargs=(list(sys.path), cache.name if cache else None))
        # start every worker now, without TRITON_INTERPRET (one is spawned per task submitted while
        # none is idle)
        for f in [pool.submit(time.sleep, 0.2) for _ in range(max(1, args.jobs))]:
            f.result()
    finally:
        if interpret is not None:
            os.environ["TRITON_INTERPRET"] = interpret
    with pool:
        used_archs = sorted({j.arch for j in jobs}, key=list(ARCHS).index)
        probes = dict(zip(used_archs, pool.map(_probe_arch, used_archs)))
        skipped = {a: why for a, why in probes.items() if why is not None}
        for arch, why in skipped.items():
            if ARCHS[arch].required:
                rows.append(Row("probe", arch, "-", status="FAIL",
                                problems=[f"Triton cannot compile for {arch}: {why}"]))
            else:
                notes.append(f"{arch}: not supported by the installed Triton/LLVM, skipped ({why})")
        todo = [j for j in jobs if j.arch not in skipped]
        for i, row in enumerate(pool.map(_run_job, todo), 1):
            rows.append(row)
            if args.progress:
                print(f"[{i}/{len(todo)}] {row.kernel} {row.arch} {row.label}: {row.status} ({row.compile_s:.1f} s)",
                      file=sys.stderr, flush=True)
    if cache:
        cache.cleanup()

    wall = time.perf_counter() - t_start
    print(format_table(rows))
    for n in notes:
        print(f"note: {n}")
    n_fail = sum(r.status == "FAIL" for r in rows)
    compile_total = sum(r.compile_s for r in rows)
    n_warn = sum(r.status == "warn" for r in rows)
    print(f"check-amd: {len(rows)} configs on {', '.join(a for a in archs if a not in skipped)}: "
          f"{len(rows) - n_fail - n_warn} ok, {n_warn} warn, {n_fail} FAIL; wall {wall:.1f} s "
          f"(compile {compile_total:.1f} s over {max(1, args.jobs)} processes)")
    print(f"strides: {args.strides}; occ = waves per SIMD (AMD) / warps per SM sub-partition (NVIDIA); "
          "L = limited by LDS/shared memory; spill +Ns = N SGPRs spilled to VGPR lanes (a warning, "
          "no memory traffic)")
    if args.json:
        payload = {
            "archs": archs, "skipped_archs": skipped, "quick": args.quick, "strides": args.strides, "notes": notes,
            "wall_s": wall, "n_fail": n_fail, "summary": summarize(rows), "rows": [asdict(r) for r in rows],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(format_markdown(rows))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
