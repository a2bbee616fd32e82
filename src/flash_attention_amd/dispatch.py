"""Which backend serves a call, and why.

Every backend answers ``supports(problem) -> None | reason``. The policy walks an explicit
preference list (``preference()``, the rule table below) and takes the first backend that
can serve the call; ``torch`` comes last and serves everything. A backend forced through
``FLASH_ATTENTION_BACKEND`` or ``use_backend()`` that declines raises ``BackendUnavailable``
with its reason: never a silent fallback.

``FLASH_ATTENTION_DEBUG=1`` logs each distinct decision once, with the reasons of the
backends passed over; ``explain(q, k, v, **kwargs)`` returns the same text without running.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from . import config
from .backends.base import Backend
from .params import Problem

logger = logging.getLogger("flash_attention_amd")

# use_backend() stack: a plain list (torch.compile traces list reads, not ContextVars).
_forced_stack: list[str | None] = []
_registry: dict[str, Backend] = {}
_logged: set[tuple] = set()


class BackendUnavailable(RuntimeError):
    """A forced backend cannot serve the call (the message says why)."""


def registry() -> dict[str, Backend]:
    """name -> Backend instance, created on first use (nothing runs at import)."""
    if not _registry:
        from .backends.ck_backend import CkBackend
        from .backends.sdpa_backend import SdpaBackend
        from .backends.torch_backend import TorchBackend
        from .backends.triton_backend import TritonBackend

        for backend in (TritonBackend(), SdpaBackend(), CkBackend(), TorchBackend()):
            _registry[backend.name] = backend
    return _registry


@contextlib.contextmanager
def use_backend(name: str | None):
    """Force a backend inside a ``with`` block (``None`` or "auto" restores automatic choice).

    Example::

        with flash_attention_amd.use_backend("torch"):
            out = flash_attn_func(q, k, v, causal=True)
    """
    if name is not None and name.lower() == "auto":
        name = None
    if name is not None and name.lower() not in config.BACKEND_NAMES:
        raise ValueError(f"use_backend got {name!r}; allowed: {', '.join(config.BACKEND_NAMES)}, 'auto' or None")
    _forced_stack.append(None if name is None else name.lower())
    try:
        yield
    finally:
        _forced_stack.pop()


def forced() -> str | None:
    """The forced backend: use_backend() wins over FLASH_ATTENTION_BACKEND."""
    if _forced_stack and _forced_stack[-1] is not None:
        return _forced_stack[-1]
    if _forced_stack:  # use_backend(None / "auto") overrides the environment
        return None
    return config.forced_backend()


# The rule table. Orders are by measured speed where measured (benchmarks/bench_attention.py
# and bench_decode.py on an H100, results in benchmarks/results/); AMD orders follow the
# vendor paths' coverage and are NOT yet measured on AMD hardware (docs/HARDWARE.md).
#   key: (platform, kind) -> order. platform: "nvidia", "rocm-cdna", "rocm-rdna", "cpu"
_PREFERENCE: dict[tuple[str, str], tuple[str, ...]] = {
    ("nvidia", "attn"): ("triton", "sdpa", "ck", "torch"),
    ("nvidia", "kvcache"): ("triton", "ck", "torch"),
    # CDNA (MI200/MI300): CK's flash_attn build is the vendor's tuned path; ours next.
    ("rocm-cdna", "attn"): ("ck", "triton", "sdpa", "torch"),
    ("rocm-cdna", "kvcache"): ("triton", "ck", "torch"),
    # RDNA3: CK has no backward there (CkBackend declines grads on gfx11); ours first.
    ("rocm-rdna", "attn"): ("triton", "sdpa", "ck", "torch"),
    ("rocm-rdna", "kvcache"): ("triton", "torch"),
    # CPU: torch's SDPA CPU kernels where they serve the call, else our blockwise path.
    # triton runs on CPU only in the interpreter, when forced.
    ("cpu", "attn"): ("sdpa", "torch"),
    ("cpu", "kvcache"): ("torch",),
}


def platform(problem: Problem) -> str:
    if problem.device_type != "cuda":
        return "cpu"
    if not problem.is_rocm:
        return "nvidia"
    return "rocm-rdna" if (problem.arch or "").startswith("gfx1") else "rocm-cdna"


# Where SDPA beats our kernels on NVIDIA (measured on an H100, benchmarks/results/fwd_h100.md
# and bwd_h100.md; ANCHORS.md for cuDNN's backward): plain dense calls that SDPA's cuDNN
# kernel serves (no GQA: cuDNN's GQA path was not measured; no dropout), head dims 64 and
# 128, sm90. Forward ours/cuDNN = 0.61..0.95 over the ANCHORS grid; backward cuDNN is ahead
# of ours on every row. Everywhere else (window, ALiBi, softcap, varlen, LSE, GQA, other
# head dims) triton goes first: >= 1.0x FA2 on every measured row.
_SDPA_FIRST_NVIDIA = {"arch": ("sm90",), "headdim": (64, 128)}


def _sdpa_measured_faster(problem: Problem) -> bool:
    return (
        problem.arch in _SDPA_FIRST_NVIDIA["arch"]
        and problem.headdim == problem.headdim_v
        and problem.headdim in _SDPA_FIRST_NVIDIA["headdim"]
        and problem.nheads == problem.nheads_k
        and problem.dropout_p == 0
    )


def preference(problem: Problem) -> tuple[str, ...]:
    plat = platform(problem)
    if plat == "nvidia" and problem.kind == "attn" and _sdpa_measured_faster(problem):
        return ("sdpa", "triton", "ck", "torch")
    return _PREFERENCE.get((plat, problem.kind), ("torch",))


@dataclass(frozen=True)
class Decision:
    backend: str
    forced: bool
    passed_over: tuple[tuple[str, str], ...]  # (backend, reason it declined)
    problem: Problem

    def describe(self) -> str:
        how = "forced" if self.forced else "auto"
        lines = [f"{self.problem.describe()} -> {self.backend} ({how})"]
        lines += [f"  {name}: {reason}" for name, reason in self.passed_over]
        return "\n".join(lines)


def _why_not(backend: Backend, problem: Problem) -> str | None:
    reason = backend.available()
    if reason is None:
        reason = backend.supports_decode(problem) if problem.kind == "kvcache" else backend.supports(problem)
    return reason


def decide(problem: Problem) -> Decision:
    """Pick the backend for a problem (raises BackendUnavailable if a forced one declines)."""
    backends = registry()
    name = forced()
    if name is not None:
        reason = _why_not(backends[name], problem)
        if reason is not None:
            raise BackendUnavailable(f"forced backend {name!r} cannot serve {problem.describe()}: {reason}")
        return Decision(name, True, (), problem)
    passed = []
    for candidate in preference(problem):
        reason = _why_not(backends[candidate], problem)
        if reason is None:
            return Decision(candidate, False, tuple(passed), problem)
        passed.append((candidate, reason))
    raise BackendUnavailable(
        f"no backend can serve {problem.describe()}: " + "; ".join(f"{n}: {r}" for n, r in passed)
    )


def select(problem: Problem) -> Backend:
    """The Backend that serves this problem; logs the decision once under FLASH_ATTENTION_DEBUG=1."""
    decision = decide(problem)
    if config.debug():
        key = (problem, decision.backend)
        if key not in _logged:
            _logged.add(key)
            logger.warning("flash_attention_amd dispatch: %s", decision.describe())
    return registry()[decision.backend]
