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
import contextvars
import logging
from dataclasses import dataclass, replace

import torch

from . import config
from .backends import registry
from .backends.base import Backend
from .params import Problem

logger = logging.getLogger("flash_attention_amd")

# use_backend() stack, per thread and per asyncio task (a ContextVar holding a tuple).
_forced: contextvars.ContextVar[tuple[tuple[object, str | None], ...]] = contextvars.ContextVar(
    "flash_attention_amd_backend", default=())
# use_backend() blocks entered inside a function torch.compile traces: a plain list, which
# Dynamo traces (it cannot trace ContextVar); empty outside tracing.
_traced: list[str | None] = []
_logged: set[tuple] = set()


class BackendUnavailable(RuntimeError):
    """A forced backend cannot serve the call (the message says why)."""


@contextlib.contextmanager
def use_backend(name: str | None):
    """Force a backend inside a ``with`` block (``None`` or "auto" restores automatic choice).

    The forcing holds for the current thread (and asyncio task) only; blocks may nest and
    exit in any order. Under ``torch.compile`` the backend is the one forced when the
    function is traced.

    Example::

        with flash_attention_amd.use_backend("torch"):
            out = flash_attn_func(q, k, v, causal=True)
    """
    if name is not None and name.lower() == "auto":
        name = None
    if name is not None and config.canonical_backend(name.lower()) is None:
        raise ValueError(f"use_backend got {name!r}; allowed: {', '.join(config.BACKEND_NAMES)}, 'auto' or None")
    value = None if name is None else config.canonical_backend(name.lower())
    if torch.compiler.is_compiling():
        _traced.append(value)
        try:
            yield
        finally:
            _traced.pop()
        return
    entry = (object(), value)  # identity, so that blocks may exit in any order
    _forced.set(_forced.get() + (entry,))
    try:
        yield
    finally:
        _forced.set(tuple(e for e in _forced.get() if e is not entry))


def _forced_eager() -> str | None:
    stack = _forced.get()
    if stack:
        return stack[-1][1]  # None: use_backend(None / "auto") overrides the environment
    return config.forced_backend()


# While torch.compile traces, the eager forcing (use_backend around the compiled call, the
# environment) is read once at trace time and baked into the graph.
_forced_at_trace = torch.compiler.assume_constant_result(_forced_eager)


def forced() -> str | None:
    """The forced backend: use_backend() wins over FLASH_ATTENTION_BACKEND."""
    if torch.compiler.is_compiling():
        if _traced:
            return _traced[-1]
        return _forced_at_trace()
    return _forced_eager()


def forcing_key() -> tuple:
    """What forced() and config.debug() depend on, unparsed (the innermost use_backend() value, else the
    environment's raw values): part of the plan cache's key on every call (core.py), cheaper than calling them.
    Equal keys mean the same forcing and debug mode; the plan built for a key reads forced() and debug()."""
    if torch.compiler.is_compiling():
        return forced(), config.debug()
    stack = _forced.get()
    backend, debug = config.call_env()
    return (stack[-1][1] if stack else backend), debug


# The rule table. Orders are by measured speed where measured (benchmarks/bench_attention.py
# and bench_decode.py on an H100, results in benchmarks/results/); AMD orders follow the
# vendor paths' coverage and are NOT yet measured on AMD hardware (docs/HARDWARE.md).
#   key: (platform, kind) -> order. platform: "nvidia", "rocm-cdna", "rocm-rdna", "cpu"
_PREFERENCE: dict[tuple[str, str], tuple[str, ...]] = {
    # fa4 (flash-attn-4, when installed) before torch: it beats the PyTorch path wherever it serves
    ("nvidia", "attn"): ("triton", "sdpa", "flash_attn", "fa4", "torch"),
    ("nvidia", "kvcache"): ("triton", "flash_attn", "torch"),
    # CDNA (MI200/MI300): the flash_attn package (ROCm's CK build) is the vendor's tuned path; ours next.
    ("rocm-cdna", "attn"): ("flash_attn", "triton", "sdpa", "torch"),
    ("rocm-cdna", "kvcache"): ("triton", "flash_attn", "torch"),
    # RDNA3: CK has no backward there (the flash_attn backend declines grads on gfx11); ours first.
    ("rocm-rdna", "attn"): ("triton", "sdpa", "flash_attn", "torch"),
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
# kernel serves (no dropout), head dims 64, 128
# and 256, sm90. Forward ours/cuDNN = 0.61..0.95 over the ANCHORS grid at 64 / 128; at 256, after
# session 14's tiles, 0.69..0.82 forward and 0.61..0.73 backward (ours/FA2 0.91..1.13 backward;
# benchmarks/results/run11/h100_kernels_d256.md); after session 26's dQ tile 0.68..0.83 forward and
# 0.75..0.87 backward (ours/FA2 1.17..1.32; run23/h100_kernels_d256_final.md), so SDPA still wins there.
# Small calls are the exception: there the host time decides, and our path costs less of it than
# SDPA's (about 30 against 40-45 us per forward call on the H100's host). In a loop of identical
# calls (benchmarks/small_calls.py, results/run11/h100_small_calls.txt) ours took 0.54-0.75x SDPA's
# time per forward and 0.85-0.95x per forward + backward at up to 4.3 GFLOP of forward work
# (4 b h sq sk d, halved when causal; d=64 and 128, e.g. BERT-base b=32 s=128: 1.6), one row 1.03x;
# from 8.6 GFLOP at d=128 SDPA was ahead (1.10-1.46x). Below SMALL_CALL_FLOP triton goes first.
# GQA calls have no direct op in our sdpa backend: they go through F.scaled_dot_product_attention inside
# torch's sdpa_kernel context, which costs tens of microseconds of host time more. Timed the same way with
# 4 query heads per KV head (results/run11/h100_gqa_small_calls_base.txt): ours 0.28-0.47x SDPA's time
# per forward and 0.45-0.80x per forward + backward up to 8.6 GFLOP; at 17 GFLOP 0.67-0.83x forward but
# 0.71-1.23x forward + backward; from 34 GFLOP SDPA is ahead or even. GQA calls use SMALL_CALL_FLOP_GQA.
# (A try at skipping that context when torch's own choice matched it measured slower:
# results/run11/h100_gqa_small_calls_without_context_rejected.txt.)
# Causal GQA at d=64 calls that need gradients keep triton to larger calls (SMALL_CALL_FLOP_GQA64_TRAIN): the rule
# audit (benchmarks/bench_gqa_route.py --auto, results/run20/, H100, two runs) timed ours per forward + backward at
# 0.47-0.78x SDPA's time at 17 GFLOP (32/8 and 16/4 heads, 512 keys), 0.91x at 34 GFLOP (16/4, 1k), 0.88-0.90x at
# 69 GFLOP for 32/8 heads at 1k (three runs; 1.03-1.04x for 16/4 at 2k) and 1.04-1.06x from 137 GFLOP. The forward
# alone (no gradients) keeps the GQA limit: at 17-34 GFLOP ours took 0.54-0.69x SDPA's time in one run and
# 1.13-1.23x in the other (host-bound calls: h100_route_gqa64_short.txt, _after.txt).
# The H200 run (benchmarks/results/h200x2_run1) agrees at d=128: ours/cuDNN 0.79..0.84.
# GQA (dense, no options) at d=64 / 128 / 256: SDPA with enable_gqa is faster than ours on 11 of 12
# rows of benchmarks/results/h100_run3/gqa_route.txt (H100, causal 32/8 heads, 1k-8k, through our
# API: ours takes 1.11-1.44x SDPA's time; d=64 1k fwd+bwd 0.95x), and at d=256 on 17 of 18 rows of
# benchmarks/results/run16/h100_gqa_route_d256.txt (16/8, 32/8 and 8/4 heads: ours 1.12-1.73x SDPA's
# time; the 8/4 1k forward alone 0.91x).
# Dense calls with dropout at d=64 / 128: SDPA (cuDNN, its own Philox stream, reproducible under
# torch.manual_seed like ours) was faster on all 32 rows of benchmarks/results/run16/h100_dropout_route_*.txt
# (dropout 0.1, 16 heads, 512-4096, causal and not: ours 1.08-1.14x SDPA's time forward at d=64, 1.21-1.41x
# at d=128, 1.21-1.46x forward + backward at d=64, 1.42-1.79x at d=128); GQA 32/8 too (run16/h100_dropout_gqa.txt:
# 1.09-1.31x forward, 1.36-1.75x forward + backward, 8 of 8 rows). At d=256 (MHA, run16/h100_dropout_d256.txt)
# ours is faster forward (0.58-0.64x SDPA's time) but slower forward + backward (1.23-1.36x): SDPA first only
# for calls that need gradients there; GQA at d=256 with dropout was not measured and stays with triton.
# deterministic=True backward calls stay with triton too (SDPA's CUDA backward is not bitwise deterministic:
# the sdpa backend declines them). Small dropout calls too: a
# BERT-base-sized call without a mask (b=32 s=128 h=12 d=64, 1.6 GFLOP) took 186-481 us of wall time per
# forward + backward with ours against 101-202 with SDPA, host-bound, in two runs
# (benchmarks/results/run16/h100_bert_call_probe*.txt, "dropout" rows; its kernels 69 against 63 us).
# Head dims 80, 96, 160 and 192 (Phi's 80 / 96, among others), dense MHA 16/16 and GQA 32/8, 1k and 4k, causal
# and not: SDPA was faster on all 64 rows of benchmarks/results/run16/h100_dims_route_causal_*.txt (ours
# 1.17-1.80x its time; our kernels pad these dims to the next power of two). Other head dims (32, 48, 112, ...)
# were not measured and stay with triton.
# Causal calls with seqlen_q != seqlen_k (bottom-right aligned: chunked prefill) are not covered: SDPA serves
# them through torch's CausalBias (its memory-efficient kernel), and ours took 0.62-0.81x its time on all 24
# rows of benchmarks/results/run16/h100_bottom_right_causal_route.txt (16/16 and 32/8 heads, d=64 / 128,
# 512-2048 queries over 2048 more keys, forward and forward + backward). Not causal, the same shapes stay
# with SDPA: it was faster on all 24 rows there (ours 1.01-1.33x its time, run16/h100_cross_attention_route.txt).
# Everywhere else (window, ALiBi, softcap, varlen, LSE, other head dims) triton goes first:
# >= 1.0x FA2 on every measured row.
# Masked calls (a bool attn_bias, which the sdpa backend serves when not causal): triton first. BERT-base's
# calls (key mask, h=12, d=64, s=128-1024), our API with each backend forced, taking turns on an H100
# (benchmarks/results/run17/h100_bert_mask_route.txt): ours took 0.81-0.87x the sdpa backend's time per forward
# + backward (dropout 0.1) and 0.50-0.57x per forward (SDPA's own call is cheaper, but the sdpa backend adds the
# masked_fill that gives hidden rows 0 and the layout's transposes, each an op and an autograd node); whole
# BERT-base training steps were even within their spread (0.90-0.99x against 0.84-1.01x the best of eager and sdpa).
_MASKED_CALLS = "bool-masked call: triton first (measured faster than the sdpa backend's masked route; dispatch.py)"
# Traced by torch.compile, the same BERT-base calls (d=64) go to SDPA: a compiled step is host-bound, and our custom
# ops cost more host time per call than SDPA's (its graph calls cuDNN's op directly). Compiled BERT-base training steps
# on an H100 (benchmarks/results/run35/h100_bert_compiled_route_*.md, sdpa and fa_amd taking turns in one process):
# fa_amd with these calls on triton 1.26 / 1.33x HF sdpa's time at s=128 b=32 / s=512 b=16, forced to the sdpa
# backend 1.10 / 0.99x (our kernels took 0.83x cuDNN's device time there: run35/h100_bert_compiled_profile.md).
_MASKED_TRACED = ("bool-masked call traced by torch.compile: sdpa first (compiled BERT-base steps measured faster "
                  "with it: host-bound; dispatch.py)")
_MASKED_TRACED_HEADDIM = (64,)
# Session 55: where SDPA's kernels give the rows a mask hides entirely 0 themselves (the sdpa backend's
# zeroes_hidden_rows, asked once per kind of call: torch 2.11's cuDNN and memory-efficient kernels do,
# benchmarks/results/run52/h200_a_hidden_rows.md), the sdpa backend's masked route is SDPA's own call, with no rows made
# visible and no masked_fill after it. Then BERT's eager training calls (key mask, dropout 0.1, d=64) go to sdpa first:
# through our API with each backend forced, taking turns on an H200 (run52/h200_b_route_d64.md), triton took 1.00-1.18x
# the sdpa backend's wall time per forward + backward at s=128-1024; whole BERT-base steps 0.89-0.98x the faster of
# eager and sdpa on triton against 0.94-1.04x on sdpa, and the e2e suite's BERT rows read 1.04 / 1.03 / 1.00 / 1.06x
# with sdpa serving them (run52/h200_b_e2e_bert.md; session 54, on triton: 0.89 / 0.96 / 0.97 / 1.02x). Not the
# forward alone (triton 0.72-0.75x the sdpa backend's time at d=64 without grads), not d=128 (h=16, s=512 / 2048:
# triton 0.84-0.86x with grads and dropout, 0.78-0.88x without grads, run52/h200_b_route_d128.md).
_MASKED_SDPA = ("bool-masked training call with dropout: sdpa first (SDPA gives the rows the mask hides 0 itself; "
                "measured faster; dispatch.py)")
_MASKED_SDPA_HEADDIM = (64,)
_SDPA_FIRST_NVIDIA = {"arch": ("sm90",), "headdim": (64, 80, 96, 128, 160, 192, 256),
                      "gqa_headdim": (64, 80, 96, 128, 160, 192, 256), "dropout_headdim": (64, 128)}
SMALL_CALL_FLOP = 4.5e9
SMALL_CALL_FLOP_GQA = 1.0e10
SMALL_CALL_FLOP_GQA64_TRAIN = 7.0e10


def forward_flop(problem: Problem) -> float:
    """4 b h sq sk d of the call's forward, halved when causal (the kernels' TFLOP/s convention)."""
    flop = 4.0 * problem.batch * problem.nheads * problem.seqlen_q * problem.seqlen_k * problem.headdim
    return flop * 0.5 if problem.causal else flop


# Forward-only calls (no gradients: inference, prefill) that the Gluon forward (launch/fwd_gluon.py) serves as fast as
# SDPA or faster: plain dense MHA, as many queries as keys. Through our API with each backend forced, ms per forward
# call without grads, 16k tokens, hidden 2048 (benchmarks/bench_gqa_route.py --fwd-no-grad, H100,
# benchmarks/results/run26/h100_route_fwd_no_grad.txt): d=256 triton / sdpa 0.95 / 1.00x not causal and 0.98 /
# 0.90x causal at 4k / 16k keys; d=128 causal 1.02x at 4k, 0.94x at 16k; d=128 not causal 1.01-1.02x (stays with
# sdpa). The kernels grid agrees on an H200 (run26/h200x4_kernels.md: forward / cuDNN 1.03-1.15x at d=256, 1.07x
# d=128 causal 16k). With gradients SDPA keeps these calls: its backward is faster (dispatch rule above).
# Session 38's audit of the whole table (benchmarks/results/run35/h100_route_*.md, H100, two passes, each backend
# forced through our API and the automatic choice, MHA d=64 / 128 / 256 and GQA 32/8 at d=128, 1k / 4k / 16k, causal
# and not, forward without grads and forward + backward): the automatic choice took 0.96-1.04x the faster forced
# backend's time on 81 of 84 rows (1.06-1.09x on three, each 0.99-1.03x in the other pass). The one steady gain left:
# d=64 not causal at 16k, triton 0.95 / 0.96x SDPA's time per forward (1.02-1.05x at 4k), hence its row below.
_TRITON_FIRST_FWD = {(256, False): 4096, (256, True): 4096, (128, True): 16384, (64, False): 16384}  # (d, causal): keys
# GQA: causal d=128 from 16k keys. Session 45 (H100, benchmarks/results/run42/): the audit's forward with grads at 16k,
# GQA 32/8, triton 0.96-0.97x SDPA's time causal (h100_c_route_gqa*.md, two passes); without grads
# (h100_d_gqa_no_grad_*.md, two passes) causal 0.91 / 0.95x at 16k and 0.96 / 0.94x at 32k, but 0.99 / 1.07x at 8k;
# not causal 0.97-0.98x at 16k and 0.97 / 1.03x at 32k: no row. That table times triton before SDPA, and the H100's
# clocks drift down under a long load (auto_vs_forced_probe.py: one kernel took 6.4 ms, then 7.1-7.4 a few seconds
# later, h100_e_auto_vs_forced_rounds.txt); with the paths interleaved (h100_e_auto_vs_forced.txt) causal 16k still
# read 0.93-0.95x.
_TRITON_FIRST_FWD_GQA = {(128, True): 16384}
# Causal forward calls without grads on small grids (one or two prompts of a few thousand tokens: prefill), MHA or
# GQA, at most SMALL_GRID_TILES query blocks of 128 rows (batch x heads x blocks; about 8 a streaming multiprocessor
# on an H200's 132), from _TRITON_FIRST_FWD_SMALL's keys: the Gluon forward's causal-balanced persistent programs
# finish a grid that SDPA's kernel leaves a tail on. Session 50 (H200,
# benchmarks/results/run47/h200_c_route_fwd_small.md, h200_d_route_fwd_small_gpu*.md; bench_gqa_route.py --auto
# --fwd-no-grad --tokens 4096), ours forced / SDPA forced, time, three samples a row: d=128 8/8 heads 0.67-0.88x at
# 2k-8k (256-512 blocks), 16/16 0.84-0.99x, 32/8 0.71-0.96x (1024 blocks); d=64 from 4k keys 0.60-0.97x (at 2k
# 0.78-1.11x: not taken). The bound (h200_e_grid_bound_gpu*.md, two GPUs): 768 / 1024 blocks 0.89-0.90x / 0.82-0.97x;
# past it ours still read 0.93-0.97x on the H200 (1536 blocks at 4k, 2048 at 4k and 8k), but the H100's audit had b=4
# h=16 4k (2048 blocks) at 1.02x (session 38), so SDPA keeps those but where _TRITON_FIRST_FWD says. Not measured on
# an H100 (the same 132 SMs). These bench rows rotate which path is timed first; the automatic choice, serving the
# same kernel as forced triton but timed third in its row, read up to 1.11x forced triton's time (clocks under a long
# load), so a single ratio here can be off by that much; the rule rests on rows repeated in three samples.
_TRITON_FIRST_FWD_SMALL = {128: 2048, 64: 4096}  # d: least keys
SMALL_GRID_TILES = 1024


def _small_causal_grid(p: Problem) -> bool:
    least = _TRITON_FIRST_FWD_SMALL.get(p.headdim)
    return (least is not None and bool(p.causal) and p.seqlen_k >= least
            and p.batch * p.nheads * -(-p.seqlen_q // 128) <= SMALL_GRID_TILES)


def _triton_first_forward(problem: Problem) -> bool:
    p = problem
    table = _TRITON_FIRST_FWD if p.nheads == p.nheads_k else _TRITON_FIRST_FWD_GQA
    least = table.get((p.headdim, bool(p.causal)))
    return ((least is not None and p.seqlen_k >= least or _small_causal_grid(p)) and not p.needs_grad
            and p.arch in _SDPA_FIRST_NVIDIA["arch"] and p.headdim == p.headdim_v
            and p.seqlen_q == p.seqlen_k and not p.bias
            and p.dropout_p == 0 and not p.fp8 and not p.offsets and not p.is_varlen)


def _masked_traced(problem: Problem) -> bool:
    return (problem.bias == "bool" and not problem.causal and problem.compiling
            and problem.arch in _SDPA_FIRST_NVIDIA["arch"] and problem.headdim in _MASKED_TRACED_HEADDIM
            and problem.headdim_v == problem.headdim)


def _masked_sdpa_first(problem: Problem) -> bool:
    p = problem
    return (p.bias == "bool" and not p.causal and not p.compiling and p.arch in _SDPA_FIRST_NVIDIA["arch"]
            and p.needs_grad and p.dropout_p > 0 and p.headdim == p.headdim_v and p.headdim in _MASKED_SDPA_HEADDIM
            and registry()["sdpa"].available() is None and registry()["sdpa"].zeroes_hidden_rows(p))


def _sdpa_measured_faster(problem: Problem) -> bool:
    if problem.bias:  # masked calls stay with triton (_MASKED_CALLS), but traced ones at d=64 (_MASKED_TRACED) and
        # eager ones SDPA gives the contract's zeros itself (_MASKED_SDPA)
        return _masked_traced(problem) or _masked_sdpa_first(problem)
    if problem.has_window or problem.softcap > 0 or problem.has_alibi or problem.has_sinks:
        return False  # the rules were measured on plain calls (and SDPA declines these: triton goes first anyway)
    if _triton_first_forward(problem):
        return False
    if not (problem.arch in _SDPA_FIRST_NVIDIA["arch"] and problem.headdim == problem.headdim_v
            and problem.headdim in _SDPA_FIRST_NVIDIA["headdim"]
            and not (problem.causal and problem.seqlen_q != problem.seqlen_k)):
        return False
    mha = problem.nheads == problem.nheads_k
    if problem.dropout_p > 0:  # at any size: SDPA's kernels and its host path both measured faster
        if problem.headdim in _SDPA_FIRST_NVIDIA["dropout_headdim"]:
            return True
        # d=256: SDPA's forward + backward is faster, our forward alone is (training calls only)
        return problem.headdim == 256 and mha and problem.needs_grad
    return (forward_flop(problem) >= small_call_limit(problem)
            and (mha or problem.headdim in _SDPA_FIRST_NVIDIA["gqa_headdim"]))


def small_call_limit(problem: Problem) -> float:
    """The forward FLOP (``forward_flop``) below which a plain dense call stays with triton on sm90."""
    if problem.nheads == problem.nheads_k:
        return SMALL_CALL_FLOP
    if problem.causal and problem.headdim == 64 and problem.needs_grad:
        return SMALL_CALL_FLOP_GQA64_TRAIN
    return SMALL_CALL_FLOP_GQA


# FA4 (the flash-attn-4 package, CuTe DSL), when it is installed, on sm90 (benchmarks/fa4_probe.py,
# benchmarks/results/run21/, H100, TFLOP/s FA4 / cuDNN / ours in one process): forward at 4k-16k
# keys d=64 / 128 / 256 1.03-1.16x cuDNN and 1.08-1.48x ours; backward at d=64 / 128 1.09-1.23x cuDNN from 4k
# (0.96-1.20x at 1k) but 0.86-0.97x at d=256; window 1024 (4k, causal, d=128) 1.28x / 1.23x ours; sinks 1.41x /
# 1.31x ours; GQA 32/8 1.07x / 1.07x cuDNN; softcap: its forward 0.60x ours (backward even), so softcap stays with
# triton. Its host path costs more than ours or SDPA's (forward 90 against 36-42 / 41-65 us, forward + backward
# 445-595 against 350-400 / 320-370), so small calls keep their order: FA4 goes first from FA4_TRAIN_FLOP of
# forward work with grads (d=64 / 128) and from FA4_FWD_FLOP and 4k keys without (d=64 / 128 / 256).
# The audit of the rule (benchmarks/bench_gqa_route.py --auto --backends triton sdpa fa4, run21/h100_route_fa4.txt,
# 16k tokens, d 64/128/256, 16/16 and 32/8 heads, 1k and 4k, causal or not): where fa4 is picked, forward +
# backward took 0.99-1.02x the fastest forced backend's time at 4k and 0.99-1.04x at 1k but one row (1.34x, the
# same row 1.02x in the next table: host jitter at 1k); on a second H100 (run21/h100b_route_fa4.txt) 0.95-1.02x
# but the same first row (1.45x; 1.00x in its next table); forward without grads: FA4 0.89-0.97x SDPA's time at
# 4k, even at 1k-2k (0.96-1.05x), hence 4k keys and 130 GFLOP (d=64 causal 4k: 137).
FA4_TRAIN_FLOP = 6.8e10
FA4_FWD_FLOP = 1.3e11
_FA4_FIRST = {"arch": ("sm90",), "headdim_train": (64, 128), "headdim_fwd": (64, 128, 256), "min_seqlen_fwd": 4096}


def _fa4_measured_faster(problem: Problem) -> bool:
    p = problem
    if (p.arch not in _FA4_FIRST["arch"] or p.headdim != p.headdim_v or p.softcap > 0 or p.has_alibi
            or p.dropout_p > 0 or p.bias or p.fp8 or p.offsets or p.is_varlen
            or p.seqlen_q != p.seqlen_k):  # measured with as many queries as keys only
        return False
    if p.needs_grad:
        return p.headdim in _FA4_FIRST["headdim_train"] and forward_flop(p) >= FA4_TRAIN_FLOP
    return (p.headdim in _FA4_FIRST["headdim_fwd"] and p.seqlen_k >= _FA4_FIRST["min_seqlen_fwd"]
            and forward_flop(p) >= FA4_FWD_FLOP)


def _fa4_first(problem: Problem) -> bool:
    """The FA4 rule applies and FA4 is installed (elsewhere the order stays as it was: no fa4 line)."""
    return _fa4_measured_faster(problem) and registry()["fa4"].available() is None


def preference(problem: Problem) -> tuple[str, ...]:
    plat = platform(problem)
    if plat == "nvidia" and problem.kind == "attn":
        order = _PREFERENCE[(plat, "attn")]
        if _sdpa_measured_faster(problem):
            order = ("sdpa", "triton", "flash_attn", "fa4", "torch")
        if _fa4_first(problem):
            order = ("fa4",) + tuple(name for name in order if name != "fa4")
        return order
    return _PREFERENCE.get((plat, problem.kind), ("torch",))


def order_rule(problem: Problem) -> str:
    """Which rule of the table above set the order of this call's candidates, in words ("" for the
    platform's default order): what ``explain()`` and the debug log print under the decision."""
    if platform(problem) != "nvidia" or problem.kind != "attn":
        return ""
    rule = _order_rule_sdpa(problem)
    if _fa4_first(problem):
        fa4 = "sm90, FA4 installed: fa4 first (measured faster than cuDNN and ours at this size; dispatch.py)"
        return fa4 + (f"; then {rule}" if rule else "")
    return rule


def _order_rule_sdpa(problem: Problem) -> str:
    if _masked_traced(problem):
        return "sm90, " + _MASKED_TRACED
    if _masked_sdpa_first(problem):
        return "sm90, " + _MASKED_SDPA
    if problem.bias == "bool" and not problem.causal and problem.arch in _SDPA_FIRST_NVIDIA["arch"]:
        return "sm90, " + _MASKED_CALLS
    if _triton_first_forward(problem):
        where = "on this small causal grid" if _small_causal_grid(problem) else "at this head dim and length"
        return (f"sm90, plain dense forward without gradients {where}: triton first (the Gluon forward measured as "
                "fast as SDPA or faster; dispatch.py)")
    if _sdpa_measured_faster(problem):
        kind = "dense call with dropout" if problem.dropout_p > 0 else "plain dense call"
        return f"sm90, {kind}: sdpa first (SDPA measured faster; dispatch.py)"
    small = replace(problem, batch=problem.batch * 10**6)  # the same call, past any size limit
    if _sdpa_measured_faster(small):
        limit = small_call_limit(problem)
        return (f"sm90, plain dense call of {forward_flop(problem) / 1e9:.2g} GFLOP, below {limit / 1e9:.2g}: "
                "host-bound, triton first (less host time than SDPA's path; dispatch.py)")
    return ""


@dataclass(frozen=True)
class Decision:
    backend: str
    forced: bool
    passed_over: tuple[tuple[str, str], ...]  # (backend, reason it declined)
    problem: Problem
    rule: str = ""  # order_rule(problem): the rule that put the candidates in this order, if any

    def describe(self) -> str:
        how = "forced" if self.forced else "auto"
        lines = [f"{self.problem.describe()} -> {self.backend} ({how})"]
        if self.rule and not self.forced:
            lines.append(f"  order: {self.rule}")
        lines += [f"  {name}: {reason}" for name, reason in self.passed_over]
        lines += [f"  {line}" for line in registry()[self.backend].describe_plan(self.problem)]
        return "\n".join(lines)


def _why_not(backend: Backend, problem: Problem) -> str | None:
    reason = backend.available()
    if reason is None:
        reason = backend.supports_decode(problem) if problem.kind == "kvcache" else backend.supports(problem)
    return reason


_KERNEL_BACKENDS = ("triton", "torch")


def decide(problem: Problem, kernel_only: bool = False) -> Decision:
    """Pick the backend for a problem (raises BackendUnavailable if a forced one declines).

    kernel_only: only backends with separate forward / backward passes (triton, torch) may
    serve (flash_attn's private entry points, ring attention).
    """
    backends = registry()
    name = forced()
    if name is not None:
        reason = _why_not(backends[name], problem)
        if reason is None and kernel_only and name not in _KERNEL_BACKENDS:
            reason = "this entry point needs a backend with separate forward and backward passes (triton or torch)"
        if reason is not None:
            raise BackendUnavailable(f"forced backend {name!r} cannot serve {problem.describe()}: {reason}")
        return Decision(name, True, (), problem)
    passed = []
    for candidate in preference(problem):
        if kernel_only and candidate not in _KERNEL_BACKENDS:
            continue
        reason = _why_not(backends[candidate], problem)
        if reason is None:
            return Decision(candidate, False, tuple(passed), problem, order_rule(problem))
        passed.append((candidate, reason))
    raise BackendUnavailable(
        f"no backend can serve {problem.describe()}: " + "; ".join(f"{n}: {r}" for n, r in passed)
    )


def select(problem: Problem, kernel_only: bool = False) -> Backend:
    """The Backend that serves this problem; logs the decision once under FLASH_ATTENTION_DEBUG=1."""
    decision = decide(problem, kernel_only)
    if config.debug():
        key = (problem, decision.backend)
        if key not in _logged:
            _logged.add(key)
            logger.warning("flash_attention_amd dispatch: %s", decision.describe())
    return registry()[decision.backend]
