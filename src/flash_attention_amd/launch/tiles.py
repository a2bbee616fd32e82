"""Every tile configuration of every kernel, in one place: the type, the tables, the arch map.

- ``Tile``: one launch configuration of one kernel (block sizes, warps, pipeline stages, the
  AMD compiler options) and the ``reason`` it is in a table (measured where, or chosen by the
  static check only).
- ``BwdConfig``: the backward pass = a dK/dV tile + a dQ tile + how dK/dV loops.
- Tables: ``FWD`` (per feature tier: plain / options / dropout / bias, see ``PLAIN``),
  ``FWD_FP8`` and ``DECODE`` here, ``BWD`` (same tiers) in ``tiles_bwd.py``, keyed by arch
  family. A table is a list of ``Row``; the first row whose head-dim bound (and causal flag,
  and minimum key length) fits wins. Configs are fixed per arch: no autotuning, so a new
  sequence length never triggers tuning.
- ``arch_family``: the one map from a device arch ("sm90", "gfx942", ...) to a table family,
  and ``FALLBACK``: the family whose table serves an arch family that has none of its own.

No row may spill on AMD (``flash-attention-amd check-amd``). On NVIDIA a row may keep ptxas
spills only with a measurement that no spill-free tile came within 10% (``spills_ok``, shown
as ``warn`` by check-amd). Measurements: benchmarks/results/*_h100.md, tiles_h200.md;
static evidence per row: docs/HARDWARE.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

INTERPRETER = "interpreter"  # the family of Triton's interpreter (CPU tensors, TRITON_INTERPRET=1)
MAX_HEADDIM = 512  # largest head dim (q/k and v) the forward and backward kernels serve
CHUNKED_ABOVE = 256  # head dims above this run in head-dim chunks (Tile.block_dk / block_dvk)
MAX_HEADDIM_DECODE = 576  # q/k head dim of the decode kernel (MLA: 512 latent + 64 rotary); v up to 512

# Feature tiers of a call: the plain kernel; a window, ALiBi or softcap (the score math holds
# more registers); dropout (its Philox rounds hold more still); an attn_bias without / with
# dropout (the bias tile on top of the options / dropout tier). A family without a table for a
# tier uses the next lighter tier's table: BIAS_OPTIONS -> OPTIONS -> PLAIN, BIAS_DROPOUT ->
# DROPOUT -> OPTIONS -> PLAIN (``TIER_FALLBACK``). WINDOW: a sliding window and no other option
# (no ALiBi, softcap, dropout or bias: its programs are short, the score math light), else the
# options tier's rows. SOFTCAP: softcap alone (no window, ALiBi, sinks, dropout or bias), bf16, dense:
# the forward's fixed-max softmax (launch/fwd.py softcap_max) holds fewer registers, and smaller tiles win.
# ALIBI: ALiBi alone (no window, softcap, sinks, dropout or bias), dense: the forward's plain d<=64 tile on sm90.
PLAIN, OPTIONS, DROPOUT, BIAS_OPTIONS, BIAS_DROPOUT, WINDOW, SOFTCAP, ALIBI = 0, 1, 2, 3, 4, 5, 6, 7
TIER_FALLBACK = {PLAIN: (PLAIN,), OPTIONS: (OPTIONS, PLAIN), DROPOUT: (DROPOUT, OPTIONS, PLAIN),
                 BIAS_OPTIONS: (BIAS_OPTIONS, OPTIONS, PLAIN), BIAS_DROPOUT: (BIAS_DROPOUT, DROPOUT, OPTIONS, PLAIN),
                 WINDOW: (WINDOW, OPTIONS, PLAIN), SOFTCAP: (SOFTCAP, OPTIONS, PLAIN), ALIBI: (ALIBI, OPTIONS, PLAIN)}


def tier_of(dropout: bool, options: bool, bias: bool = False, window_only: bool = False,
            softcap_only: bool = False, alibi_only: bool = False) -> int:
    """The feature tier of a call; ``options``: a window, ALiBi or softcap; ``bias``: an attn_bias is
    given; ``window_only`` / ``softcap_only`` / ``alibi_only``: the options are a window / softcap / ALiBi
    alone."""
    if bias:
        return BIAS_DROPOUT if dropout else BIAS_OPTIONS
    if dropout:
        return DROPOUT
    if not options:
        return PLAIN
    return WINDOW if window_only else SOFTCAP if softcap_only else ALIBI if alibi_only else OPTIONS


@dataclass(frozen=True)
class Tile:
    """One launch configuration of one kernel. AMD-only fields are ignored on NVIDIA.

    ``num_stages`` 0 leaves Triton's default. ``block_m`` 0 (decode): chosen per call from the
    number of packed query rows (a decode row's nonzero ``block_m`` caps it). ``heavy_first``: the
    programs with the most work start first (the forward's query blocks; the causal backward's dK/dV
    and dQ blocks, over groups of 8 heads: kernels/common.py heavy_first). ``use_tma``: the forward's K/V
    through TMA descriptors on sm90+ when the tensors allow; the Gluon backward's LSE / delta through TMA too
    (launch/bwd_gluon.py ROWS_TMA; its Q / K / V / dO always are).

    Head dims above 256 (``block_dk`` > 0): the kernels hold q/k-like tiles as chunks of
    ``block_dk`` columns and v-like tiles (the forward's accumulator, V) as chunks of
    ``block_dvk`` columns, one matrix product per chunk, so registers stay bounded and a head dim
    such as 320 or 576 is not padded to 512 / 1024. ``dv_split`` (forward): V's head dim is
    shared out among that many programs per query block (each recomputes the scores);
    ``reload``: the tiles a program keeps across its loop are read again for every block (from L1 /
    L2) instead of held in registers: the forward's Q chunks (head-dim chunks only), the backward's
    K / V (dK/dV) and Q / dO (dQ) at head dims up to 256 (RDNA3, where they spilled); the backward with
    head-dim chunks: split-D (every product reads its chunks right before it; RDNA3 at d=129..256).
    """

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    waves_per_eu: int = 0
    matrix_instr_nonkdim: int = 0
    kpack: int = 1
    # program order: False = the query blocks of one head are neighbours (share K/V in L2);
    # True = the blocks with the most keys start first, all heads together. Head-major measured
    # faster on the H100 for causal too (bench_attention.py sweep).
    heavy_first: bool = False
    use_tma: bool = False
    block_dk: int = 0
    block_dvk: int = 0
    dv_split: int = 1
    reload: bool = False
    reason: str = field(default="", compare=False)  # measured where, or "spill-free by static check only"
    spills_ok: str = field(default="", compare=False)  # NVIDIA: the measurement that keeps ptxas spills

    def launch_options(self, amd: bool) -> dict:
        opts = {"num_warps": self.num_warps}
        if self.num_stages:
            opts["num_stages"] = self.num_stages
        if amd:
            opts.update(waves_per_eu=self.waves_per_eu, matrix_instr_nonkdim=self.matrix_instr_nonkdim,
                        kpack=self.kpack)
        return opts

    def label(self) -> str:
        extra = f" wpe{self.waves_per_eu} k{self.kpack}" if self.waves_per_eu or self.kpack != 1 else ""
        extra += " tma" if self.use_tma else ""
        extra += " heavy-first" if self.heavy_first else ""
        extra += f" dk{self.block_dk}/dv{self.block_dvk}" if self.block_dk else ""
        extra += f" dv-split{self.dv_split}" if self.dv_split > 1 else ""
        extra += " reload" if self.reload else ""
        return f"BLOCK {self.block_m}x{self.block_n} w{self.num_warps} s{self.num_stages}{extra}"

    def replace(self, **changes) -> Tile:
        return replace(self, **changes)


@dataclass(frozen=True)
class BwdConfig:
    """The backward pass: ``dkdv`` tile (block_m query rows x block_n KV rows per step), ``dq``
    tile, and whether dK/dV loops over its query blocks in three parts (``split``: masked head,
    unmasked middle, masked tail) or in one masked loop (fewer registers).

    ``dq_atomic``: dQ from atomics inside the dK/dV kernel (one pass over the scores, not
    bitwise reproducible) instead of the ``bwd_dq`` kernel: the sm90 dropout rows at d <= 64,
    where it spares the second Philox evaluation (launch/tiles_bwd.py). ``deterministic`` calls
    and calls that compute dbias never take it (they use the ``dq`` tile).

    ``kv_passes``: 1, dK and dV in one launch of the dK/dV kernel; 2, two launches (dV, then dK,
    each recomputing the scores), so a program holds one accumulator: RDNA3 above head dim 64,
    where one launch spilled (kernels/bwd.py).

    ``delta_in_dq``: the dQ kernel computes delta itself and runs first (launch/bwd.py ``delta_in_dq``);
    False: the preprocess kernel does, for a dQ tile whose builds spill with out's extra tile.
    """

    dkdv: Tile
    dq: Tile
    split: bool = True
    dq_atomic: bool = False
    kv_passes: int = 1
    delta_in_dq: bool = True
    reason: str = field(default="", compare=False)

    def replace(self, **changes) -> BwdConfig:
        return replace(self, **changes)


class Row(NamedTuple):
    """A table row: serves padded head dims up to ``max_d`` (the larger of q/k and v), calls
    with this causal flag (None: both) from ``min_seqlen_k`` keys up (a length bucket);
    ``paged`` (decode): paged caches only (True), contiguous only (False) or both (None);
    ``gqa`` (backward, and the forward's ALiBi tier): calls with several query heads per KV head only
    (True), one only (False) or both (None); ``varlen`` (forward): packed varlen calls only (True), dense
    only (False) or both (None); ``key_mask`` (the bias tiers): calls whose attn_bias is a bool padding mask,
    built with the kernels' KEY_MASK (True), or every call of the tier (None)."""

    max_d: int
    config: Tile | BwdConfig
    causal: bool | None = None
    min_seqlen_k: int = 0
    paged: bool | None = None
    gqa: bool | None = None
    varlen: bool | None = None
    key_mask: bool | None = None


# ---------------------------------------------------------------------------------------------
# Arch families. One map for every kernel (forward, backward, decode):
#
# - sm90: H100 / H200 (measured). sm100 / sm103 / sm110 (datacenter Blackwell, Thor) share its
#   228 KB of shared memory per SM, so its tiles fit (not measured there).
# - sm80: A100 and sm87 (Orin): 164 KB shared memory, mma.sync. Rows spill-free by ptxas only.
# - sm86: sm86 / sm89 (RTX 30xx / 40xx, L4/L40) and sm120 / sm121 (RTX 50xx, consumer
#   Blackwell, mma.sync like Ampere): about 100 KB of shared memory per SM, so never the Hopper
#   tables (their 128x64 s3 forward tile needs more). The forward has its own 100 KB table;
#   backward and decode fall back to the sm80 rows (not checked against the 100 KB limit).
# - gfx942: MI300 (gfx940/941/942). gfx950 (MI350): the gfx942 tables (same 512 VGPRs per lane;
#   check-amd compiles them for gfx950 too).
# - gfx90a: MI200 and gfx908 (MI100).
# - gfx1100: RDNA3 (gfx11xx). gfx12 (RDNA4, gfx12xx): the gfx1100 tables (same wave32 and
#   1536-VGPR file; check-amd compiles them for gfx1201, with fewer VGPRs than on gfx1100), except the
#   tables with a "gfx12" key (rows where gfx1100 spilled and gfx1201 fits: backward d=129-256, forward
#   d=160-256 with dropout or a bias), which repeat the gfx1100 rows of their tier below those.
# - generic: any other GPU. The forward and decode keep conservative tables; the backward has
#   none (declined: no config of it was ever compiled for such a target).
# - interpreter: Triton's interpreter on CPU tensors (small tiles, so tests cross block edges).

FALLBACK = {"sm86": "sm80", "gfx950": "gfx942", "gfx12": "gfx1100"}


def arch_family(arch: str | None) -> str:
    """The table family of a device arch string ("sm90", "gfx942", ...; None = interpreter)."""
    if arch is None:
        return INTERPRETER
    if arch.startswith("sm"):
        try:
            cc = int(arch[2:])
        except ValueError:
            return "generic"
        major = cc // 10
        if cc in (80, 87):
            return "sm80"
        if cc in (86, 89) or major == 12:
            return "sm86"
        if major in (9, 10, 11):
            return "sm90"
        return "generic"
    if arch.startswith("gfx"):
        if arch.startswith("gfx94"):
            return "gfx942"
        if arch.startswith("gfx95"):
            return "gfx950"
        if arch in ("gfx90a", "gfx908"):
            return "gfx90a"
        if arch.startswith("gfx11"):
            return "gfx1100"
        if arch.startswith("gfx12"):
            return "gfx12"
    return "generic"


def family_table(tables: tuple[dict, ...], family: str, tier: int = PLAIN) -> list[Row] | None:
    """The rows serving ``family`` at ``tier``: its own table of the tier, else the next lighter
    tier's; a family without any table of its own goes through ``FALLBACK``. None: no table."""
    while family is not None:
        for t in TIER_FALLBACK[tier]:
            if t < len(tables) and family in tables[t]:
                return tables[t][family]
        family = FALLBACK.get(family)
    return None


def pick(rows: list[Row] | None, max_d: int, causal: bool = False, seqlen_k: int = 0,
         paged: bool = False, gqa: bool = False, varlen: bool = False, key_mask: bool = False):
    """The config of the first row that fits, or None."""
    for row in rows or ():
        if (max_d <= row.max_d and row.causal in (None, causal) and seqlen_k >= row.min_seqlen_k
                and row.paged in (None, paged) and row.gqa in (None, gqa) and row.varlen in (None, varlen)
                and row.key_mask in (None, key_mask)):
            return row.config
    return None


def heavy_first_order(tile: Tile | None, causal: bool, varlen: bool, forced: bool | None = None) -> dict[str, bool]:
    """The HEAVY_FIRST FEATURES flag of a call's kernel of this tile (kernels/common.py heavy_first): the tile's
    order for dense causal calls (packed varlen calls were not measured with it), or ``forced`` (True / False: a
    launcher's module switch, for A/B runs) for causal calls."""
    on = (tile is not None and tile.heavy_first and not varlen) if forced is None else forced
    return dict(HEAVY_FIRST=causal and on)


def padded_dim(d: int) -> int:
    """Head dim rounded up to a power of two, at least 16 (tl.dot's minimum)."""
    return max(16, next_pow2(d))


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    # plain ints: triton.cdiv / next_power_of_2 cost ~10 us a call from Python
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# Forward (kernels/fwd.py). Main table, then the options tier, then the dropout tier.

_T = Tile
_STATIC = "spill-free by static check only (check-amd), not timed"
_H100_FWD = "measured on an H100, benchmarks/results/fwd_h100.md"


def _cdna(m, n, w, s, reason=_STATIC, **kw):
    return Tile(m, n, w, s, waves_per_eu=kw.pop("waves_per_eu", 2), matrix_instr_nonkdim=16, reason=reason, **kw)


# Head dims 257..512 (kernels/fwd.py head-dim chunks). Each wave holds 16 query rows of Q and of
# the fp32 accumulator over the whole head dim (d / 4 + dv / 4 VGPRs at d, dv = 512) and the
# K / V chunk it multiplies, so on CDNA no tile fits in 256 VGPRs without sharing V's columns out
# (dv_split 2 recomputes the scores: 1.5x the matrix work at d = dv = 512); these rows take one
# wave per SIMD (waves_per_eu 1, 512 VGPRs + AGPRs) instead. Not timed anywhere.
_D512_CDNA3 = _cdna(64, 32, 4, 1, _STATIC + "; 454-457 VGPRs at d=512 (gfx950: 408-429), 1 wave per SIMD; "
                    "64x16 w4 dv-split2 fits 2 waves (228-244 VGPRs) at 1.5x the matrix work",
                    waves_per_eu=1, block_dk=64, block_dvk=128)
_D512_CDNA2 = _cdna(64, 16, 4, 1, _STATIC + "; 396-437 VGPRs at d=512, 1 wave per SIMD (64x32 spilled 9)",
                    waves_per_eu=1, block_dk=64, block_dvk=64)
# Hopper: wgmma keeps Q and the K / V chunks of every pipeline stage in shared memory (64x64 tiles
# needed 263-361 KB); 128x32 w8 s2 with V's columns shared out between 2 programs (an fp32
# accumulator of 128 x 512 would take 256 registers a thread) fits 230 KB, 210-255 registers.
_D512_SM90 = _T(128, 32, 8, 2, block_dk=64, block_dvk=128, dv_split=2,
                reason="spill-free by static check only (check-amd), not timed; 230 KB shared memory, "
                       "215-255 registers at d=512")



# sm90, head dims 129-256: 128 query rows over 2 warpgroups (8 warps) with TMA, every tier but the bias
# ones. H100, b*s = 16384, h=8, d=256, s=4096 / 16384, causal and not (benchmarks/results/run11/
# h100_fwd256.json, h100_fwd_drop_d256_d192.txt): plain 1.21-1.45x, ALiBi + softcap 1.16-1.36x, dropout
# 1.09-1.41x (d=192 / 256) the 64x64 w4 s2 TMA row it replaces, best of 7; H200 (h200_confirm_fwd256.txt,
# h200_fwd_drop_d256_d192.txt) 1.14-1.42x with a window 1024 too, dropout 1.07-1.39x; H200 at head dims
# 160 / 192 (h200_fwd160.txt, _192.txt) 1.24-1.71x. ptxas: plain builds spill-free; options 1, a window
# alone 3, dropout 4-29 registers (the 64x64 row spilled 13-96 with dropout): accepted on those figures.
_FWD_D256_H100 = ("H100 / H200 sweeps, d=160-256 (benchmarks/results/run11/): 1.07-1.71x the 64x64 w4 s2 TMA row "
                  "over plain, ALiBi + softcap, window and dropout, causal or not")
_FWD_D256 = _T(128, 64, 8, 2, use_tma=True, reason=_FWD_D256_H100)
_FWD_D256_OPTS = _FWD_D256.replace(spills_ok=_FWD_D256_H100 + "; its options / dropout builds spill 1-29 "
                                   "registers (ptxas)")

# sm90 d<=64: 128x64 with 8 warps (2 warpgroups of 64 query rows each, 120 registers, no TMA) over the rows it
# replaced (128x64 w4 s3 through pointers, and through TMA for causal calls from 8k keys: one warpgroup, 254
# registers; benchmarks/results/run13/h100_sweep_d64.txt chose those among 4-warp tiles). H100, b*s = 16384, 32
# query heads, same process, the rows timed first and last (benchmarks/results/run18/):
# - causal (h100_fwd64_confirm_g4.txt / _g1.txt, again on a second instance in h100b_fwd64_both_*): GQA 32/8
#   1.04-1.09x, MHA 1.00-1.08x at s = 1k-16k; first seen in a GQA sweep of 9 tiles (h100_gqa64_fwd_sweep.txt:
#   1.05-1.09x, the best there);
# - not causal (h100c_fwd64_noncausal_*.txt): GQA 1.02-1.07x, MHA 1.00-1.07x (0.998x at 16k).
# Dense calls only: packed varlen forwards took 1.19-1.21x the time of the 4-warp rows with it (causal GQA 32/8,
# b=1 s=8192 and b=4 s=2048, h100d_varlen_vs_dense_w8.txt against h100e_varlen_vs_dense_final.txt and
# h100_varlen_vs_dense.txt), so they keep those rows.
# Not run on an H200 (four requests got H100s).
_D64_VARLEN = ("H100, d=64 h=32 b*s=16384 (benchmarks/results/run13/h100_sweep_d64.txt): 1.03-1.08x the TMA build; "
               "varlen calls keep it: with 128x64 w8 s3 their forward took 1.19-1.21x the time "
               "(run18/h100d_varlen_vs_dense_w8.txt)")
_D64_H100 = ("H100, d=64, 32 heads, b*s=16384 (benchmarks/results/run18/h100*_fwd64_*.txt): causal GQA 32/8 "
             "1.04-1.09x, MHA 1.00-1.08x, not causal 1.00-1.07x the 4-warp rows at 1k-16k; 120 registers, 0 spills")

# sm90, dense causal calls of the plain rows below: heavy-first program order (Tile.heavy_first: the query blocks
# with the most keys first, over groups of 8 heads; kernels/common.py heavy_first; packed varlen calls keep the
# heads' order, not measured with it), session 33, on the H100 and the H200 (run30/h200_fwd_order.md: 1.00-1.08x),
# against head-by-head order, same process, rounds taking turns, the Gluon forward off
# (benchmarks/fwd_order_ab.py, benchmarks/results/run30/h100_fwd_order_*.md): d=64 1.00-1.02x at 1k-2k, 1.02-1.03x
# at 4k, 1.06x at 8k, 1.03-1.04x at 16k, GQA 32/8 4k 1.01x; d=128 1.02-1.03x; d=256 1.08x at 4k, 1.03x at 16k. Over
# every head at once it lost 3-18% (L2). Not causal calls keep the grid's order (nothing to balance).
_HEAVY_FWD = "; causal: heavy-first over 8 heads 1.00-1.08x (H100 and H200, benchmarks/results/run30/h*_fwd_order*.md)"
# The same order for ALiBi alone (dense MHA; the ALiBi tier's rows: d=64 its own, d=128 the options row's tile),
# measured on the H100 and the H200 (run30/h100_fwd_order_opts.md, h200_fwd_order_opts_*.md): d=64 1.00 / 1.02 /
# 1.04-1.06x at 1k / 4k / 16k, d=128 1.01 / 1.04 / 1.02-1.03x. Not in the options row itself: the bias tiers fall
# back to it, and its causal bias build spilled 2 registers heavy-first (run30/check_heavy_first_sm90.md). Softcap
# alone (its own 64x64 w4 row) measured 0.99-1.04x: not taken.
_HEAVY_ALIBI = "; causal: heavy-first over 8 heads, ALiBi 1.00-1.06x (H100 and H200, run30/*fwd_order_opts*)"

# CDNA3 / CDNA4 (gfx942, and gfx950 through FALLBACK), the plain rows' causal calls: the same heavy-first order,
# static check only, never run on an AMD GPU (benchmarks/results/run30/check_heavy_first_cdna.md: the same VGPRs
# within a few, spills and occupancy). Why it should carry: an MI300X / MI355X deals workgroups round-robin over its
# 8 XCDs, each with its own 4 MB L2; in the heads' own order the query blocks of one head land on all 8 XCDs, so each
# XCD's L2 holds every running head's K / V, while over groups of 8 heads the program with linear index i runs head
# i % 8 of its group, so each XCD reads one head's K / V (the pid remapping AMD's own Triton kernels do for the
# same reason), and the longest causal blocks start first, as on sm90. An MI300A has 6 XCDs: the balance holds, the
# per-XCD head does not. Unmeasured: it needs an MI300 timing (docs/HARDWARE.md).
_HEAVY_CDNA = "; causal: heavy-first over 8 heads (the sm90 order; static check only, never timed on AMD)"

FWD_PLAIN: dict[str, list[Row]] = {
    # Hopper: 227 KB shared memory, wgmma; BLOCK_M 128 per 2 warpgroups. d<=64 and d<=128 128x64 w8 s3 plain
    # pointers (TMA was 1-6% slower there), 4 stages for long
    # non-causal keys. Spill-free per ptxas.
    "sm90": [
        Row(64, _T(128, 64, 8, 3, heavy_first=True, reason=_D64_H100 + _HEAVY_FWD), varlen=False),
        Row(64, _T(128, 64, 4, 3, use_tma=True, reason=_H100_FWD + "; run13/h100_sweep_d64.txt: 1.02-1.05x the "
                   "same tile through pointers, causal s=16384"), causal=True, min_seqlen_k=8192),
        Row(64, _T(128, 64, 4, 3, reason=_D64_VARLEN)),
        Row(128, _T(128, 64, 8, 4, reason=_H100_FWD), causal=False, min_seqlen_k=4096),
        Row(128, _T(128, 64, 8, 3, heavy_first=True, reason=_H100_FWD + _HEAVY_FWD)),
        Row(256, _FWD_D256.replace(heavy_first=True, reason=_FWD_D256_H100 + _HEAVY_FWD)),
        Row(512, _D512_SM90),
    ],
    # A100: 164 KB shared memory, mma.sync. Not timed on an A100: spill-free per ptxas (64x64 w4
    # at d=256 spilled 8 registers; 8 warps halve the accumulator per thread).
    "sm80": [
        Row(64, _T(128, 64, 4, 3, reason=_STATIC)),
        Row(128, _T(128, 64, 8, 2, reason=_STATIC)),
        Row(256, _T(64, 64, 8, 2, reason=_STATIC)),
        Row(512, _T(64, 32, 8, 2, block_dk=64, block_dvk=128, reason=_STATIC + "; 252 registers at d=512")),
    ],
    # ~100 KB shared memory (sm86 / sm89 / sm120): not timed, not compiled by check-amd.
    "sm86": [
        Row(64, _T(128, 64, 4, 2, reason="sized for 100 KB shared memory; not compiled or timed")),
        Row(128, _T(64, 64, 4, 2, reason="sized for 100 KB shared memory; not compiled or timed")),
        Row(256, _T(64, 32, 4, 1, reason="sized for 100 KB shared memory; not compiled or timed")),
        Row(512, _T(32, 32, 8, 1, block_dk=64, block_dvk=64,
                    reason="sized for 100 KB shared memory; not compiled or timed")),
    ],
    # AMD rows: spill-free as compiled for a real launch (16-byte aligned tensors, strides
    # divisible by 16). MI300 (CDNA3): 64 KB LDS, 512 VGPRs+AGPRs per lane; waves_per_eu=2 caps
    # at 256.
    "gfx942": [
        Row(64, _cdna(128, 64, 4, 2, _STATIC + "; 234 VGPRs" + _HEAVY_CDNA, heavy_first=True)),
        Row(128, _cdna(128, 32, 4, 2, _STATIC + "; 227 VGPRs" + _HEAVY_CDNA, heavy_first=True)),
        Row(256, _cdna(64, 32, 4, 1, _STATIC + "; 253 VGPRs" + _HEAVY_CDNA, heavy_first=True)),
        Row(512, _D512_CDNA3),
    ],
    # MI200 (CDNA2): 64 KB LDS.
    "gfx90a": [
        Row(64, _cdna(128, 64, 4, 2, _STATIC + "; 217 VGPRs")),
        Row(128, _cdna(128, 32, 4, 2, _STATIC + "; 226-232 VGPRs")),
        Row(256, _cdna(32, 32, 4, 1, _STATIC + "; 220 VGPRs")),
        Row(512, _D512_CDNA2),
    ],
    # RDNA3 (wave32, WMMA, 256 VGPRs / lane): the WMMA operands of Q and the accumulator take
    # ~256 VGPRs per 16 rows at d=256, so d > 128 has no spill-free tile (declined; head-dim chunks do
    # not help: Q and the accumulator of 16 rows alone fill the 256 VGPRs at d = dv = 512).
    "gfx1100": [
        Row(64, _T(64, 32, 4, 1, reason=_STATIC)),
        Row(128, _T(32, 16, 4, 1, reason=_STATIC + "; 225 VGPRs")),
        # d=160-256 (Gemma's 256 with softcap and a window: the options tier uses these rows): head-dim
        # chunks of 64 (32x16 unchunked spilled 28-56 VGPRs at d=256); the bias and dropout tiers still end
        # at 128 (a mask spilled 226-247 with this tile, dropout 3-15)
        Row(256, _T(16, 16, 4, 1, block_dk=64, block_dvk=64, reason=_STATIC + "; 196-247 VGPRs")),
    ],
    "generic": [  # unknown GPUs: conservative, never compiled for one
        Row(128, _T(64, 64, 4, 1, reason="conservative guess for unknown GPUs")),
        Row(256, _T(32, 32, 4, 1, reason="conservative guess for unknown GPUs")),
        Row(512, _T(32, 32, 4, 1, block_dk=64, block_dvk=64, dv_split=2, reason="conservative guess for unknown GPUs")),
    ],
    # fp32 on any GPU (ieee dots, twice the bytes): correctness over speed.
    "fp32": [
        Row(64, _T(64, 32, 4, 1, reason="fp32 on any GPU: correctness over speed")),
        Row(256, _T(32, 32, 4, 1, reason="fp32 on any GPU: correctness over speed")),
        Row(512, _T(32, 32, 4, 1, block_dk=64, block_dvk=64, dv_split=2,
                    reason="fp32 on any GPU: correctness over speed")),
    ],
    INTERPRETER: [
        Row(256, _T(32, 16, 1, 1, reason="interpreter: small blocks so tests cross block edges")),
        Row(512, _T(16, 16, 1, 1, block_dk=64, block_dvk=128,
                    reason="interpreter: head-dim chunks, a partial last V chunk at 320 / 448")),
    ],
}

# A window, ALiBi or softcap (check-amd variant "opts": all of them, causal and varlen on, no
# dropout) hold more registers than the plain kernel: other tiles where the main row spills.
FWD_OPTIONS: dict[str, list[Row]] = {
    # Hopper (also serves dropout): d<=64 64x64 w4 s3 measured 1.08-1.18x the main row and
    # spill-free; d<=256 the main row.
    "sm90": [
        Row(64, _T(64, 64, 4, 3, use_tma=True, reason="measured on an H200, benchmarks/results/tiles_h200.md")),
        Row(128, _T(128, 64, 8, 4, reason=_H100_FWD), causal=False, min_seqlen_k=4096),
        Row(128, _T(128, 64, 8, 3, reason=_H100_FWD)),
        Row(256, _FWD_D256_OPTS),
        Row(512, _D512_SM90),
    ],
    # CDNA: the main rows at d<=64 (gfx942) and d<=128 (gfx90a) spilled with these options.
    "gfx942": [
        Row(64, _cdna(128, 32, 4, 2)),
        Row(128, _cdna(64, 32, 4, 2)),
        Row(256, _cdna(32, 32, 4, 1)),
        Row(512, _D512_CDNA3),
    ],
    "gfx90a": [
        Row(64, _cdna(128, 32, 4, 2)),
        Row(128, _cdna(64, 32, 4, 2)),
        Row(256, _cdna(32, 32, 4, 1)),
        Row(512, _D512_CDNA2),
    ],
    "sm80": [  # ptxas: d=128 128x64 w8 s2 spilled 12 registers with these options
        Row(64, _T(128, 64, 4, 3, reason=_STATIC)),
        Row(128, _T(64, 64, 8, 2, reason=_STATIC)),
        Row(256, _T(64, 64, 8, 2, reason=_STATIC)),
        Row(512, _T(32, 32, 8, 2, block_dk=64, block_dvk=64,
                    reason=_STATIC + "; 171-211 registers at d=512 (64x32 w8 s2 spilled 27 with dropout)")),
    ],
}

# RDNA3 dropout at head dims 65..128 (check-kernels "all", "drop", "mask-drop", "bias-all", "bias-drop"):
# the plain row's 32x16 w4 spilled 8-15 VGPRs with a mask and dropout; 8 warps and waves_per_eu 2 fit
# every dropout variant (16x16 w4 fit too, with twice the programs). Static check only.
_RDNA3_DROP_D128 = _T(32, 16, 8, 1, waves_per_eu=2, reason=_STATIC + "; 32x16 w4 spilled 8-15 VGPRs with mask + "
                                                                      "dropout")

# RDNA3 at d=160-256 with dropout or a bias / bool mask (session 25, issue 13; static check only, never run on an
# RDNA3 GPU; check-amd --arch gfx1100, benchmarks/check_rdna3_fwd256_specs.py, benchmarks/results/run22/): the
# plain d=256 row (16x16 w4, head-dim chunks of 64) spilled 3-16 VGPRs with dropout or a float bias and 227-250
# with a bool mask. 8 warps with waves_per_eu 1 fit dropout with Q chunks of 64 and V chunks of 128 (233-255
# VGPRs; chunks of 128: 7-12 spilled with the four-row mask); a bias / mask with 8 warps, waves_per_eu 2, chunks
# of 128 and Q read per key block (reload: 224-253; without reload a mask spilled 214). A bias / mask with dropout
# stays declined: every candidate spilled in one of "bias-all" / "bias-drop" / "mask-drop" (2-250).
_RDNA3_FWD_DROP_D256 = _T(16, 16, 8, 1, waves_per_eu=1, block_dk=64, block_dvk=128,
                          reason=_STATIC + "; static check only, never run on RDNA3: 233-255 VGPRs with dropout "
                                           "(benchmarks/results/run22/)")
_RDNA3_FWD_BIAS_D256 = _T(16, 16, 8, 1, waves_per_eu=2, block_dk=128, block_dvk=128, reload=True,
                          reason=_STATIC + "; static check only, never run on RDNA3: 224-253 VGPRs with a bias / "
                                           "mask (benchmarks/results/run22/)")

# With dropout (check-amd variant "all": every option on, dropout included).
FWD_DROPOUT: dict[str, list[Row]] = {
    # Hopper d=512: the options row (128x32 w8 s2, V in two column splits) took 234 KB of shared memory
    # with the four-row mask's interleave ("drop") and spilled 10-48 registers at s1; four V splits fit
    # (check-amd, not timed)
    "sm90": [
        *FWD_OPTIONS["sm90"][:-1],
        Row(512, _D512_SM90.replace(dv_split=4, reason=_STATIC)),
    ],
    "sm80": [  # ptxas: 128x64 w4 s3 spilled 124 registers at d=64 (128x64 w8 s2: 2 at d=40), 64x64 w8 s2 2
        # with the four-row mask ("drop"); 64x64 w8 s2 16 at d=160 / 256
        Row(64, _T(64, 32, 4, 2, reason=_STATIC)),
        Row(128, _T(128, 64, 8, 2, reason=_STATIC)),
        Row(256, _T(32, 64, 4, 1, reason=_STATIC)),
        Row(512, _T(32, 32, 8, 2, block_dk=64, block_dvk=64,
                    reason=_STATIC + "; 171-211 registers at d=512 (64x32 w8 s2 spilled 27 with dropout)")),
    ],
    "gfx942": [
        Row(64, _cdna(128, 32, 4, 2, _STATIC + "; 242 VGPRs")),
        Row(128, _cdna(64, 32, 4, 2, _STATIC + "; 230 VGPRs")),
        Row(256, _cdna(32, 32, 4, 1, _STATIC + "; 251 VGPRs")),
        Row(512, _D512_CDNA3),
    ],
    "gfx90a": [
        Row(64, _cdna(128, 32, 4, 2, _STATIC + "; 244 VGPRs")),
        Row(128, _cdna(64, 32, 4, 2, _STATIC + "; 231 VGPRs")),
        Row(256, _cdna(32, 32, 4, 1, _STATIC + "; 245 VGPRs")),
        Row(512, _D512_CDNA2),
    ],
    "gfx1100": [
        Row(64, _T(64, 32, 4, 1, reason=_STATIC + "; 228 VGPRs")),
        Row(128, _RDNA3_DROP_D128),
        Row(256, _RDNA3_FWD_DROP_D256),
    ],
}
# An attn_bias (check-amd variants "bias", "mask", with and without sinks, and "bias-opts": every
# option, a float bias and sinks, dense). RDNA3 d<=64: the main 64x32 row spilled 26 VGPRs in bf16
# with every option and the bias (64x16: 185 VGPRs, 8 waves per SIMD).
# A100 (ptxas): the options rows spilled with the bias at d<=64 (128x64 w4 s3: 14-29 registers, 190
# with every option) and with a mask at d<=256 (64x64 w8 s2: 5). Hopper d<=256: the options row keeps
# spills measured for ALiBi + softcap, not for a bias (110-179 registers with it): 64x32 w8 s2 here.
# Session 27 (H100 only, not checked on an H200; benchmarks/results/run24/h100_fwd_sweeps.txt, the row of the time
# timed first and last in the same process, d=256 h=8, 16k tokens, s=4k / 16k): 128x32 w8 s2 over the static 64x32
# w8 s2 row: a (b, h, s, s) bias 294 / 280 TFLOP/s against 137-140 not causal, 246 / 278 against 139-148 causal; a
# (b, 1, 1, s) bool key mask 337 / 270 against 121-167, 267 / 276 against 136-142 (1.76-2.22x); spill-free (ptxas,
# every variant of the tier at d=256 / 160: run24/check_sm90_static_rows.txt; the driver: 0). 128x64 w8 s2 ran
# faster still with the mask (363-459) but spilled 90 registers with a causal float bias (169-181 TFLOP/s; ptxas:
# 99-157 with a float bias); 64x64 w8 s2 1.32-1.51x, with 3-11 spills.
_BIAS256_FWD_H100 = ("H100 sweep, d=256, (b, h, s, s) bias and (b, 1, 1, s) key mask (benchmarks/results/run24/"
                     "h100_fwd_sweeps.txt): 1.76-2.22x the static 64x32 w8 s2 row; spill-free")
# A bool padding mask (b, 1, 1, s) at d=65..128 (Row.key_mask: the HF integration's padded batches without dropout),
# session 27 (H100 only; benchmarks/results/run24/h100_kmask128_fwd.txt, h100_fwd128_bias_kmask.txt, the row of the
# time timed first and last in the same process, 16k tokens, h=16, MHA and GQA 4:1, s=2k / 4k / 16k): 64x64 w4 s3
# through TMA over the options rows (128x64 w8 s3 / s4) 1.07-1.13x causal and 1.03-1.13x not causal at 2k / 4k,
# 1.03-1.11x causal and 0.96-1.03x not causal at 16k (one GQA 2k pair, whose row timings spread by 30%, read
# 0.95-1.40x); with a float bias the same tile measured 0.65-0.84x, so the float bias keeps the options rows.
# Spill-free with the mask (ptxas, run24/check_sm90_kmask128.txt; the driver: 0). Through the library's pick on a
# third instance (h100_keymask_confirm.txt): 1.04-1.14x on 7 of 8 rows; the MHA causal 2k pair, timed first in its
# process, read 0.82-0.92x. Llama-style training (b=4 s=2048 padded, d=128) 1.008x (h100_llama_keymask_ab.txt).
_KMASK128_FWD_H100 = ("H100 sweeps, (b, 1, 1, s) bool key mask, d=128 (benchmarks/results/run24/h100_kmask128_fwd.txt, "
                      "h100_fwd128_bias_kmask.txt): 1.03-1.13x the options rows up to 4k keys, 0.96-1.11x at 16k")
FWD_BIAS: dict[str, list[Row]] = {
    "sm90": [
        FWD_OPTIONS["sm90"][0],
        Row(128, _T(64, 64, 4, 3, use_tma=True, reason=_KMASK128_FWD_H100), key_mask=True),
        *FWD_OPTIONS["sm90"][1:3],
        Row(256, _T(128, 32, 8, 2, reason=_BIAS256_FWD_H100)),
    ],
    "gfx1100": [
        Row(64, _T(64, 16, 4, 1, reason=_STATIC + "; 185 VGPRs")),
        FWD_PLAIN["gfx1100"][1],  # up to d=128: the plain chunked d=256 row spilled with a bias or a mask
        Row(256, _RDNA3_FWD_BIAS_D256),
    ],
    "sm80": [
        Row(64, _T(128, 64, 8, 2, reason=_STATIC)),
        Row(128, _T(64, 64, 8, 2, reason=_STATIC)),
        Row(256, _T(64, 32, 8, 2, reason=_STATIC)),
    ],
}

# Dropout with an attn_bias (check-amd variant "bias-all": every option, dropout, a float bias and
# sinks, dense). CDNA d<=64: dropout's 128x32 row spilled 24-32 VGPRs in bf16 with the bias tile.
# Hopper: the options rows spilled with dropout and the bias (d<=128 128x64 w8 s3/s4: 29-41
# registers, 128x32 w8 s2: 244 and none; d<=256 64x64 w4 s2: 192, 32x64 w8 s2: none; not timed).
# A100: 128x64 w8 s2 spilled 52 at d<=128, 32x64 w4 s1 5 at d<=256.
# Session 27 (H100 only, not checked on an H200; benchmarks/results/run24/h100_fwd_sweeps.txt, the rows of the time
# timed first and last in the same process), a (b, 1, 1, s) bool key mask with dropout 0.1 (the Hugging Face
# integration's padded training call), 16k tokens, s=1k / 4k: d=128 (h=16) 128x64 w8 s3 over the static 128x32 w8 s2
# 273 / 271 TFLOP/s against 187-190 / 181-183 not causal, 176 / 211 against 126-127 / 147-149 causal (1.39-1.50x;
# 128x64 w8 s2 1.27-1.34x, 64x64 w4 s3 1.09-1.16x); d=256 (h=8) 128x32 w8 s2 over the static 32x64 w8 s2 280 / 264
# against 121-124 / 113 not causal, 183 / 211 against 87-89 / 98 causal (2.06-2.33x; 64x32 w8 s2 1.24-1.31x).
# ptxas (run24/check_sm90_static_rows.txt): both spill-free with the key mask and dropout, the driver 0 in the timed
# builds; with a float bias and dropout they spill (d=128: 1 register, 30-41 with every option; d=256: 2-11, 10-19
# with every option). With a (b, h, s, s) float bias and dropout 0.1 at 4k (run24/h100_biasdrop_rows.txt, another
# instance, in turns twice): d=128 1.66-1.70x not causal, 1.17-1.20x causal; d=256 2.60-2.66x / 2.13-2.19x; the
# driver: 0 spills.
_KMASK_DROP_FWD_H100 = ("H100 sweep, (b, 1, 1, s) key mask + dropout 0.1 (benchmarks/results/run24/"
                        "h100_fwd_sweeps.txt): 1.39-1.50x (d=128) / 2.06-2.33x (d=256) the static rows")
_KD_SPILLS = ("; spill-free with the key mask, ptxas spills 1-41 registers with a float bias and dropout (every "
              "option: the most); with a float bias and dropout 1.17-2.66x the static rows, 0 spills per the driver "
              "(run24/h100_biasdrop_rows.txt)")
FWD_BIAS_DROPOUT: dict[str, list[Row]] = {
    "sm90": [  # d<=64: H100 sweep, BERT-base's key-masked dropout calls (benchmarks/results/h100_run3/
        # tiles_kmask_fwd.txt, graph-timed): 72 / 91 / 95 TFLOP/s at s=128/512/1024 against 62 / 84 / 89
        # for the options row (64x64 w4 s3 TMA); 167 registers, no spills. H200: 1.08-1.17x (tiles_kmask_h200.txt).
        Row(64, _T(64, 32, 4, 3, reason="H100 sweep, (b, 1, 1, s) key mask + dropout 0.1, d=64 h=12 "
                                        "(benchmarks/results/h100_run3/tiles_kmask_fwd.txt): 1.07-1.17x the "
                                        "options row, H200 1.08-1.17x; 167 registers")),
        Row(128, _T(128, 64, 8, 3, reason=_KMASK_DROP_FWD_H100, spills_ok=_KMASK_DROP_FWD_H100 + _KD_SPILLS)),
        Row(256, _T(128, 32, 8, 2, reason=_KMASK_DROP_FWD_H100, spills_ok=_KMASK_DROP_FWD_H100 + _KD_SPILLS)),
    ],
    "sm80": [  # d<=64: 64x64 w8 s2 spilled 2 registers with the four-row mask ("bias-drop")
        Row(64, _T(64, 32, 4, 2, reason=_STATIC)),
        Row(128, _T(64, 64, 8, 2, reason=_STATIC)),
        Row(256, _T(32, 64, 8, 1, reason=_STATIC)),
    ],
    "gfx1100": [  # the dropout row's 64x32 spilled 1 VGPR with a bias and the four-row mask ("bias-drop")
        Row(64, _T(64, 16, 4, 1, reason=_STATIC)),
        Row(128, _RDNA3_DROP_D128),
    ],
    "gfx942": [
        Row(64, _cdna(64, 32, 4, 2)),
        *FWD_DROPOUT["gfx942"][1:],
    ],
    "gfx90a": [
        Row(64, _cdna(64, 32, 4, 2)),
        *FWD_DROPOUT["gfx90a"][1:],
    ],
}


def upto(rows: list[Row], max_d: int) -> list[Row]:
    """The rows up to head dim max_d (gfx12 repeats gfx1100's there and has its own d=256 rows; tiles_bwd.py too)."""
    return [r for r in rows if r.max_d <= max_d]


# RDNA4 (gfx12) at d=160-256 with dropout or an attn_bias / bool mask: the gfx1100 d=256 row (16x16 w4, head-dim
# chunks of 64), which spilled there on gfx1100, compiles spill-free for gfx1201 in every dropout / bias variant
# (check-amd, benchmarks/check_rdna4_fwd256_specs.py, benchmarks/results/run18/; static check only, never run on
# an RDNA4 GPU). A family with a table of its own no longer falls back (family_table), so each gfx12 table repeats
# the gfx1100 rows of its tier up to d=128 (gfx1100's own d=256 rows there are not gfx12's).
_RDNA4_FWD_D256 = FWD_PLAIN["gfx1100"][2].config
FWD_DROPOUT["gfx12"] = [*upto(FWD_DROPOUT["gfx1100"], 128), Row(256, _RDNA4_FWD_D256.replace(
    reason=_STATIC + "; static check only (gfx1201, never run on RDNA4): 166-216 VGPRs with dropout"))]
FWD_BIAS["gfx12"] = [*upto(FWD_BIAS["gfx1100"], 128), Row(256, _RDNA4_FWD_D256.replace(
    reason=_STATIC + "; static check only (gfx1201, never run on RDNA4): 125-215 VGPRs with a bias / mask"))]
FWD_BIAS_DROPOUT["gfx12"] = [*FWD_BIAS_DROPOUT["gfx1100"], Row(256, _RDNA4_FWD_D256.replace(
    reason=_STATIC + "; static check only (gfx1201, never run on RDNA4): 143-240 VGPRs with a bias / mask and "
                     "dropout"))]
# A sliding window alone (issue 13's window row: causal, 1024 keys to the left). Its programs are short
# (a query block sees ~window / BLOCK_N key blocks, against ~seqlen / 2 / BLOCK_N causal); on Hopper the
# smaller 64x64 w4 s3 tile through TMA measured 1.13-1.19x the options row's 128x64 w8 s3 there (H100 and
# H200), not the plain causal call (why is not established: check-kernels counts one program per SM by
# shared memory for both). Dense calls only (fwd.select_config): the varlen build (plain pointers)
# spills 7-8 registers (ptxas).
_WINDOW_H100 = ("H100, causal + window 1024, d=128 b=4 s=4096 h=32 and b=1 s=16384 (benchmarks/results/run9/"
                "h100_sweep_win_fwd.txt): 374 / 361 TFLOP/s against 330 / 330 for the options row, best of 7; "
                "H200 391 / 377 against 328 / 333 (h200_win_fwd.txt); 168 registers, 0 spills (driver and ptxas)")
# gfx942 d=256 (static check only; Gemma 3's sliding-window layers): a window alone compiles the plain
# row's 64x32 w4 s1 without a spill at the options row's occupancy (236-237 VGPRs, 2 waves per SIMD; the
# options row is 32x32), benchmarks/results/run13/check_win_amd.txt; at d<=128 the plain tiles spill
# 26-166 SGPRs into VGPR lanes with a window, and gfx950's d=256 build 1: those keep the options rows.
# d <= 64, causal + window, H100 only (session 25, benchmarks/results/run22/h100_win_fwd.txt; not checked on an
# H200): the same tile through plain pointers. Window 128 (GPT-OSS's shape, without its sinks) 100 / 101 TFLOP/s
# MHA and 56 / 57 GQA 8:1 against 62-76 and 43 for the TMA row timed first and last (1.30-1.63x); window 1024
# 307-318 against 229-319 (the TMA row's own readings spread there: even); 168 registers, 0 spills. Through the
# library's pick on another instance, the TMA row timed twice in between (run22/h100c_win_confirm2.txt): window
# 1024 MHA 267-304 against 231-260 (1.13-1.18x), GQA 4:1 310-314 against 312-317 (0.99-1.00x); window 128
# 1.05-2.4x (MHA and 8:1; those calls are host-bound under do_bench and spread widely). Window 128 timed as CUDA
# graph replays (run22/h100d_win_graph.txt): 104-105 against 101 MHA, 110 against 108-109 GQA 8:1 (1.01-1.04x), so
# the kernel's own gain there is small; the plain-timing gains above include the host's launch.
_WINDOW64_FWD = ("H100, causal + window 128 / 1024, d=64 (benchmarks/results/run22/h100_win_fwd.txt, "
                 "h100c_win_confirm2.txt, h100d_win_graph.txt): window 1024 0.99-1.18x the TMA row, window 128 "
                 "1.01-1.04x graph-timed")
FWD_WINDOW: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _T(64, 64, 4, 3, reason=_WINDOW64_FWD), causal=True),
        Row(128, _T(64, 64, 4, 3, use_tma=True, reason=_WINDOW_H100), causal=True),
        *FWD_OPTIONS["sm90"],
    ],
    "gfx942": [
        *FWD_OPTIONS["gfx942"][:2],
        Row(256, _cdna(64, 32, 4, 1, _STATIC + " (a window alone: the plain row's tile; run13/check_win_amd.txt); "
                       "236-237 VGPRs")),
        FWD_OPTIONS["gfx942"][3],
    ],
    "gfx950": FWD_OPTIONS["gfx942"],  # not the gfx942 window rows (FALLBACK): its d=256 build spilled 1 SGPR
}

# Softcap alone (Gemma 2's call), bf16, dense: the fixed-max softmax (no running max, no rescale) leaves the
# score math light, and on Hopper the 64x64 w4 s3 TMA tile beat the options row's 128x64 w8 s3 by 1.11-1.18x
# (H100, d=128 softcap 30, b*s = 16384, 32 heads, s = 4096 / 16384, causal and not: benchmarks/results/run13/
# h100_sweep_opts128.txt; H200 1.18-1.37x), where with ALiBi or dropout it did not (there the options /
# dropout rows stay).
_SOFTCAP_H100 = ("H100, softcap 30 alone, d=128 h=32 s=4096 / 16384, causal and not (benchmarks/results/run13/"
                 "h100_sweep_opts128.txt): 435-529 TFLOP/s against 385-447 for the options row, best of 7; H200 "
                 "(h200_confirm_softcap.txt) 456-581 against 384-438 (1.18-1.37x); 140-143 registers, 0 spills "
                 "(driver)")
# CDNA (static check only, never run on AMD hardware): the options rows are smaller than the plain ones
# because every-option builds spilled with the plain tiles; softcap alone (fixed max, bf16) fits the plain
# rows at d=128 (gfx942: 128x32 w4 s2, 210 VGPRs; gfx90a: 231) and d=256 (gfx942: 64x32 w4 s1, 252-254) with
# no spill and the same occupancy (2 waves per SIMD) as the options rows' builds, so a program takes 2x the
# query rows for the same K / V traffic, as the plain call does (benchmarks/results/run13/
# check_softcap_amd.txt, benchmarks/check_softcap_amd_specs.py). d<=64 keeps the options row (the plain
# 128x64 builds spill 2-32 SGPRs into VGPR lanes); gfx950 keeps the options rows (its d=128 plain-tile
# build spilled 16 VGPRs).
_SOFTCAP_CDNA = _STATIC + " (softcap alone, bf16: the plain row's tile; run13/check_softcap_amd.txt)"
FWD_SOFTCAP: dict[str, list[Row]] = {
    "sm90": [
        Row(128, _T(64, 64, 4, 3, use_tma=True, reason=_SOFTCAP_H100)),  # d<=64: the options row's tile too
        *FWD_OPTIONS["sm90"][3:],
    ],
    "gfx942": [
        FWD_OPTIONS["gfx942"][0],
        Row(128, _cdna(128, 32, 4, 2, _SOFTCAP_CDNA + "; 210 VGPRs")),
        Row(256, _cdna(64, 32, 4, 1, _SOFTCAP_CDNA + "; 252-254 VGPRs")),
        FWD_OPTIONS["gfx942"][3],
    ],
    "gfx90a": [
        FWD_OPTIONS["gfx90a"][0],
        Row(128, _cdna(128, 32, 4, 2, _SOFTCAP_CDNA + "; 231 VGPRs")),
        *FWD_OPTIONS["gfx90a"][2:],
    ],
    "gfx950": FWD_OPTIONS["gfx942"],  # not the gfx942 softcap rows (FALLBACK): d=128 spilled there
}

# ALiBi alone, dense, sm90 d<=64: the plain row's 128x64 w8 s3 (two warpgroups of 64 query rows) over the options
# row (64x64 w4 s3 TMA). H100, ALiBi alone, d=64, 32 heads, 16k tokens, the options row timed in the same process:
# 1.04-1.09x not causal and 1.02-1.09x causal at 4k / 16k in each of two runs (benchmarks/results/run19/
# h100d_alibi_fold_ab_rejected.txt, the "old" files: the committed kernels), 1.01-1.05x causal at 2k / 8k in
# session 21's sweep (run18/h100_opts64_fwd_sweep.txt); the same results as the options row (the sweeps' err
# column: 0). Varlen calls keep the options row (not measured with this tile; without options the 8-warp tile
# took 1.19-1.21x the time there).
_ALIBI64_H100 = ("H100, ALiBi alone, d=64, 32 heads (benchmarks/results/run19/h100d_alibi_fold_ab_rejected.txt, "
                 "the committed-code runs; run18/h100_opts64_fwd_sweep.txt): 1.01-1.09x the options row (MHA); "
                 "H200 (run20/h200/alibi_fwd64_*.txt): not causal 1.04-1.07x (MHA and GQA 4:1), causal MHA "
                 "1.00-1.06x, causal GQA 4:1 0.81-0.86x (that call keeps the options row)")
_ALIBI64 = _T(128, 64, 8, 3, heavy_first=True, reason=_ALIBI64_H100 + _HEAVY_ALIBI)
FWD_ALIBI: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _ALIBI64, varlen=False, gqa=False),
        Row(64, _ALIBI64, causal=False, varlen=False),
        Row(128, _T(128, 64, 8, 3, heavy_first=True, reason=_H100_FWD + _HEAVY_ALIBI), causal=True, varlen=False,
            gqa=False),
        *FWD_OPTIONS["sm90"],
    ],
}

FWD = (FWD_PLAIN, FWD_OPTIONS, FWD_DROPOUT, FWD_BIAS, FWD_BIAS_DROPOUT, FWD_WINDOW, FWD_SOFTCAP, FWD_ALIBI)

# The warp-specialised forward (kernels/fwd_ws.py), keyed by the exact arch (not the family: sm100's
# warp specialisation is another pass, not measured) and the exact head dim of Q, K and V. It serves
# only the calls launch/fwd_ws.py ``ws_reason`` lets through (dense, not causal, no option,
# seqlen_k a multiple of block_n, seqlen_q of 4); the others take the FWD rows. 4 warps become 12 (a
# producer warp group, two consumer warp groups of 64 query rows); Triton 3.6 gave NaNs with 3 stages
# (run14/h100_ws_probe.txt). d=64 measured slower than the plain row (0.94-1.01x), so no row there.
_WS_H100 = ("H100 twice, d=128, not causal, bf16 (benchmarks/results/run14/ws_h100, ws_h100_repeat): b*s = 16384, "
            "16 heads, s = 1k / 4k / 16k 404-406 / 522-524 / 563-576 TFLOP/s against 398-400 / 464-478 / 506-511 "
            "for the main kernel in the same call (1.02 / 1.10-1.13 / 1.11-1.13x); b=4 s=4096 32 heads 532-548 "
            "against 481-486, GQA 32/8 532-540 against 491-492; H200 (run16/h200_ws_ab.md, both kernels on / off): "
            "1.06-1.15x from 2k keys, 1.01x at 1k")
FWD_WS: dict[str, list[Row]] = {
    "sm90": [Row(128, _T(128, 128, 4, 2, reason=_WS_H100), causal=False)],
}

# The Gluon forward (kernels/fwd_gluon.py, sm90): one row per exact head dim (and causal flag); block_m 128 (two
# consumer warp groups of 64 rows), block_n keys per ring slot, num_warps 4 (the first consumer; the second and
# the producer warp are added by the kernel), num_stages the ring's depth; min_seqlen_k: from this many queries
# and keys. ptxas (check-kernels --kernel fwd_gluon): 0 local memory in every build. H100, b*s = 16384, hidden
# 2048, bf16, the same calls with it on and off in one process (benchmarks/results/run25/h100_gluon_ab_*.md; off:
# the warp-specialised or main kernel). At d=64 it lost (0.61-0.98x) until persistent programs (session 31): a row
# for calls that are not causal. H200 check (run26/h200x4_gluon_tiles.md,
# every ring that fits, same process): the rows' rings are the fastest on every d=128 row (three slots 0.93-1.00x,
# 64-key blocks 0.89-0.96x); at d=256 128x64 two slots is the only ring that fits.
_GLUON_128 = ("H100 (run25/h100_gluon_ab_any_length.md): d=128 not causal 1.06-1.09x at s = 1k-16k (556 / 587 "
              "TFLOP/s at 4k / 16k, cuDNN 598 / 624), GQA 32/8 1.09x")
_GLUON_128_CAUSAL = ("H100 (run25/h100_gluon_ab_any_length.md): d=128 causal 1.09-1.23x from 2k (479 / 557 TFLOP/s "
                     "at 4k / 16k, cuDNN 520 / 559), GQA 32/8 1.14x; at 1k 0.98x one program a tile, 1.27x with "
                     "persistent programs (run28/h100_gluon_persistent_any_4_gpu*.md: 357-361 TFLOP/s, the other "
                     "kernels 282-284), so from 1024")
_GLUON_256 = ("H100 (run25/h100_gluon_ab_any_length.md): d=256 1.16-1.23x not causal, 1.10-1.18x causal at "
              "s = 1k-16k (619 / 646 and 514 / 593 TFLOP/s at 4k / 16k, cuDNN 642 / 661 and 561 / 594); 128x64, "
              "two ring slots (three do not fit 227 KB)")
_GLUON_64 = ("H100 (run28/h100_gluon_d64_5_gpu*.md, persistent programs): d=64 not causal 1.01-1.05x the other "
             "kernels at 2k, 1.02-1.03x at 4k, 1.07-1.08x at 16k (1.01x at 1k; causal 0.87-0.98x: no row); three or "
             "four ring slots 0.96-1.02x of two; ptxas: no local memory")
# ptxas: the persistent causal d=128 build (launch/fwd_gluon.py ``persistent``) spills 24 B, measured with it.
_GLUON_128_PERSISTENT = ("H100 (run28/h100_gluon_persistent_*.md): the persistent causal build (5 registers, 24 B "
                         "of local memory) 1.04-1.09x one program a tile at 2k-4k, 0.99-1.02x at 16k")
FWD_GLUON: dict[str, list[Row]] = {
    "sm90": [
        Row(128, _T(128, 128, 4, 2, reason=_GLUON_128), causal=False, min_seqlen_k=1024),
        Row(128, _T(128, 128, 4, 2, reason=_GLUON_128_CAUSAL, spills_ok=_GLUON_128_PERSISTENT), causal=True,
            min_seqlen_k=1024),
        Row(256, _T(128, 64, 4, 2, reason=_GLUON_256), min_seqlen_k=1024),
        Row(64, _T(128, 128, 4, 2, reason=_GLUON_64), causal=False, min_seqlen_k=2048),
    ],
}
# The Gluon forward with a window, softcap and / or ALiBi (causal calls: the ones measured), own rows and limits.
# H100, b*s = 16384, hidden 2048, causal, the same calls with it on and off in one process
# (benchmarks/results/run25/h100_gluon_opts_*.md). d=256: 1.10-1.27x with every option at 1k-16k (window 1024 / 128,
# softcap 30, ALiBi, softcap 50 + window 1024: Gemma 2's layers). d=128: ALiBi 1.10-1.12x and window 1024 1.05-1.06x
# from 4k (0.98-0.99x at 1k), but softcap lost to the softcap tier's fixed-max kernel (0.75-0.91x) and window 128 to
# the window tier (0.87-0.89x): those stay with the Triton kernels (GLUON_OPTION_LIMITS).
# Session 32 (one-sided ALiBi, softcap against a fixed max; benchmarks/results/run29/h100_gluon_opts_3_gpu{2,3}.md,
# every option at every length and head dim, two GPUs of one H100 host): d=128 from 2048 keys, ALiBi 1.11-1.13x and
# window 1024 1.04-1.06x there (1k: 1.04x and 0.96x); softcap 30 at d=128 1.10x at 16k but 0.97-0.99x at 4k and
# 0.94-0.97x at 2k, so it starts at 16384 keys (softcap_min_seqlen); window 128 still 0.87-0.91x (min_window).
_GLUON_OPTS_128 = ("H100 (run25/h100_gluon_opts_any_length.md): causal d=128 ALiBi 1.10-1.12x, window 1024 1.05-1.06x "
                   "at 4k / 16k; run29/h100_gluon_opts_3_gpu*.md: 2k ALiBi 1.11-1.13x, window 1024 1.04-1.06x "
                   "(1k 1.04x / 0.96x)")
_GLUON_OPTS_256 = ("H100 (run25/h100_gluon_opts_any_length.md): causal d=256 1.10-1.27x at 1k-16k with a window of "
                   "1024 or 128, softcap 30, ALiBi, softcap 50 + window 1024")
# The fixed-max softmax of softcap calls (launch/fwd.py ``softcap_max``, the Gluon forward's SOFTCAP 2): softcap *
# log2(e) up to this (softcap <= 53: Gemma 2's 50, Grok's 30); kernels/fwd.py says why.
SOFTCAP_MAX_LOG2 = 77.0
FWD_GLUON_OPTIONS: dict[str, list[Row]] = {
    "sm90": [
        Row(128, _T(128, 128, 4, 2, reason=_GLUON_OPTS_128), causal=True, min_seqlen_k=2048),
        Row(256, _T(128, 64, 4, 2, reason=_GLUON_OPTS_256), causal=True, min_seqlen_k=1024),
    ],
}
# What a FWD_GLUON_OPTIONS row of (arch, head dim) takes: softcap from how many queries and keys
# (softcap_min_seqlen), and the shortest left window bound (windows without one take any); measured as above.
GLUON_OPTION_LIMITS: dict[tuple[str, int], dict] = {
    ("sm90", 128): dict(softcap_min_seqlen=16384, min_window=1024),
    ("sm90", 256): dict(min_window=0),
}

# FP8 (e4m3) forward, head dims up to 256, every option but dropout (FP8 is forward-only), keyed by
# the arch family itself (no fallback: the e4m3 flavour differs, launch/fwd.py FP8_OF_FAMILY).
# K / V tiles take half the bytes of bf16 ones. On sm90 fp8 wgmma needs V K-major in shared
# memory: dense calls copy V to [b, hk, dv, sk] first (launch/fwd.py plan_forward v_t; the async
# copies then land it K-major), varlen calls read V as it lies, through registers (slower).
_FP8_SM90 = "spill-free by static check only (check-amd: wgmma e4m3 in both products), not timed"
_FP8_H100 = ("H100 sweep, dense e4m3, V in the [b, hk, dv, sk] layout, b=1 s=16384 h*d=2048 "
             "(benchmarks/results/h100_run2/fp8_sweep.txt); varlen (V as it lies) not timed")
_FP8_CDNA = _STATIC + " (mfma fp8 in both products)"
_FP8_CDNA_ROWS = [
    Row(64, _cdna(128, 64, 4, 2, _FP8_CDNA + "; 130-230 VGPRs")),
    Row(128, _cdna(128, 32, 4, 2, _FP8_CDNA + "; 204-239 VGPRs (128x64 spilled 4-46 with every option)")),
    Row(256, _cdna(64, 32, 4, 1, _FP8_CDNA + "; 140-216 VGPRs (128x32 spilled 5-77)")),
]
FWD_FP8: dict[str, list[Row]] = {
    # dense calls without options (V in the [b, hk, dv, sk] layout); FWD_FP8_OPTIONS serves the rest
    "sm90": [
        Row(64, _T(128, 128, 8, 3, reason=_FP8_H100 + ": 478 TFLOP/s full, 297 causal (bf16 427 / 411)")),
        Row(128, _T(128, 64, 4, 3, reason=_FP8_H100 + ": 765 TFLOP/s (bf16 505; 128x64 w8 s3 637, 128x128 w8 s3 "
                                     "747, 5 others 495-762)"), causal=False),
        Row(128, _T(128, 64, 8, 3, reason=_FP8_H100 + ": causal 370 TFLOP/s (bf16 476; 128x64 w4 s3 133, 6 others "
                                     "149-329)", spills_ok=_FP8_H100 + ": causal 370 TFLOP/s, the fastest of 8")),
        Row(256, _T(128, 128, 8, 3, reason=_FP8_H100 + ": 934 TFLOP/s (bf16 375; 128x64 w8 s2 647, 6 others "
                                     "177-830)", spills_ok=_FP8_H100 + ": 934 TFLOP/s at d=256"), causal=False),
        Row(256, _T(128, 32, 8, 3, reason=_FP8_H100 + ": causal 326 TFLOP/s (bf16 427; 128x64 w8 s2 128, 6 others "
                                     "48-128)", spills_ok=_FP8_H100 + ": causal 326 TFLOP/s against 128 for the "
                                     "spill-free 128x64 w8 s2"), causal=True),
    ],
    "gfx942": _FP8_CDNA_ROWS,  # fp8e4b8 (torch.float8_e4m3fnuz)
    # fp8e4nv (torch.float8_e4m3fn); d<=256 with one stage lowered half the dots to FMA (check-amd)
    "gfx950": _FP8_CDNA_ROWS[:2] + [Row(256, _cdna(64, 32, 4, 2, _FP8_CDNA + "; 178-238 VGPRs (1 stage: 2 of 4 "
                                                                             "dots without MFMA)"))],
    INTERPRETER: [Row(256, _T(32, 16, 1, 1, reason="interpreter: small blocks so tests cross block edges"))],
}
# FP8 with a window, ALiBi or softcap, or varlen: V read as it lies (through registers on sm90);
# families without a table here use FWD_FP8.
FWD_FP8_OPTIONS: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _T(128, 128, 8, 3, reason=_FP8_SM90 + "; 232 registers")),
        Row(128, _T(128, 64, 8, 3, reason=_FP8_SM90 + "; 178-241 registers (128x128 w8 s2: 255, no spill)")),
        Row(256, _T(128, 64, 8, 2, reason=_FP8_SM90 + "; 247-252 registers (64x64 w4 spilled 7)")),
    ],
}


# ---------------------------------------------------------------------------------------------
# Decode (kernels/decode.py): block_m is chosen per call (packed query rows, 16..64);
# block_n keys per tile. Only sm90 is measured (benchmarks/results/decode_h100.md: the H100 sweep
# of benchmarks/bench_decode.py). Split heuristic per family: DECODE_SPLIT.

_DEC = "not timed: compiles spill-free in check-amd"
# Head dims above 256 (up to MLA's 576/512; the rows are keyed by the padded 1024): head-dim chunks of
# 64. Checked at 512/512 and 576/512 with 1 and 64 query heads per KV head (16 / 64 packed rows).
_DEC_MLA = _DEC + " at 512/512 and 576/512 (MLA)"
_MLA_CDNA = _T(0, 32, 4, 1, block_dk=64, block_dvk=64, reason=_DEC_MLA + "; 212-438 VGPRs, 1 wave per SIMD at 64 rows")
DECODE: dict[str, list[Row]] = {
    "sm90": [
        Row(256, _T(0, 32, 4, 4, reason="measured on an H100, decode_h100.md"), paged=True),
        # contiguous caches: 64-key blocks (session 16, benchmarks/decode_sweep.py, graph-timed, b=8 cache 8k /
        # b=1 64k, h=32/8 d=128): H200 1.05-1.07x the 32-key row it replaced (run13/h200_decode_sweep.txt:
        # 3.97 / 3.72 TB/s against 3.72 / 3.55), H100 0.99x (h100_decode_sweep.txt: 2.81 / 2.67 against
        # 2.84 / 2.71)
        Row(256, _T(0, 64, 4, 2, reason="H200 1.05-1.07x, H100 0.99x the 32-key row (run13/h200_decode_sweep.txt, "
                                        "h100_decode_sweep.txt)")),
        Row(1024, _T(0, 32, 8, 2, block_dk=64, block_dvk=64,
                     reason=_DEC_MLA + "; 99-244 registers (4 warps spilled 200+ at 64 rows)")),
    ],
    # block_m > 0 caps the packed rows of a program: 64 rows spilled 162-190 registers at 576/512
    "sm80": [Row(256, _T(0, 64, 4, 3, reason=_DEC)),
             Row(1024, _T(32, 32, 8, 2, block_dk=64, block_dvk=64, reason=_DEC_MLA + "; at most 32 packed rows, "
                                                                                     "100-170 registers"))],
    "gfx942": [Row(256, _T(0, 64, 4, 1, reason=_DEC)), Row(1024, _MLA_CDNA)],
    "gfx90a": [Row(256, _T(0, 64, 4, 1, reason=_DEC)), Row(1024, _MLA_CDNA)],
    # RDNA3 above d=128: BLOCK_N 32 spills (80 VGPRs with 8 warps, check-amd with aligned
    # strides); BLOCK_N 16 with 8 warps: 206 VGPRs, no spills, 7 waves per SIMD (4 warps: 230, 6).
    # Above 256 none (declined): 576/512 in chunks spilled 169+ VGPRs even with 16 rows and BLOCK_N 16.
    "gfx1100": [
        Row(128, _T(0, 32, 4, 1, reason=_DEC)),
        Row(256, _T(0, 16, 8, 1, reason=_DEC + "; 206 VGPRs, 7 waves per SIMD")),
    ],
    "generic": [Row(256, _T(0, 64, 4, 2, reason="conservative guess for unknown GPUs")),
                Row(1024, _T(32, 32, 4, 1, block_dk=64, block_dvk=64, reason="conservative guess for unknown GPUs"))],
    INTERPRETER: [
        Row(256, _T(0, 16, 4, 1, reason="interpreter: short sequences span several tiles")),
        Row(1024, _T(0, 16, 4, 1, block_dk=64, block_dvk=128,
                     reason="interpreter: head-dim chunks (576 = 9 x 64), a partial last V chunk at 320")),
    ],
}


class SplitHeuristic(NamedTuple):
    """Decode splits: about ``ctas_per_sm`` programs per multiprocessor; each split keeps at
    least ``min_tiles`` key tiles of the cache's capacity."""

    ctas_per_sm: int = 4
    min_tiles: int = 2


DECODE_SPLIT = {INTERPRETER: SplitHeuristic(4, 1)}  # every other family: SplitHeuristic()
