"""The backward pass's tile tables (kernels/bwd.py), keyed by arch family and feature tier
(``launch/tiles.py`` holds the types, the arch map, the forward and decode tables).

``BWD`` = (plain, options, dropout, bias, bias + dropout, window, softcap) tables, each a dict family -> rows
(indexed by ``tiles.tier_of``);
``bwd_config`` builds a ``BwdConfig`` from the dK/dV and dQ tiles; ``bwd_preprocess_tile`` is the
delta kernel's tile.
"""
from __future__ import annotations

from .tiles import _STATIC, INTERPRETER, BwdConfig, Row, Tile, family_table, upto

# Backward (kernels/bwd.py). sm90 rows: measured on an H100 / H200 (bwd_h100.md, tiles_h200.md):
# the fastest tile measured, unless a tile that ptxas compiles spill-free (every variant
# check-amd compiles, GQA included) is within 10% of it (spills kept that way: ``spills_ok``).

def bwd_config(dkdv: tuple, dq: tuple, *, split: bool = True, dq_atomic: bool = False, amd: bool = False,
               reason: str = _STATIC, spills_ok: str = "", chunks: tuple[int, int] = (0, 0), kv_passes: int = 1,
               reload: bool = False, waves_per_eu: int = 1, delta_in_dq: bool = True) -> BwdConfig:
    """BwdConfig from (block_m, block_n, warps, stages) of the dK/dV and dQ kernels; ``amd``:
    ``waves_per_eu`` (1 unless given), 16x16 matrix instructions (every AMD backward row); ``chunks``:
    (block_dk, block_dvk) of both kernels (head dims above 256); ``kv_passes`` and ``reload`` (both
    kernels' tiles): see BwdConfig and Tile."""
    opts = dict(waves_per_eu=waves_per_eu, matrix_instr_nonkdim=16) if amd else {}
    opts.update(block_dk=chunks[0], block_dvk=chunks[1], reload=reload)
    return BwdConfig(Tile(*dkdv, **opts, reason=reason, spills_ok=spills_ok),
                     Tile(*dq, **opts, reason=reason, spills_ok=spills_ok), split=split, dq_atomic=dq_atomic,
                     kv_passes=kv_passes, delta_in_dq=delta_in_dq, reason=reason)


_bwd = bwd_config


_BWD_H100 = "measured on an H100 / H200, benchmarks/results/bwd_h100.md, tiles_h200.md"
_SPILLS_PLAIN_128 = ("fastest tile measured (benchmarks/results/bwd_h100.md); the builds the driver loaded for "
                     "the timed calls (seqlen a multiple of 16) report 0-2 spills (tiles_h200.md)")
_SPILLS_OPTS_128 = ("with ALiBi+softcap / dropout 0.95-1.0x the fastest tile; spill-free tiles measured "
                    "0.47-0.83x (benchmarks/results/tiles_h200.md)")

# Head dims 257..512: head-dim chunks of 64 (kernels/bwd.py), dK/dV in one loop. A dK/dV program
# holds K, V and the fp32 dK, dV of its KV rows over the whole head dim (at d = dv = 512, 16 KV rows:
# 64 KB), so these tiles are small; NVIDIA builds use mma.sync (below 64 rows per warpgroup no
# wgmma). Spill-free in every check-amd variant (MHA / GQA, every option, dropout), not timed.
_D512_BWD_CDNA3 = _bwd((16, 32, 4, 1), (32, 32, 4, 1), split=False, amd=True, chunks=(64, 64),
                       reason=_STATIC + "; dK/dV 452-478 VGPRs, dQ 300-375 (d=512, gfx942 / gfx950)")
_D512_BWD_CDNA2 = _bwd((16, 32, 4, 1), (32, 16, 4, 1), split=False, amd=True, chunks=(64, 64),
                       reason=_STATIC + "; dK/dV 460-478 VGPRs, dQ 304-308 (d=512; dQ 32x32 spilled 1 with options)")
_D512_BWD_NV = _bwd((32, 16, 8, 1), (32, 32, 8, 2), split=False, chunks=(64, 64),
                    reason=_STATIC + "; d=320..512 (sm90 / sm80): dK/dV 220-246 registers; with 2 stages ptxas "
                                     "capped it at 128 and spilled 1-8 at d=320..448")

# RDNA3 at head dims 65..128: dK and dV in two launches (BwdConfig.kv_passes), each holding one
# accumulator, one masked loop; K / V (dK/dV) and Q / dO (dQ) read per block (Tile.reload); 8 warps;
# waves_per_eu 2 (with 1, LLVM's schedule of the dK pass spilled 24-34 VGPRs in the bool mask + dropout
# and the fp16 every-option GQA builds). Spill-free in every check-kernels variant on gfx1100 and
# gfx1201 (docs/HARDWARE.md); never run on an RDNA3 GPU, so its speed is unknown (the two launches
# compute the scores once more than one launch would).
_RDNA3_D128 = _bwd((16, 16, 8, 1), (16, 16, 8, 1), split=False, amd=True, kv_passes=2, reload=True, waves_per_eu=2,
                   reason=_STATIC + "; static check only, never run on RDNA3 (docs/HARDWARE.md)")

# RDNA3 at head dims 129..256 (session 25, issue 13; static check only, check-amd --arch gfx1100,
# benchmarks/check_rdna3_bwd256_specs.py, benchmarks/results/run22/): split-D, the _RDNA3_D128 scheme (two
# launches, one loop, 16x16) with head-dim chunks of 32 read right before each product (Tile.reload with
# block_dk: kernels/bwd.py), so no [16, d] operand is held whole (its WMMA copies alone were 128 VGPRs at d=256:
# the _RDNA3_D128 row spilled 148-149 in the dK pass and 344 in dQ there). dK/dV 8 warps, waves_per_eu 1 (2: the
# dV pass sat at 256 and spilled 5-17 in the options builds); dQ 16 warps in the plain table (8 warps spilled 3-58
# VGPRs in plain, bias or window builds, with chunks of 32 or 64), _RDNA3_D256_OPTS below in the others. Never run
# on an RDNA3 GPU: speed unknown (the dK pass reads each chunk of Q and the dQ kernel each chunk of K twice per
# block, from L1 / L2).
_RDNA3_D256 = BwdConfig(
    Tile(16, 16, 8, 1, waves_per_eu=1, matrix_instr_nonkdim=16, block_dk=32, block_dvk=32, reload=True,
         reason=_STATIC + "; static check only, never run on RDNA3"),
    Tile(16, 16, 16, 1, waves_per_eu=1, matrix_instr_nonkdim=16, block_dk=32, block_dvk=32, reload=True,
         reason=_STATIC + "; static check only, never run on RDNA3"),
    split=False, kv_passes=2,
    reason=_STATIC + "; static check only, never run on RDNA3 (gfx1100, d=136..256): split-D, chunks of 32; dV "
                     "pass 135-199 VGPRs, dK pass 151-246, dQ 165-213 (benchmarks/results/run22/)")

# The options and bias + dropout tables (and the dropout, bias, window and softcap tiers, which fall back to the
# options one): the 16-warp dQ spilled 15 VGPRs in the fp16 d=192 window build, 60 in the fp16 options builds at
# d=160 / 136 (8-19 with a window there) and 1 in the bf16 every-option bias + dropout build at d=224; dQ 16x16 w4
# with chunks of 128 and waves_per_eu 3 fits every variant of these tiers at d=136..256 (201-247 VGPRs; the bias +
# dropout builds spill 2-25 SGPRs into VGPR lanes, a warning). It spilled 1 in the plain causal d=192 builds, so
# the plain table keeps 16 warps.
_RDNA3_D256_OPTS = _RDNA3_D256.replace(
    dq=_RDNA3_D256.dq.replace(num_warps=4, waves_per_eu=3, block_dk=128, block_dvk=128),
    reason=_STATIC + "; static check only, never run on RDNA3 (gfx1100, d=136..256): split-D; dK/dV as _RDNA3_D256, "
                     "dQ 16x16 w4 wpe3 chunks of 128: 201-247 VGPRs (benchmarks/results/run22/)")

# RDNA4 (gfx12) at head dims 129..256, static check only (check-amd --arch gfx1201,
# benchmarks/check_rdna4_bwd256_specs.py, benchmarks/results/run18/): the _RDNA3_D128 scheme (two launches,
# reload, one loop, 16x16) fits gfx1201 at d=192 / 256 where gfx1100 spilled (dK pass 131-132 VGPRs, dQ 222).
# 8 warps with waves_per_eu 3: every variant but the options one ("opts": window + ALiBi + softcap + varlen),
# whose MHA dK pass spilled 2 VGPRs with waves_per_eu 1..4 alike (wpe 2: the dropout dQ builds also spilled 5-25
# SGPRs into VGPR lanes, wpe 3 only bias-drop's bf16 18-19); 16 warps (wpe 2) fit the options tier (and the window,
# float-bias and bool-mask calls that fall back to it) but spilled 2-17 VGPRs with dropout.
# Never run on an RDNA4 GPU: speed unknown.
_RDNA4_D256 = _bwd((16, 16, 8, 1), (16, 16, 8, 1), split=False, amd=True, kv_passes=2, reload=True, waves_per_eu=3,
                   reason=_STATIC + "; static check only (gfx1201, d=192 / 256, never run on RDNA4): dV pass "
                                    "152-236 VGPRs, dK pass 228-256, dQ 214-241 (benchmarks/results/run18/)")
_RDNA4_D256_OPTS = _bwd((16, 16, 16, 1), (16, 16, 16, 1), split=False, amd=True, kv_passes=2, reload=True,
                        waves_per_eu=2,
                        reason=_STATIC + "; static check only (gfx1201, d=192 / 256, never run on RDNA4): dV pass "
                                         "120-138 VGPRs, dK pass 205-238, dQ 192-256 (benchmarks/results/run18/); "
                                         "8 warps spilled 2 in the options dK pass")

# sm90, head dims 129-256: dK and dV in two launches (kv_passes=2), each holding one fp32 accumulator,
# so a program holds 128 KV rows (the one-launch row held 64 at 255 registers). d=256, b*s = 16384, h=8,
# s=4096 / 16384, causal and not, over the one-launch row (32x64 w8 s2 one loop):
# - H200 (benchmarks/results/run11/h200_sweep_bwd256_p2.txt, best of 10): plain 1.30-1.46x, ALiBi +
#   softcap 1.25-1.41x, window 1024 1.19-1.27x;
# - H100 (run11/h100_bwd256_g1.json, _g4.json): MHA over plain / ALiBi + softcap / window /
#   dropout 1.14-1.45x, GQA 4:1 1.05-1.51x (H200, options and dropout: 1.04-1.54x); the spill-free
#   16x128 w8 s3 tile 0.84-0.94x of it;
# - H200 at head dims 160 / 192 (run11/h200_bwd160.txt, _192.txt): 1.22-1.51x over plain / ALiBi + softcap.
# ptxas: the plain builds are spill-free; GQA builds with options, a window or dropout and the
# every-option dropout builds spill 4-10 registers (16-40 B; run11/check_sm90_d256_row.txt), 0 per the
# driver in the MHA builds timed: accepted on those measurements.
_D256_TWO_PASS_H100 = ("H100 / H200 sweeps, d=256 (benchmarks/results/run11/): 1.04-1.54x the one-launch 32x64 w8 "
                       "s2 row over plain / ALiBi + softcap / window / dropout, MHA and GQA 4:1, causal or not")
_D256_TWO_PASS = _bwd((32, 128, 8, 3), (32, 64, 4, 2), split=False, kv_passes=2, reason=_D256_TWO_PASS_H100,
                      spills_ok=_D256_TWO_PASS_H100 + "; GQA / dropout builds spill 4-10 registers (ptxas)")
# The dQ tile under it (session 26, H100 only, not checked on an H200; benchmarks/results/run23/): the dQ kernel took
# 45-51% of the backward's time (its launches ran at ~300 TFLOP/s, the dK and dV launches at ~540:
# h100_dv_pass_probe.txt). 128x32 w8 s2 (128 query rows over two warp groups) against the old 32x64 w4 s2 row and a
# first pick, 64x32 w4 s2 (one warp group; it spilled 8-22 registers per the driver), each timed in the same process
# as the table's row of the time (first and last; benchmarks/session26_dq256_sweep*.sh), TFLOP/s of the whole
# backward, d=256 h=8 16k tokens:
# - 128x32 w8 s2 over 64x32 w4 s2 (h100_dq256b_*.txt): plain 4k / 16k 300 / 312 against 264-267 / 259-260 not
#   causal, 264 / 312 against 240-243 / 278-291 causal (1.07-1.20x); ALiBi + softcap 1.08-1.14x, softcap 1.07-1.10x,
#   window 1024 1.08-1.09x, GQA 4:1 1.05-1.10x, d=192 1.06-1.08x; dropout 1.07x over the old 32x64 w4 s2 (which the
#   dropout tier had kept: 64x32 w4 measured 0.89-0.97x there). 128x16 w8 s3 0.91-1.00x of it, s2 0.81-0.88x;
# - 64x32 w4 s2 over 32x64 w4 s2 (h100_dq256_*.txt, and through the library's pick on a second instance,
#   h100_dq256_confirm.txt): 1.00-1.30x.
# Through the library's pick on another instance, the two older dQ tiles timed in turns with it twice
# (h100_dq256_confirm2.txt, s=4k / 16k): 1.19-1.40x the old row plain / ALiBi + softcap, 1.06-1.10x with dropout.
# Kernels table (h100_kernels_d256_final.md): 1.17-1.32x FA2, 0.75-0.87x cuDNN (before: 0.91-1.13x, 0.61-0.73x).
# ptxas (benchmarks/check_dq256_specs.py; run23/check_sm90_dq256*.txt): 0 spills in the plain, options, softcap, dropout
# and mask + dropout builds, 2-3 with a window, 16 with every option and dropout; 0 per the driver in every timed build.
_D256_DQ128_H100 = ("H100 only (benchmarks/results/run23/h100_dq256b_*.txt): dQ 128x32 w8 s2 1.05-1.20x the 64x32 w4 "
                    "s2 dQ (itself 1.00-1.30x the 32x64 w4 s2 dQ) over plain / options / softcap / window / GQA / "
                    "d=192, 1.07x the 32x64 dQ with dropout")
_D256_DQ128 = _D256_TWO_PASS.replace(
    dq=Tile(128, 32, 8, 2, reason=_D256_DQ128_H100,
            spills_ok=_D256_DQ128_H100 + "; ptxas spills 2-3 registers with a window, 16 with every option and "
                                         "dropout; 0 per the driver in the timed builds"),
    reason=_D256_DQ128_H100)

# The same row for causal calls below 16k keys, heavy-first (session 33, H100 and H200, not on AMD): dK/dV and dQ
# programs start block by block over groups of 8 heads, the heaviest blocks first (kernels/common.py heavy_first),
# against the grid's order, same process, rounds taking turns
# (benchmarks/bwd_order_ab.py; benchmarks/results/run30/h100_bwd_order_*.md): d=256 causal 2k / 4k 1.08-1.10x, GQA
# 16/4 4k 1.11-1.15x; at 16k 0.98-0.99x, so 16k keys and up keep the grid's order; H200 (run30/h200_bwd_order.md)
# 1.05-1.15x below 16k, 0.99x at 16k. At d=64 / 128 (the Triton kernels below 4k keys) it measured 0.99-1.00x: no
# change there. Dense calls only (launch/tiles.py heavy_first_order): packed varlen calls were not measured with it.
_D256_HEAVY_H100 = ("H100 and H200 (benchmarks/results/run30/h*_bwd_order*.md): heavy-first over groups of 8 heads "
                    "1.03-1.15x the grid's order, causal d=256 below 16k keys")
_D256_HEAVY = _D256_DQ128.replace(dkdv=_D256_DQ128.dkdv.replace(heavy_first=True),
                                  dq=_D256_DQ128.dq.replace(heavy_first=True), reason=_D256_HEAVY_H100)

# sm90, d=128, causal, plain tier (benchmarks/results/run12/: session15_bwd_sweep2.sh, H100 twice and H200, the
# table's row before / candidate / the row again, same process):
# - GQA (4 query heads per KV head, 32 heads, 16k tokens): 64x128 w8 s3 dK/dV over the MHA row's 64x128 w8 s2:
#   1k / 4k / 16k 1.12 / 1.11 / 1.15x and 1.13 / 1.06 / 1.11x on the H100, 1.15 / 1.14 / 1.15x on the H200 (not
#   causal: the MHA row stays, 0.96-1.03x); its GQA build spills (the driver: 32 registers in the timed bf16
#   build; ptxas offline, check-kernels: 49, 160 B); the other candidates measured 0.89-0.97x of it. GQA builds
#   only (Row.gqa).
# - MHA with fewer than 2048 keys: 32x64 w4 s3 dK/dV (spill-free at d=128; 1 register at d=96, ptxas) over the
#   64x128 w8 s2 row (24 spills), MHA
#   builds only (its GQA build spills 3 registers, and GQA calls take the row above):
#   s = 512 / 1k 1.11 / 1.06x (H100), 1.02-1.35 / 1.07x (H200, the row's own two timings differing at 512);
#   at 2k even (0.98-1.06x), so the longer row keeps 2k and up.
_SWEEP2 = "H100 / H200 sweeps, benchmarks/results/run12/*sweep2*"
_GQA_CAUSAL_128 = _bwd((64, 128, 8, 3), (128, 64, 8, 3), reason=_SWEEP2 + ": GQA causal 1.06-1.15x the MHA row",
                       spills_ok=_SWEEP2 + ": its GQA build spills (32 registers per the driver, 49 per ptxas); the "
                                           "other candidates 0.89-0.97x")
_SHORT_CAUSAL_128 = _bwd((32, 64, 4, 3), (128, 64, 8, 3),
                         reason=_SWEEP2 + ": MHA causal below 2048 keys 1.02-1.35x the 64x128 w8 s2 row",
                         spills_ok=_SWEEP2 + ": spill-free at d=128, where it measured 1.02-1.35x the row it "
                                             "replaced (that row spills 24 there); the d=96 build (padded to 128) "
                                             "spills 1 register per ptxas, not timed")

BWD_PLAIN: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _bwd((64, 64, 4, 3), (128, 64, 8, 3), reason=_BWD_H100, spills_ok=_SPILLS_PLAIN_128), causal=False),
        Row(64, _bwd((64, 64, 4, 3), (64, 64, 4, 3), reason=_BWD_H100, spills_ok=_SPILLS_PLAIN_128), causal=True),
        Row(128, _bwd((64, 128, 8, 3), (128, 64, 8, 3), reason=_BWD_H100, spills_ok=_SPILLS_PLAIN_128),
            causal=False),
        Row(128, _GQA_CAUSAL_128, causal=True, gqa=True),
        Row(128, _bwd((64, 128, 8, 2), (128, 64, 8, 3), reason=_BWD_H100, spills_ok=_SPILLS_PLAIN_128),
            causal=True, min_seqlen_k=2048),
        Row(128, _SHORT_CAUSAL_128, causal=True, gqa=False),
        Row(256, _D256_DQ128, causal=True, min_seqlen_k=16384),
        Row(256, _D256_HEAVY, causal=True),
        Row(256, _D256_DQ128),
        Row(512, _D512_BWD_NV),
    ],
    "sm80": [  # spill-free per ptxas, not timed (no A100 here)
        Row(64, _bwd((32, 64, 4, 2), (128, 64, 8, 2))),
        Row(128, _bwd((32, 64, 8, 2), (64, 64, 8, 2))),
        Row(256, _bwd((32, 64, 8, 1), (64, 32, 8, 1))),
        Row(512, _D512_BWD_NV),
    ],
    "gfx942": [
        Row(64, _bwd((64, 64, 4, 1), (64, 64, 4, 1), amd=True)),
        Row(128, _bwd((32, 64, 4, 1), (64, 32, 4, 1), amd=True)),
        Row(256, _bwd((16, 32, 4, 1), (32, 32, 4, 1), amd=True)),
        Row(512, _D512_BWD_CDNA3),
    ],
    "gfx90a": [
        Row(64, _bwd((64, 64, 4, 1), (64, 64, 4, 1), amd=True)),
        Row(128, _bwd((32, 64, 4, 1), (64, 32, 4, 1), amd=True)),
        Row(256, _bwd((16, 32, 4, 1), (32, 32, 4, 1), amd=True)),
        Row(512, _D512_BWD_CDNA2),
    ],
    # RDNA3 (wave32, 256 VGPRs a lane): WMMA operands are replicated across the two half-waves,
    # so a dK/dV program holding K, V, dK, dV for even 16 KV rows needs more than 256 VGPRs
    # above head dim 64 (check-amd: 68-272 spilled at d=128 with 16x16 tiles, 2-16 warps, chunks of
    # 32 / 64, 2 stages): there dK and dV run as two launches and K / V (dQ: Q / dO) are read per
    # block (_RDNA3_D128).
    "gfx1100": [
        Row(64, _bwd((16, 16, 4, 1), (32, 32, 4, 1), amd=True)),
        Row(128, _RDNA3_D128),
        Row(256, _RDNA3_D256),
    ],
    INTERPRETER: [
        Row(256, _bwd((16, 32, 4, 1), (32, 16, 4, 1),
                      reason="interpreter: small unequal tiles so tests cross block edges")),
        Row(512, _bwd((16, 32, 4, 1), (32, 16, 4, 1), chunks=(64, 128),
                      reason="interpreter: head-dim chunks, a partial last V chunk at 320 / 448")),
    ],
}


# RDNA4 (gfx12): a family with a table of its own no longer falls back to gfx1100 (tiles.family_table), so each
# gfx12 table repeats the gfx1100 rows of its tier up to d=128 and adds its own d=256 row (not gfx1100's).
BWD_PLAIN["gfx12"] = [*upto(BWD_PLAIN["gfx1100"], 128), Row(256, _RDNA4_D256)]
# Window, ALiBi or softcap on (check-amd "opts"); an arch without a row uses its main table.
BWD_OPTIONS: dict[str, list[Row]] = {
    "sm90": [  # ALiBi + softcap (and dropout), benchmarks/results/tiles_h200.md
        Row(64, _bwd((32, 64, 4, 3), (128, 64, 8, 3), reason="spill-free, 0.92-1.0x the main row (tiles_h200.md)")),
        Row(128, _bwd((32, 64, 4, 2), (128, 64, 8, 3), reason="0.95-1.0x the main row, fewer spills (tiles_h200.md)",
                      spills_ok=_SPILLS_OPTS_128)),
        Row(256, _D256_DQ128, causal=True, min_seqlen_k=16384),
        Row(256, _D256_HEAVY, causal=True),
        Row(256, _D256_DQ128),
        Row(512, _D512_BWD_NV),
    ],
    # RDNA3: the main 16x16 dK/dV spilled 36-57 VGPRs with every option; one loop fits (238-255)
    "gfx1100": [
        Row(64, _bwd((16, 16, 4, 1), (32, 16, 4, 1), split=False, amd=True)),
        Row(128, _RDNA3_D128),
        Row(256, _RDNA3_D256_OPTS),
    ],
    "sm80": [  # spill-free per ptxas in MHA and GQA builds (not timed)
        Row(64, _bwd((16, 64, 4, 2), (128, 64, 8, 2), split=False)),
        Row(128, _bwd((32, 64, 8, 2), (64, 64, 8, 2))),
        # delta from the preprocess kernel: with it computed in the dQ kernel the every-option dropout
        # builds at d=192 / 256 spilled 4 registers (check-kernels, session 15)
        Row(256, _bwd((16, 32, 8, 1), (64, 32, 8, 1), split=False, delta_in_dq=False)),
        Row(512, _D512_BWD_NV),
    ],
}
# gfx12: the options tier (and the window and float-bias / bool-mask tiers, which fall back to it) at d=256 with
# 16 warps; dropout (gfx1100: the options rows) with the 8-warp row
BWD_OPTIONS["gfx12"] = [*upto(BWD_OPTIONS["gfx1100"], 128), Row(256, _RDNA4_D256_OPTS)]
# sm90 d<=64 with dropout: dQ by fp32 atomics inside the dK/dV kernel (one Philox evaluation per score in
# the backward, not two; not bitwise reproducible, so ``deterministic=True`` calls keep the two-kernel
# path with the same dK/dV tile and the options row's dQ tile). H100, d=64 h=12 8192 tokens, graph-timed
# (benchmarks/results/h100_run5/bwd_atomic.txt): dropout 0.1 s=128/512/1024 72.2 / 137.1 / 157.2 TFLOP/s
# against 60.6 / 99.6 / 112.6 for the options row (1.19-1.40x).
_DROP_ATOMIC_H100 = ("H100, dropout 0.1, d=64 h=12 s=128-1024 (benchmarks/results/h100_run5/bwd_atomic.txt): "
                     "1.19-1.40x the options row; dQ atomic only when deterministic=False")
BWD_DROPOUT: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _bwd((16, 64, 4, 3), (128, 64, 8, 3), dq_atomic=True, reason=_DROP_ATOMIC_H100)),
        *BWD_OPTIONS["sm90"][1:],
    ],
    # A100, dropout without ALiBi / softcap (the four-row mask per element, check-amd "drop"): the options
    # rows' dQ 128x64 w8 s2 spilled at d<=64 and dK/dV 32x64 w8 s2 at d=96 (static check only)
    "sm80": [
        Row(64, _bwd((16, 64, 4, 2), (64, 64, 8, 2), split=False)),
        Row(128, _bwd((16, 64, 8, 2), (64, 64, 8, 2))),
        *BWD_OPTIONS["sm80"][2:],
    ],
    # MI200: the main dK/dV rows spilled with dropout at d <= 128; one loop fits (216-457 VGPRs)
    "gfx90a": [
        Row(64, _bwd((64, 64, 4, 1), (64, 64, 4, 1), split=False, amd=True)),
        Row(128, _bwd((16, 64, 4, 1), (64, 32, 4, 1), split=False, amd=True)),
        Row(256, _bwd((16, 32, 4, 1), (32, 32, 4, 1), amd=True)),
        Row(512, _D512_BWD_CDNA2),
    ],
}
BWD_DROPOUT["gfx12"] = [*upto(BWD_OPTIONS["gfx1100"], 128), Row(256, _RDNA4_D256)]
# An attn_bias (check-amd "bias", "bias-bcast", "mask"): rows where the options rows spilled with
# the bias tile (ptxas; not timed). sm90 d=128/256: the options rows keep spills measured for
# ALiBi + softcap, which do not cover a bias (13-17 / 75 registers with it): spill-free tiles here.
_BIAS_STATIC = "spill-free with an attn_bias by static check only (check-amd), not timed"
_BIAS_H100 = ("H100 sweep, (b, h, s, s) bf16 bias, b=4 s=4096 h=16 d=128 (benchmarks/results/h100_run2/"
              "tiles_bias.txt): 310 TFLOP/s (dbias 256) against 137 (119) for the spill-free 32x64 w8 s2 + "
              "128x32 w8 s3 row and 136-278 for 7 others, 0 spills per the driver there; the causal builds "
              "spill 6-12 registers (ptxas): accepted on this measurement")
# d=129..256, session 27 (H100 only, not checked on an H200; benchmarks/results/run24/): the two-pass scheme of the
# plain d=256 row (_D256_DQ128) with 2 stages in the dK/dV launches (3 need 234 KB of shared memory with the bias
# tile), against the one-launch row it replaces (32x64 w8 s2 + 32x64 w8 s2, chosen in h100_run2/tiles_bias256*.txt),
# the table's row timed first and last in the same process (h100_bias256_sweep*.txt, TFLOP/s of the whole backward,
# h=8 at d=256, 10 at d=192, 16k tokens): d=256 (b, h, s, s) bias 116 -> 198-204 not causal, 108-116 -> 164-192
# causal; with dbias 112-113 -> 175-180 / 90-92 -> 144-164; a (b, 1, 1, s) bool key mask 114-150 -> 211-245 / 135-143
# -> 214-234 (1.51-1.85x); d=192 (4k) bias 1.60-1.71x, key mask 1.47-1.69x. Other candidates (h100_bias256_sweep.txt):
# dQ 32x64 w8 s2 1.08-1.31x, dK/dV 16x128 w8 s3 1.15-1.43x, dQ 64x32 w4 s2 0.87-0.92x of it (it spilled 8-22 per the
# driver); dQ 128x32 w8 s3 and 128x64 w8 s2 run out of shared memory with a float bias (s3 measured 1.04-1.09x with
# the bool mask alone). ptxas (benchmarks/check_bias256_specs.py, run24/check_sm90_bias256.txt): spill-free except the
# dQ kernel of a broadcast bias requiring grad (dbias summed by atomics: 2-5 registers) and the bool mask's GQA dK
# pass at d=192 (5); 0 per the driver in the timed builds.
_BIAS256_H100 = ("H100 sweeps, d=256 / 192, (b, h, s, s) bias with and without dbias, (b, 1, 1, s) bool key mask "
                 "(benchmarks/results/run24/h100_bias256_sweep*.txt): 1.47-1.85x the one-launch 32x64 w8 s2 row")
_BIAS256 = _bwd((32, 128, 8, 2), (128, 32, 8, 2), split=False, kv_passes=2, reason=_BIAS256_H100,
                spills_ok=_BIAS256_H100 + "; ptxas spills 2-5 registers in the broadcast-dbias dQ builds (atomics) "
                                          "and 5 in the bool mask's d=192 GQA dK pass; 0 per the driver when timed")
# A bool padding mask (b, 1, 1, s) at d<=64 (Row.key_mask: the HF integration's padded batches without dropout),
# session 27 (H100 only; benchmarks/results/run24/h100_mask64_bwd.txt, the row of the time timed first and last in the
# same process, h=32, 16k tokens, s=512 / 2048): the key mask + dropout row's tiles, 16x64 w4 s3 + 64x32 w4 s3 (two
# kernels), over the options row (32x64 w4 s3 + 128x64 w8 s3) 1.09 / 1.23x causal, 1.20 / 1.11x not causal; with a
# float bias 0.86-1.18x, so the float bias keeps the options row. 64x64 w4 s3 / 64x128 w8 s3 dK/dV under the row's
# dQ: 0.91-1.10x. Spill-free (ptxas, run24/check_sm90_mask64.txt; the driver: 0). Through the library's pick on
# another instance (h100_keymask_confirm.txt): 1.12-1.26x; Llama-style training (b=4 s=2048 padded, d=64) 1.001x.
_KMASK64_BWD_H100 = ("H100 sweep, (b, 1, 1, s) bool key mask, d=64 (benchmarks/results/run24/h100_mask64_bwd.txt): "
                     "1.09-1.23x the options row; spill-free")
BWD_BIAS: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _bwd((16, 64, 4, 3), (64, 32, 4, 3), reason=_KMASK64_BWD_H100), key_mask=True),
        BWD_OPTIONS["sm90"][0],
        Row(128, _bwd((32, 64, 4, 3), (128, 64, 8, 3), reason=_BIAS_H100, spills_ok=_BIAS_H100)),
        Row(256, _BIAS256),
    ],
    "sm80": [  # the options row's dQ 128x64 w8 s2 spilled 100+ registers with the bias at d<=64
        Row(64, _bwd((16, 64, 4, 2), (64, 32, 4, 2), split=False, reason=_BIAS_STATIC)),
        *BWD_OPTIONS["sm80"][1:],
    ],
}
# An attn_bias with dropout (check-amd "bias-all": every option, dropout, bias and dbias).
# sm90 d<=64: H100 sweeps, BERT-base's calls through the HF integration (a (b, 1, 1, s) bool key mask,
# dropout 0.1, h=12, 8192 tokens, s=128/512/1024, graph-timed; benchmarks/results/h100_run3/
# tiles_kmask_bwd.txt, tiles_kmask_bwd2.txt): 16x64 w4 s3 + 64x32 w4 s3 64 / 95 / 102 TFLOP/s against
# 40 / 57 / 61 for the static row (32x64 w8 s3 + 128x32 w8 s3), best of 12; spill-free by ptxas with
# every option on, causal or not (the 32x64 w4 dK/dV rows measured 1-2% slower spill 1-7 there).
# H200 (tiles_kmask_h200.txt): 1.67-1.69x the static row, causal 1.65-1.67x.
_KMASK_H100 = ("H100 sweeps, (b, 1, 1, s) key mask + dropout 0.1, d=64 h=12 s=128-1024 (benchmarks/results/"
               "h100_run3/tiles_kmask_bwd2.txt): 1.63-1.68x the static row, H200 1.65-1.69x; spill-free by ptxas; "
               "dQ by atomics (deterministic=False; h100_run5/bwd_atomic.txt): 0.96 / 1.15 / 1.21x the two-kernel "
               "path at s=128 / 512 / 1024")
_MASK_DROP_SM80 = ("the bool mask + dropout dK/dV builds at d=96 / 128 (MHA) spill 1 register (ptxas, 8 B of "
                   "local memory), with or without KEY_MASK: found when check-amd first compiled that build "
                   "(mask-drop), which served such calls before unchecked; accepted until an sm80 sweep")
# Below 256 keys the two-kernel path (dQ kernel with delta, then dK/dV: two launches, no fp32 dQ buffer, no
# scale-and-cast op) with the same tiles: H100, BERT-base's call (b=32 s=128, key mask + dropout 0.1), same
# process taking turns (benchmarks/results/run17/h100_bert_dq_path_ab.txt): GPU 103.6 against 106.7 us, wall
# per forward + backward of a back-to-back loop 397.5 against 464.8 us; from 256 keys the atomic row's GPU
# time is lower (240 / 314 / 579 against 256 / 354 / 677 us at s = 256 / 512 / 1024).
_KMASK_SHORT_H100 = ("H100, key mask + dropout 0.1, d=64 h=12 b=32 s=128 (benchmarks/results/run17/"
                     "h100_bert_dq_path_ab.txt): two kernels 103.6 us GPU / 397.5 us wall against 106.7 / 464.8 "
                     "for the atomic dQ; tiles of the atomic row (spill-free by ptxas)")
# d=65..128 and 129..256, session 27 (H100 only, not checked on an H200): a (b, 1, 1, s) bool key mask with dropout
# 0.1 (the Hugging Face integration's padded training call), 16k tokens, s=1k / 4k, the static rows (d=128: 16x64 w8
# s2 + 128x32 w8 s3; d=256: 16x32 w8 s2 one launch + 16x32 w4 s2) timed first and last in the same process
# (benchmarks/results/run24/h100_bwd_kmaskdrop.txt, TFLOP/s of the whole backward):
# - d=128 (h=16): the d=64 row's tiles, 16x64 w4 s3 + 64x32 w4 s3: 234 / 218 against 111-112 / 107-108 not causal,
#   161 / 178 against 84-85 / 93 causal (1.91-2.10x); dQ 128x64 w8 s3 under the static dK/dV 0.98-1.02x, dQ by
#   atomics 0.91-0.93x. Its dK/dV kernel spills: 6-10 registers per the driver in the timed builds, ptxas 3-5 (MHA)
#   and 4-18 (GQA) with the mask and dropout, 10-17 with a float bias and dropout (run24/check_sm90_static_rows.txt):
#   accepted on this measurement;
# - d=256 (h=8): the two-pass scheme (dV, then dK; one loop, 16x128 w8 s3) + dQ 128x32 w8 s2: 183 / 174 against
#   72-73 / 65 not causal, 114 / 135 against 56-57 / 58 causal (2.02-2.67x); 16x128 w8 s2 2.16-2.26x not causal,
#   16x64 w8 s2 1.1x. 0 spills per the driver; ptxas: spill-free with the mask and dropout, 1-2 (dQ) with a float
#   bias, dropout and a window, 4-5 (dK pass) and 14-26 (dQ) with every option, a bias and dropout.
# With a (b, h, s, s) float bias and dropout 0.1 at 4k (run24/h100_biasdrop_rows.txt, another instance, in turns
# twice): d=128 2.27-2.31x (the driver: dK/dV 2-6 spills), d=256 2.18-2.46x (0) the static rows.
_KMASK_DROP_BWD = ("H100 sweep, (b, 1, 1, s) key mask + dropout 0.1 (benchmarks/results/run24/h100_bwd_kmaskdrop.txt): "
                   "{} the static row")
_KMASK_DROP_128 = _bwd((16, 64, 4, 3), (64, 32, 4, 3), reason=_KMASK_DROP_BWD.format("d=128 1.91-2.10x"),
                       spills_ok=_KMASK_DROP_BWD.format("d=128 1.91-2.10x") + "; the dK/dV kernel spills 6-10 "
                                                                              "registers per the driver (ptxas 3-18)")
_KMASK_DROP_256 = _bwd((16, 128, 8, 3), (128, 32, 8, 2), split=False, kv_passes=2,
                       reason=_KMASK_DROP_BWD.format("d=256 2.02-2.67x"),
                       spills_ok=_KMASK_DROP_BWD.format("d=256 2.02-2.67x") + "; 0 spills per the driver; ptxas 1-26 "
                                                                              "with a float bias and dropout")
BWD_BIAS_DROPOUT: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _bwd((16, 64, 4, 3), (64, 32, 4, 3), dq_atomic=True, reason=_KMASK_H100), min_seqlen_k=256),
        Row(64, _bwd((16, 64, 4, 3), (64, 32, 4, 3), reason=_KMASK_SHORT_H100)),
        Row(128, _KMASK_DROP_128),
        Row(256, _KMASK_DROP_256),
    ],
    "sm80": [
        Row(64, _bwd((16, 64, 4, 2), (32, 64, 4, 2), split=False, reason=_BIAS_STATIC)),
        Row(128, _bwd((16, 64, 8, 2), (32, 64, 8, 2), split=False, reason=_BIAS_STATIC, spills_ok=_MASK_DROP_SM80)),
        # dQ 32x32 w8 s1 spilled 1 register at d=192 ("bias-drop")
        Row(256, _bwd((16, 32, 8, 1), (16, 32, 8, 1), split=False, reason=_BIAS_STATIC)),
    ],
    # MI200 d<=64: the dropout row's 64x64 one-loop dK/dV used 20 B of scratch in the GQA build
    "gfx90a": [
        Row(64, _bwd((32, 64, 4, 1), (64, 64, 4, 1), split=False, amd=True, reason=_BIAS_STATIC)),
        *BWD_DROPOUT["gfx90a"][1:],
    ],
    # RDNA3: the options row's 16x16 w4 dK/dV spilled 5-11 VGPRs; with 8 warps: 221-245 VGPRs
    "gfx1100": [
        Row(64, _bwd((16, 16, 8, 1), (32, 16, 4, 1), split=False, amd=True, reason=_BIAS_STATIC)),
        Row(128, _RDNA3_D128),
        Row(256, _RDNA3_D256_OPTS),
    ],
}
BWD_BIAS_DROPOUT["gfx12"] = [*upto(BWD_BIAS_DROPOUT["gfx1100"], 128), Row(256, _RDNA4_D256)]
# A sliding window alone (tiles.py WINDOW). H100, causal + window 1024, d=128 (benchmarks/results/run9/
# h100_sweep_win_bwd_g*.txt): dK/dV 32x64 w4 s3 was the fastest of 6 for MHA and GQA 32/8 alike.
_WINDOW_BWD_H100 = ("H100, causal + window 1024, d=128, s=4096 / 16384 (benchmarks/results/run9/"
                    "h100_sweep_win_bwd_g1.txt, _g4.txt): 310 / 304 TFLOP/s MHA and 289 / 292 GQA 32/8 "
                    "against 297 / 285 and 247 / 250 for the options row, best of 6; H200 303 / 318 and "
                    "295 / 293 against 285 / 289 and 248 / 249 (h200_win_bwd_g*.txt)")
_WINDOW_BWD_SPILLS = ("the d=96 / 128 dK/dV builds spill 11-13 registers per ptxas (the options row it replaces: "
                      "15 in MHA), 0 (MHA) and 4 (GQA) per the H100 driver: accepted on the measurement of "
                      + _WINDOW_BWD_H100)
# The d=128 row's dQ tile (session 25, H100 only; benchmarks/results/run22/h100_win_bwd128.txt, _w128.txt): 64x32 w4
# s3 (spill-free; the options row's 128x64 w8 s3 spills 8 there) under the same dK/dV tile, the old row timed first
# and last in one run: window 128 107 / 107 MHA and 120 / 119 GQA 4:1 against 91-92 and 99-102 (1.16-1.21x); 1024
# 296 / 289 MHA and 277 / 270 GQA against 288-308 and 268-287 (0.94-1.03x, inside the 10% rule). Through the
# library's pick on another instance (run22/h100c_win_confirm2.txt), the old row timed twice in between: window
# 1024 0.97-1.01x; window 128 0.62-1.09x, the old row's own readings there spreading 47-90 (calls of ~0.1-0.2 ms,
# host-bound under do_bench). Timed as CUDA graph replays (run22/h100d_win_graph.txt, a third instance; spreads
# under 1%): window 128 108 / 109 MHA and 122 / 122 GQA 4:1 against 92 and 100-103 (1.17-1.22x).
_WINDOW128_DQ = (_WINDOW_BWD_H100 + "; dQ 64x32 w4 s3, spill-free (session 25, H100: benchmarks/results/run22/"
                 "h100_win_bwd128*.txt, h100c_win_confirm2.txt, h100d_win_graph.txt): window 1024 0.94-1.03x the "
                 "128x64 w8 s3 dQ (which spills 8), window 128 1.17-1.22x (graph-timed)")
# d <= 64, causal + window, H100 only (not checked on an H200; benchmarks/results/run22/h100_win64_bwd.txt and
# h100_win_bwd64.txt, session 25): the options row (32x64 w4 s3 + dQ 128x64 w8 s3) timed first and last in the
# same process, 16k tokens, 32 query heads, s=4096 / 16384, bf16; TFLOP/s of the visible pairs:
# - MHA, dQ 64x64 w4 s3 under the same dK/dV tile (spill-free): window 1024 258 / 268 and 279 / 268 (two runs)
#   against 236-240 (1.08-1.16x), window 128 95 / 83 against 52-73 (1.29-1.60x); within 6% of the best of 7
#   candidates on each MHA row;
# - GQA, dQ 64x64 w4 s2 under the same dK/dV tile (spill-free): 4:1 with window 1024 262 / 257 against 226-231
#   (1.12-1.16x), 8:1 with window 128 (GPT-OSS's layers) 114 / 114 against 84 (1.35-1.36x); within 6% of the best
#   candidate on each GQA row (dK/dV 64x64 w4 s3 + dQ 64x32 w4 s3: 269-272 and 116, but its GQA dK/dV build
#   spills 10-11 registers per ptxas: check-amd on that candidate row, whose output was not kept). On MHA rows this tile
#   measured 80 / 71 at window 128 (0.81-0.85x the best), hence two rows.
# The plain causal call's row in the same runs: 339 / 356 (MHA), 326 / 347 (4:1), 301 / 339 (8:1).
# Through the library's pick, the options row timed twice in between (run22/h100_win64_confirm.txt): window 1024
# MHA 269-272 against 236-241 (1.12-1.15x), 4:1 258-266 against 228-231 (1.12-1.16x); window 128 8:1 98-117
# against 84 (1.17-1.39x); window 128 MHA 56-66 against 60-73, where the options row's own readings spread over
# 52-73 across the runs (host-bound calls). Timed as CUDA graph replays (run22/h100d_win_graph.txt, spreads under
# 1%), window 128: MHA 94-96 against 75 (1.26-1.28x), 8:1 115-118 against 86 (1.34-1.37x).
_WINDOW64_H100 = "H100 only, causal + window 1024 / 128, d=64 (benchmarks/results/run22/h100_win64_bwd.txt): "
_WINDOW64_MHA = _bwd((32, 64, 4, 3), (64, 64, 4, 3),
                     reason=_WINDOW64_H100 + "MHA 1.08-1.16x the options row at window 1024, 1.26-1.28x at 128")
_WINDOW64_GQA = _bwd((32, 64, 4, 3), (64, 64, 4, 2), reason=_WINDOW64_H100 + "GQA 4:1 / 8:1 1.12-1.39x the options row")
BWD_WINDOW: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _WINDOW64_MHA, causal=True, gqa=False),
        Row(64, _WINDOW64_GQA, causal=True, gqa=True),
        BWD_OPTIONS["sm90"][0],
        Row(128, _bwd((32, 64, 4, 3), (64, 32, 4, 3), reason=_WINDOW128_DQ, spills_ok=_WINDOW_BWD_SPILLS),
            causal=True),
        *BWD_OPTIONS["sm90"][1:],
    ],
}

# Softcap alone (tiles.py SOFTCAP: no window, ALiBi, sinks, dropout or bias), dense calls. H100, softcap 30, bf16,
# 16k tokens, hidden 2048, MHA and GQA 4:1, causal and not, s=4096 / 16384 (benchmarks/results/run19/
# h100_softcap_bwd_sweep.txt: 6-7 candidates against the options row, which was chosen for ALiBi + softcap and
# was timed first and last):
# - d=64, dK/dV and dQ 64x64 w4 s3 (the plain causal row): 1.07-1.19x not causal, 1.10-1.13x causal GQA; causal
#   MHA keeps the spill-free options row (this tile 1.02x there, inside the 10% rule);
# - d=128 not causal, dK/dV 64x128 w8 s3 (the plain row): 1.08-1.17x;
# - d=128 causal GQA, dK/dV 32x64 w4 s3 (the window row): 1.12-1.22x (2k-16k, run19/h100_pass2_*); causal MHA keeps
#   the options row (16 candidates over two sweeps, none ahead: run19/h100_pass3_*).
# A second H100 instance (run19/h100b_*.txt): 1.03-1.21x, except one 16k reading of d=64 not causal at 0.90-0.91x,
# which a recheck alternating old / new twice put at 1.02-1.10x (4k-16k).
# ptxas (check-kernels, run19/check_sm90_softcap_bwd.txt) spills 1-14 registers in these builds where the driver's
# timed bf16 builds reported 0-2 (the sweep's regs/spills column): accepted on the measurement. Packed varlen calls
# keep the options rows (not measured with these tiles).
_SOFTCAP_BWD_H100 = "H100 sweep, softcap 30 alone (benchmarks/results/run19/h100_softcap_bwd_sweep.txt)"
_SOFTCAP_BWD_SPILLS = (_SOFTCAP_BWD_H100 + ": ptxas spills 1-14 registers, the driver's timed builds 0-2; "
                       "1.07-1.22x the spill-free options row")
_SOFTCAP_64 = _bwd((64, 64, 4, 3), (64, 64, 4, 3), reason=_SOFTCAP_BWD_H100 + ": 1.07-1.19x the options row",
                   spills_ok=_SOFTCAP_BWD_SPILLS)
BWD_SOFTCAP: dict[str, list[Row]] = {
    "sm90": [
        Row(64, _SOFTCAP_64, causal=False, varlen=False),
        Row(64, _SOFTCAP_64, causal=True, gqa=True, varlen=False),
        Row(128, _bwd((64, 128, 8, 3), (128, 64, 8, 3), reason=_SOFTCAP_BWD_H100 + ": 1.08-1.17x, not causal",
                      spills_ok=_SOFTCAP_BWD_SPILLS), causal=False, varlen=False),
        Row(128, _bwd((32, 64, 4, 3), (128, 64, 8, 3), reason=_SOFTCAP_BWD_H100 + ": 1.12-1.22x, causal GQA",
                      spills_ok=_SOFTCAP_BWD_SPILLS), causal=True, gqa=True, varlen=False),
        *BWD_OPTIONS["sm90"],
    ],
}

BWD = (BWD_PLAIN, BWD_OPTIONS, BWD_DROPOUT, BWD_BIAS, BWD_BIAS_DROPOUT, BWD_WINDOW, BWD_SOFTCAP)

# The warp-specialised dK/dV kernel (kernels/bwd_ws.py: dense calls without a mask or any option, keyed by
# the arch itself; a row serves exactly its head dim). The tile: block_m query rows per step of the loop,
# block_n KV rows per program (two consumer warp groups of 64). Chosen by session 18's probe on an H100
# (benchmarks/results/run15/h100_bwd_fused_probe.txt, the rows labelled "dq tma-reduce" with a ws tile:
# the probe's dK/dV-only mode): 64x128 w4 s2 over 64x64 (1.9x slower); 168 registers, 0 spills. In the
# library, same process, on / off (run15/h100_ws_ab.md, H100, bf16, d=128, not causal, TFLOP/s of the
# whole backward): 16 heads 1k / 4k / 16k 349 / 434 / 474 against 344 / 411 / 416 (1.02 / 1.06 / 1.14x),
# b=4 s=4096 32 heads 437 against 409 (1.07x), GQA 32/8 465 against 408 (1.14x; cuDNN 502). Not run on an H200.
_WS_BWD_H100 = ("H100, d=128, not causal, whole backward on / off (benchmarks/results/run15/h100_ws_ab.md): "
                "1.02 / 1.06 / 1.14x at 1k / 4k / 16k, 1.07x b=4 s=4096 h=32, 1.14x GQA 32/8; H200 "
                "(run16/h200_ws_ab.md): 1.06-1.13x from 2k keys, 1.00x at 1k")
WS_BWD_ROW = Row(128, Tile(64, 128, 4, 2, reason=_WS_BWD_H100), causal=False)
# Not served since session 30: on an H100 the kernel left NaN in dk and dv in 3 of 15 backward calls of one process
# (b=4 s=4096 h=16 d=128, not causal; dq, from the dQ kernel, finite), and the same call's on / off benchmark in
# another process had NaN there too; 0 of 30 in a third process, and the main dK/dV kernel 0 of 30
# (benchmarks/check_gluon_bwd_finite.py, results/run27/h100_bwd_finite_*.md). Not understood (the kernel makes its
# TMA descriptors on the device, in per-launch scratch). The Gluon kernel with dQ serves these calls from 4k keys
# (BWD_GLUON_DQ), the main kernel below; tests/test_bwd_ws.py still runs this one with WS_BWD_ROW.
BWD_WS: dict[str, list[Row]] = {"sm90": []}

# The Gluon dK/dV kernel (kernels/bwd_gluon.py, sm90): one row per exact head dim; block_n 128 key rows (two
# consumer warp groups of 64), block_m the query rows of one step, num_warps 4 (the first consumer; the second and
# the producer warp are added by the kernel), num_stages the Q / dO ring's depth. H100, b*s = 16384, hidden 2048,
# the backward alone with the kernel on and off in one process (off: the warp-specialised or main dK/dV kernel; the
# dQ kernel is the same; benchmarks/bench_gluon_bwd_ab.py, benchmarks/results/run26/h100_gluon_bwd_*.md):
# - d=128 causal, 64x128 two slots: 1.00 / 1.05-1.06 / 1.02-1.03x at 1k / 4k / 16k, GQA 32/8 4k 1.04-1.06x (two
#   runs); three slots 1.00-1.05x, 32 query rows a step 0.88-0.96x;
# - d=128 not causal: 0.94-1.02x against the warp-specialised kernel (no row);
# - d=64: 0.77-0.95x with 128 query rows a step (it spills), 0.94-0.99x with 64 (no row).
# ptxas (check-kernels --kernel bwd_gluon): the products stay asynchronous; the causal build spills 120 B of scalars,
# 3-11 local loads / stores a step in the second consumer's loops (none in the first's), measured as above.
# The causal rows (here and in BWD_GLUON_DQ) serve causal calls with a left window bound too, where
# launch/bwd_gluon.py WINDOW_MIN says (session 36, run33: d=128 from 1024 keys of window, 512 in groups of 4+).
_BWD_GLUON_128 = ("H100 (run26/h100_gluon_bwd_ab.md, _tiles.md): d=128 causal 1.03-1.06x the warp-specialised / main "
                  "dK/dV kernel from 4k keys (1.00x at 1k), GQA 32/8 1.04-1.06x")
# use_tma (the LSE / delta through TMA, launch/bwd_gluon.py ROWS_TMA): the d=128 rows, measured with dQ from 4k keys
# (run32/h100_rows_tma_2_*.md, _3_*.md: 1.02-1.13x); the dK/dV-only row at 2k causal 1.01x in call A's first A/B (with
# a second switch since removed, run32/h100_rows_tma_1_d128_gpu0.md), 120 -> 32 B of local memory
_ROWS_TMA_128 = "; LSE / delta through TMA: run32 (d=128 with dQ 1.02-1.13x, this row at 2k 1.01x)"
# Softcap calls take these rows and BWD_GLUON_DQ's too (launch/bwd_gluon.py SOFTCAP, session 42): H100, the whole
# backward 1.13-1.39x the softcap tier (run39/h100_e_softcap_ab.md, h100_f_softcap_ab.md). Their builds keep more in
# local memory (run39/check_sm90_bwd_gluon_softcap.txt), measured with it.
_SOFTCAP_SPILLS = "; softcap builds (SOFTCAP) {}, measured 1.13-1.39x the softcap tier (run39)"
BWD_GLUON: dict[str, list[Row]] = {
    "sm90": [
        Row(128, Tile(64, 128, 4, 2, use_tma=True, reason=_BWD_GLUON_128 + _ROWS_TMA_128,
                      spills_ok=_BWD_GLUON_128 + "; ptxas spills 120 B of scalars (3-11 local accesses a step in "
                                                 "the second consumer's loops), 32 B with the LSE / delta through "
                                                 "TMA (run32)" + _SOFTCAP_SPILLS.format("120-336 B")),
            causal=True, min_seqlen_k=2048),
    ],
}

# The same kernel computing dQ too (launch/bwd_gluon.py; a BWD_GLUON_DQ row comes before a BWD_GLUON one; not for
# deterministic calls): 5 matrix products a (query block, key block) pair instead of the 7 of the dK/dV + dQ
# kernels, dQ summed by TMA reduce-adds into an fp32 accumulator that the preprocess kernel zeroes (its extra
# traffic is why short calls lose). H100, the whole backward, same process (benchmarks/bench_gluon_bwd_ab.py;
# results/run27/h100_gluon_dq_ab_2.md, _3.md: against the dK/dV-only Gluon row, the warp-specialised or main
# dK/dV kernel, and the dQ kernel; _4.md, the committed rows against the main dK/dV kernel and the dQ kernel):
#   d=128 not causal 0.98-0.99x at 1k, 1.01-1.06x at 4k, 1.08-1.14x at 16k, GQA 32/8 at 4k 1.00-1.20x;
#   d=128 causal 0.91-0.92x at 1k, 1.09-1.11x at 4k, 1.09-1.18x at 16k, GQA 32/8 1.08-1.09x;
#   d=64 causal 0.86-0.87x at 1k, 1.02x at 4k, 1.06-1.13x at 16k; d=64 not causal 0.84x at 1k, 0.97-0.99x at
#   4k, and at 16k 1.06-1.08x in two runs but 0.95x in the third: no row.
# On an H200 (session 37, the committed rows against the Triton kernels, run34/h200_bwd_d128_rows_window.md,
# h200_bwd_d64_m128_*.md): d=128 1.16-1.22x, d=64 not causal 1.08-1.14x, causal 1.05-1.14x. Since session 35 the kernel
# takes each block's LSE / delta through TMA at d=128 (launch/bwd_gluon.py ROWS_TMA; 1.02-1.13x,
# run32/h100_rows_tma_2_*.md, _3_*.md): its builds keep 72-120 B of scalars in local memory (d=128, with dQ) and 32 B
# (without), the loads' builds 216-272 / 120 B.
_DQ_H100 = "H100 (run27/h100_gluon_dq_ab_2.md - _4.md): the whole backward against the other kernels, "
# d=64: 128 query rows a step (FA3's d=64 tile) with the LSE / delta through TMA, which frees the registers the loads'
# column vectors held (32 each at 128 rows). Not causal, H100, two GPUs, against the Triton dK/dV + dQ kernels in one
# process (run32/h100_d64_m128_gpu*.md): 1.08-1.09x at 4k, 1.12-1.20x at 16k (0.89-0.95x cuDNN); 64 rows a step with
# dQ 0.99-1.00x (run32/h100_dq64_plain.md). Causal, against the 64-row tile below in one process
# (benchmarks/bench_gluon_bwd_ab.py --tiles dq:64:128:2:rows): H100 (session 35, run32) 1.03-1.05x at 4k but
# 0.98-0.99x at 16k; session 37 (run34/h100_bwd_d64_m128_*.md, one H100, two runs) 1.02-1.04x at 4k, 1.00-1.04x at
# 8k, 1.03-1.05x at 16k; H200 (run34/h200_bwd_d64_m128_*.md, two GPUs, two calls) 1.02-1.04x at 4k, 1.02-1.05x at 8k,
# 1.04-1.05x at 16k: taken from 4k keys at every length (its worst sample, 0.98x, within 3%). A call whose seqlen_q
# is not a multiple of 4 (no TMA box for its LSE / delta) takes the 64-row causal row after it, or not causal no row.
_D64_M128 = ("H100 (run32/h100_d64_m128_gpu0.md, _gpu1.md): d=64 not causal 1.08-1.20x the Triton kernels from 4k "
             "keys; causal 1.02-1.05x the 64-row tile at 4k-16k on H100 and H200 (run34), one H100 run 0.98-0.99x "
             "at 16k (run32)")
# d=64 GQA (several query heads a KV head): 64 query rows a step with the LSE / delta through TMA, causal or not, from
# 2k keys. The 128-row tile below ran GQA 32/8 (b=4 s=4096) at 0.87-0.91x the Triton kernels (271-272 causal, 325 not
# causal TFLOP/s; cuDNN 0.73-0.78x), where MHA at the same size takes it at 1.08-1.13x (H200, two GPUs,
# benchmarks/results/run47/h200_b_d64_gpu*.md). The backward alone, H200, same process, two rounds
# (run47/h200_c_d64_gqa_tiles.md, bench_gluon_bwd_ab.py --gqa 64 --gqa-heads 32:8 32:16 32:4 --tiles ...), groups of
# 2 / 4 / 8 at 2k / 4k / 8k / 16k: this tile 1.05-1.12x the Triton kernels not causal, 1.07-1.25x causal, and
# 1.18-1.37x the 128-row tile; the LSE / delta through TMA 1.02-1.09x the same tile with the loads, which with three
# stages measured as with two (0.99-1.01x). Against cuDNN (32/8, run47/h200_c_*, h200_d_d64_gqa_final.md) 0.91-0.95x
# not causal, 0.96-1.03x causal.
_D64_GQA = ("H200 (run47/h200_c_d64_gqa_tiles.md): d=64 GQA (groups of 2 / 4 / 8, 2k-16k) 1.05-1.25x the Triton "
            "kernels, 1.18-1.37x the 128-row tile, 1.02-1.09x with the loads")
BWD_GLUON_DQ: dict[str, list[Row]] = {
    "sm90": [
        Row(64, Tile(64, 128, 4, 2, use_tma=True, reason=_D64_GQA,
                     spills_ok=_D64_GQA + "; the not causal build with the LSE / delta loaded (seqlen_q not a multiple "
                                          "of 4) keeps 8 B in local memory (ptxas, run47), measured with it at "
                                          "1.01-1.03x the Triton kernels (run47/h200_c_d64_gqa_tiles.md, 'gluon on')"),
            gqa=True, min_seqlen_k=2048),
        Row(128, Tile(64, 128, 4, 2, use_tma=True,
                      reason=_DQ_H100 + "d=128 1.01-1.20x from 4k keys, causal or not, GQA too" + _ROWS_TMA_128,
                      spills_ok=_DQ_H100 + "d=128 1.01-1.20x from 4k keys; 216-272 B of local memory, scalars (a few "
                                           "local accesses a step), 72-120 B with the LSE / delta through TMA "
                                           "(run32)" + _SOFTCAP_SPILLS.format("80-424 B")),
            min_seqlen_k=4096),
        Row(64, Tile(128, 128, 4, 2, use_tma=True, reason=_D64_M128, spills_ok=_D64_M128 + "; ptxas keeps 304 B of "
                     "scalars in local memory (144 B at 240 registers: no faster), the causal build 328 B (run34), "
                     "measured with it" + _SOFTCAP_SPILLS.format("176-552 B")),
            min_seqlen_k=4096),
        Row(64, Tile(64, 128, 4, 2, reason=_DQ_H100 + "d=64 causal 1.02x at 4k, 1.06-1.13x at 16k; since session 37 "
                     "the causal calls whose seqlen_q the 128-row tile above cannot take"),
            causal=True, min_seqlen_k=4096),
    ],
}


def bwd_preprocess_tile(family: str, block_dv: int) -> Tile:
    """The preprocess kernel (delta = rowsum(dout * out) - dlse): 4096 elements of out and dout
    per program (no spills on AMD at d=256), 4 warps, one stage; on AMD the options of the
    family's first backward row (what check-amd compiles)."""
    rows = family_table(BWD, family) or ()
    first = rows[0].config.dkdv if rows else Tile(0, 0, 4, 1)
    return Tile(max(16, min(64, 4096 // block_dv)), 0, 4, 1, waves_per_eu=first.waves_per_eu,
                matrix_instr_nonkdim=first.matrix_instr_nonkdim, kpack=first.kpack)
