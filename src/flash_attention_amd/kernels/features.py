"""The kernels' feature flags, packed into one int constexpr ``FEATURES`` (one bit per flag).

A kernel or jit helper takes ``FEATURES: tl.constexpr`` and decodes the flags it reads at its
top under the names its body uses, ``IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")``
(``common.has``); a helper's flags that differ per call site (``MASKED``) or follow from a
kernel argument (``HAS_ALIBI``: ``Alibi is not None``) are set by the caller,
``with_flags(FEATURES, MASKED=part != 1)`` (``common.with_flags``). Launchers and compile specs
build the value with ``pack(IS_CAUSAL=..., ...)`` from the same names. One parameter for every
flag keeps the kernels' signatures short (at most ~30 parameters): a new flag is one more name
in ``FLAGS``, not one more parameter of each function it passes through. Every value is its
own build (Triton keys constexprs by value), as separate bool constexprs were.

Pure Python (no Triton import): the launchers import it at module import.
"""
from __future__ import annotations

# Every flag, by the name the kernels' bodies use; bit i of FEATURES is FLAGS[i].
FLAGS = (
    # shared by the forward, backward and decode kernels
    "IS_CAUSAL",  # causal mask (bottom-right aligned)
    "HAS_WINDOW",  # sliding window (window_left / window_right; -1: unbounded)
    "HAS_SOFTCAP",  # softcap * tanh(s / softcap)
    "HAS_DROPOUT",  # Philox dropout (kernels/common.py philox_keep)
    "IEEE_DOT",  # every product in fp32 "ieee" precision (fp32, and bf16 in the interpreter)
    "CHUNK",  # a chunk of a longer sequence: diag_offset and the Philox counter offsets are read
    "BIAS_BOOL",  # the bias is a uint8 view of a bool mask
    "BIAS_BCAST_N",  # the bias is broadcast over keys: its key stride (the kernels' BIAS_N) is 0, not 1
    "KEY_MASK",  # a bool mask broadcast over query rows (a padding mask): key blocks it keeps none of are skipped
    "FAST_TANH",  # softcap's tanh by NVIDIA's tanh.approx.f32 (one instruction; forward and backward alike)
    # the tiles a program keeps across its loop read again for every block (from L1 / L2) instead of held in
    # registers: the forward's Q chunks (head-dim chunks only), dK/dV's K and V, dQ's Q and dO (no chunks)
    "RELOAD_TILES",
    # set by a kernel for its helpers
    "MASKED",  # this range of blocks applies the visibility mask and bounds checks
    "HAS_ALIBI",  # ALiBi slopes given (the kernel: ``Alibi is not None``)
    "HAS_BIAS",  # a bias given (the kernel: ``Bias is not None``)
    # forward (attn_fwd_kernel)
    # the programs with the most work start first: the forward's query blocks with the most keys; the causal
    # backward's dK/dV and dQ blocks, block by block over groups of 8 (sequence, head)s (common.heavy_first)
    "HEAVY_FIRST",
    "USE_TMA",  # K / V are TMA tensor descriptors
    "POS_SCALE",  # sm_scale > 0: the row max is taken before scaling
    "V_T",  # V lies as [b, hk, dv, sk] (FP8 on sm90)
    "SOFTCAP_MAX",  # softcap bounds every score: the softmax runs against that fixed max (no running max)
    "ALIBI_ONE_SIDED",  # causal ALiBi as a per-key term, its per-row term added to the LSE alone (no sinks)
    # backward dK/dV (bwd_dkdv)
    "DQ_ATOMIC",  # dQ added with atomics too
    "SPLIT",  # masked head, unmasked middle, masked tail (three loops; else one masked loop)
    "GQA",  # group may exceed 1
    "DROP_QUADS",  # the four-row dropout mask evaluated once per four rows (join + reshape), not per element
    "DV_ONLY",  # this launch computes dV only (dK and dV in two launches, BwdConfig.kv_passes: RDNA3 above d=64)
    "DK_ONLY",  # this launch computes dK only
    # backward dQ (bwd_dq): dbias
    "DBIAS_SUM_M",  # the bias has one query row: dS summed over rows
    "DBIAS_SUM_N",  # the bias has one key: dS summed over keys
    "DBIAS_ATOMIC",  # dbias added with fp32 atomics
    # decoding (decode_split_kernel)
    "SPLIT_KV",  # write per-split partial outputs and LSEs (the combine kernel merges them)
    # the sm90 warp-specialised forward (attn_fwd_ws_kernel)
    "WARP_SPEC",  # the key loop split into a TMA producer warp group and two consumer warp groups
    # forward (attn_fwd_kernel), last so that the bits before it stay those of the builds checked before it came:
    # a row keeps its running max until a key block's passes it by more than 2^LAZY_TAU (p <= 2^LAZY_TAU), and the
    # accumulator is rescaled only in blocks where some row's max moved (one block-wide reduction decides)
    "LAZY_RESCALE",
)
BITS = {name: 1 << i for i, name in enumerate(FLAGS)}


def with_flags(features: int, **flags: bool) -> int:
    """``features`` with each named flag set (true) or cleared (false)."""
    for name, on in flags.items():
        bit = BITS[name]  # KeyError: not a flag
        features = (features | bit) if on else (features & ~bit)
    return features


def pack(**flags: bool) -> int:
    """The FEATURES value with the named flags set where true (all others off)."""
    return with_flags(0, **flags)


def has(features: int, name: str) -> bool:
    """Whether flag ``name`` is set in ``features``."""
    return bool(features & BITS[name])


def unpack(features: int) -> dict[str, bool]:
    """Every flag of ``features`` by name (tests, reports)."""
    return {name: bool(features & bit) for name, bit in BITS.items()}
