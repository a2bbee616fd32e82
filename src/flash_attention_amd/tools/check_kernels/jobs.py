"""What to compile (``Job``: one compile spec of one source for one arch) and what came back
(``Row``: one config's resources and verdict).

Sources are the launchers' ``compile_specs(arch) -> list[CompileSpec]`` (``LAUNCHERS``) or,
with ``--specs``, other modules or ``.py`` files exposing the same function (tests, sweeps).
"""
from __future__ import annotations

import importlib
import importlib.util
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

LAUNCHERS = (
    "flash_attention_amd.launch.fwd",
    "flash_attention_amd.launch.fwd_ws",
    "flash_attention_amd.launch.fwd_gluon",
    "flash_attention_amd.launch.bwd",
    "flash_attention_amd.launch.bwd_ws",
    "flash_attention_amd.launch.bwd_gluon",
    "flash_attention_amd.launch.decode",
)
QUICK_PER_KERNEL = 2  # configs per (kernel, arch) in --quick: the heaviest and the lightest


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


def load_source(source: str) -> ModuleType:
    """The module of a spec source: an importable module name or the path of a .py file."""
    if source.endswith(".py"):
        path = Path(source).resolve()
        name = "_check_kernels_specs_" + re.sub(r"\W", "_", path.stem)
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


def specs_of(source: str, arch: str) -> list[Any]:
    """``source.compile_specs(arch)``, once per process (workers look specs up by index)."""
    key = (source, arch)
    if key not in _SPEC_CACHE:
        _SPEC_CACHE[key] = list(load_source(source).compile_specs(arch))
    return _SPEC_CACHE[key]


def spec_weight(spec: Any) -> float:
    """How heavy a config is likely to be: tile sizes, head dim, flags switched on (bool constexprs,
    and the bits of a kernel's FEATURES: kernels/features.py)."""
    w = 0.0
    for name, val in spec.constexprs.items():
        if isinstance(val, bool):
            w += 1.0 if val else 0.0
        elif name == "FEATURES" and isinstance(val, int):
            w += bin(val).count("1")
        elif isinstance(val, int) and re.search(r"BLOCK|HEAD|DIM", str(name).upper()):  # name: or a tuple path
            w += math.log2(max(1, val)) * 4.0
    return w


def collect(sources: list[str], archs: list[str]) -> tuple[list[Job], list[Row], list[str]]:
    """Jobs for every (source, arch, spec); rows for sources that failed; notes."""
    jobs: list[Job] = []
    failed: list[Row] = []
    notes: list[str] = []
    for source in sources:
        try:
            mod = load_source(source)
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
        only = getattr(mod, "COMPILE_ARCHS", None)  # a launcher of some archs only (fwd_ws, bwd_ws: sm90)
        for arch in archs:
            if only is not None and arch not in only:
                continue
            try:
                specs = specs_of(source, arch)
            except Exception as exc:
                failed.append(Row("compile_specs", arch, source, source, "FAIL",
                                  [f"compile_specs({arch!r}) raised {exc!r}"]))
                continue
            if not specs:
                notes.append(f"{source}: no configs for {arch}")
            for i, spec in enumerate(specs):
                jobs.append(Job(source, arch, i, spec.kernel, spec.label or f"#{i}", spec_weight(spec)))
    return jobs, failed, notes


def quick_subset(jobs: list[Job]) -> list[Job]:
    """Per (source, kernel, arch): the heaviest and the lightest config (by spec_weight)."""
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
