"""Small ``@triton.jit`` helpers shared by the forward, backward and decode kernels.

Conventions inside every kernel:
- ``offs_m`` [BLOCK_M] query rows, ``offs_n`` [BLOCK_N] key columns, counted inside the
  sequence; ``diag`` = seqlen_k - seqlen_q + diag_offset (bottom-right alignment, moved by
  AttnParams.diag_offset for a chunk of a longer sequence).
- ``HEAD_DIM`` / ``HEAD_DIM_V``: the real head dims; ``BLOCK_D`` / ``BLOCK_DV``: the powers of
  two (>= 16) they are padded to in registers (``block_dim``).
- Strides are tuples in elements, (batch, row, head) for q/k/v-like tensors (batch stride 0 when
  varlen), (batch, head) for lse-like ones; the last dim is contiguous.
- Dropout: element (b, h, i, j), i' = i + drop_offset_q, j' = j + drop_offset_k, keeps or drops by
  word i' % 4 of the Philox counters (j', i' // 4, b * nheads + h) (``dropout_keep``), or, in calls
  with ALiBi or softcap, by word 0 of (j', i', b * nheads + h) (``philox_keep``): ``drop_mode``.
- Feature flags (causal, window, dropout, ...) come packed in one ``FEATURES`` constexpr
  (``features.py``), decoded at the top of each kernel / helper under the names the body uses
  (``IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")``).
- Scores are kept in log2 units (``qk * softmax_scale * log2(e)``) so the online softmax
  uses ``exp2``; the LSE written out is in natural log.
"""
import triton
import triton.language as tl

from . import features

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def philox_keep(seed_lo, seed_hi, c0, c1, c2, threshold):
    """Classic dropout keep mask (calls with ALiBi or softcap, ``drop_mode`` 0): Philox-4x32-7 word 0
    of counters (c0, c1, c2, 0) >= threshold, one evaluation per element.

    Twin of ``flash_attention_amd.philox.dropout_keep_mask`` (quads=False); c0 = key column, c1 = query
    row, c2 = b * nheads + h. All uint32 (broadcastable tensors).
    """
    word, _, _, _, _, _ = _philox_rounds(seed_lo, seed_hi, c0, c1, c2, 7)
    return word >= threshold.to(tl.uint32)


@triton.jit
def philox_key(seed_lo, seed_hi, Seed):
    """The dropout key as two int32 words: seed_lo / seed_hi as passed, or, where Seed (a pointer to the key, an int64
    below 2**63 on the device) is given, its low and high words. A call compiled by torch.compile on a GPU draws its
    key there, so that a CUDA graph replaying the call replays the draw too and the kernel reads each replay's key."""
    if Seed is not None:
        key = tl.load(Seed)  # [] int64
        seed_lo = key.to(tl.int32)
        seed_hi = (key >> 32).to(tl.int32)
    return seed_lo, seed_hi


PHILOX_M0 = tl.constexpr(0xD2511F53)
PHILOX_M1 = tl.constexpr(0xCD9E8D57)


@triton.jit
def _philox_rounds(seed_lo, seed_hi, c0, c1, c2, ROUNDS: tl.constexpr):
    """(c0, c1, c2, c3, k0, k1) after ROUNDS rounds of Philox-4x32 from counters (c0, c1, c2, 0) and
    key (seed_lo, seed_hi); the key is already bumped for the next round. c0 and c1 are broadcast
    together first (the words have their common shape); c2 may be a scalar."""
    c0, c1 = tl.broadcast(c0.to(tl.uint32), c1.to(tl.uint32))
    c2 = c2.to(tl.uint32)
    c3 = tl.zeros_like(c0)
    k0 = seed_lo.to(tl.uint32)
    k1 = seed_hi.to(tl.uint32)
    m0 = tl.full([1], PHILOX_M0, tl.uint32)
    m1 = tl.full([1], PHILOX_M1, tl.uint32)
    for _ in tl.static_range(ROUNDS):
        hi0 = tl.umulhi(m0, c0)
        lo0 = m0 * c0
        hi1 = tl.umulhi(m1, c2)
        lo1 = m1 * c2
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3, k0, k1


@triton.jit
def philox(seed_lo, seed_hi, c0, c1, c2):
    """The four uint32 words of Philox-4x32-7 for counters (c0, c1, c2, 0), key (seed_lo, seed_hi).
    Twin of ``flash_attention_amd.philox.philox_words``."""
    c0, c1, c2, c3, _, _ = _philox_rounds(seed_lo, seed_hi, c0, c1, c2, 7)
    return c0, c1, c2, c3


@triton.jit
def philox_word(seed_lo, seed_hi, c0, c1, c2, sel):
    """Word ``sel`` (0..3, per element) of ``philox(seed_lo, seed_hi, c0, c1, c2)``, the per-element
    path of ``dropout_keep``. Words 0 / 1 read only (c1, c2) of round six, words 2 / 3 only (c3, c0),
    so round six keeps per element just the pair its word needs (X multiplied, Y xored in round
    seven): two live tiles at the end, as one word of plain Philox needs, instead of four."""
    c0, c1, c2, c3, k0, k1 = _philox_rounds(seed_lo, seed_hi, c0, c1, c2, 5)
    m0 = tl.full([1], PHILOX_M0, tl.uint32)
    m1 = tl.full([1], PHILOX_M1, tl.uint32)
    low = sel < 2
    # round six: c0' = hi(m1 c2) ^ c1 ^ k0, c1' = lo(m1 c2), c2' = hi(m0 c0) ^ c3 ^ k1, c3' = lo(m0 c0)
    x = tl.where(low, tl.umulhi(m0, c0) ^ c3 ^ k1, tl.umulhi(m1, c2) ^ c1 ^ k0)  # c2' or c0'
    y = tl.where(low, m1 * c2, m0 * c0)  # c1' or c3'
    # round seven (keys bumped): word 0 = hi(m1 c2') ^ c1' ^ k0, 1 = lo(m1 c2'),
    # 2 = hi(m0 c0') ^ c3' ^ k1, 3 = lo(m0 c0')
    m = tl.where(low, m1, m0)
    kk = tl.where(low, k0 + 0x9E3779B9, k1 + 0xBB67AE85)
    return tl.where(sel % 2 == 0, tl.umulhi(m, x) ^ y ^ kk, m * x)


@triton.jit
def dropout_keep(seed_lo, seed_hi, threshold, row0, cols, bh, BLOCK_M: tl.constexpr,
                 QUADS: tl.constexpr, KEYS_FIRST: tl.constexpr):
    """Dropout keep mask of query rows row0 .. row0 + BLOCK_M - 1 and key columns ``cols``
    [BLOCK_N] (Philox counters: offsets included), bh = b * nheads + h: [BLOCK_M, BLOCK_N], or
    [BLOCK_N, BLOCK_M] with KEYS_FIRST (the dK/dV kernel's transposed tiles).

    Row i of key j is kept when word i % 4 of ``philox(j, i // 4, bh)`` is >= threshold, so four
    neighbouring query rows share one Philox evaluation. QUADS (row0 % 4 == 0): one evaluation per
    four rows, the words interleaved back with join + reshape; otherwise one per element, the same
    mask at four times the integer work (chunk calls, whose row offset need not be a multiple of 4).
    """
    thr = threshold.to(tl.uint32)
    if QUADS:
        quad = row0 // 4 + tl.arange(0, BLOCK_M // 4)  # [BLOCK_M // 4]
        if KEYS_FIRST:
            w0, w1, w2, w3 = philox(seed_lo, seed_hi, cols[:, None], quad[None, :], bh)  # [BLOCK_N, BLOCK_M // 4]
            keep = tl.join(tl.join(w0 >= thr, w2 >= thr), tl.join(w1 >= thr, w3 >= thr))  # [.., 2, 2]: word 2a + b
            keep = keep.reshape(cols.shape[0], BLOCK_M)
        else:
            w0, w1, w2, w3 = philox(seed_lo, seed_hi, cols[None, :], quad[:, None], bh)  # [BLOCK_M // 4, BLOCK_N]
            keep = tl.join(tl.join(w0 >= thr, w2 >= thr), tl.join(w1 >= thr, w3 >= thr))  # [.., 2, 2]: word 2a + b
            keep = tl.permute(keep, (0, 2, 3, 1)).reshape(BLOCK_M, cols.shape[0])
    else:
        rows = row0 + tl.arange(0, BLOCK_M)  # [BLOCK_M]
        if KEYS_FIRST:
            c, r = cols[:, None], rows[None, :]
        else:
            c, r = cols[None, :], rows[:, None]
        keep = philox_word(seed_lo, seed_hi, c, r // 4, bh, r % 4) >= thr
    return keep


@triton.constexpr_function
def drop_mode(CHUNK, HAS_SOFTCAP, HAS_ALIBI):
    """Which dropout mask a build draws (philox.py): 0 the classic one (one Philox evaluation per element,
    word 0; calls with ALiBi or softcap, whose every-option builds spill with the four-row mask), else
    the four-row mask. The forward evaluates it once per four rows (``dropout_keep``'s QUADS) in mode 1,
    per element in mode 2 (chunk calls: their row offset need not be a multiple of 4); the backward
    kernels evaluate it per element in both (the same words, no interleave)."""
    if HAS_SOFTCAP or HAS_ALIBI:
        return 0
    return 2 if CHUNK else 1


@triton.constexpr_function
def block_dim(d):
    """The padded head dim of a real one, on constexprs in kernels (``BLOCK_D: tl.constexpr =
    block_dim(HEAD_DIM)``): the kernel twin of launch/tiles.py ``padded_dim``, a power of two >= 16."""
    return max(16, triton.next_power_of_2(d))


# The flag names of FEATURES in bit order, as a constexpr global: Triton puts the values of the
# constexpr globals a kernel reads (through has / with_flags) into its cache key, so a change of
# the bit table rebuilds every kernel instead of reusing binaries built for the old bits.
FLAG_BITS = tl.constexpr(features.FLAGS)


@triton.constexpr_function
def has(features_, name):
    """Flag ``name`` of a FEATURES constexpr (``features.FLAGS``), on constexprs in kernels:
    ``IS_CAUSAL: tl.constexpr = has(FEATURES, "IS_CAUSAL")``."""
    names = FLAG_BITS.value  # a local: Triton's dependency scan rejects a method of a global
    return bool((features_ >> names.index(name)) & 1)


@triton.constexpr_function
def with_flags(features_, **flags):
    """FEATURES with the named flags set or cleared, for a helper's call (``MASKED`` per range,
    ``HAS_ALIBI=Alibi is not None``): ``_fwd_blocks(..., with_flags(FEATURES, MASKED=part != 1))``."""
    names = FLAG_BITS.value
    for name, on in flags.items():
        bit = 1 << names.index(name)
        features_ = (features_ | bit) if on else (features_ & ~bit)
    return features_


@triton.jit
def seq_bounds(CuSeqlensQ, CuSeqlensK, off_b, seqlen_q, seqlen_k):
    """(q_start, k_start, seqlen_q, seqlen_k) of sequence off_b: its first packed row and its
    lengths from cu_seqlens when they are given (varlen), else rows from 0 and the given lengths."""
    q_start = tl.full([], 0, tl.int32)
    k_start = tl.full([], 0, tl.int32)
    if CuSeqlensQ is not None:
        q_start = tl.load(CuSeqlensQ + off_b)  # scalar int32
        seqlen_q = tl.load(CuSeqlensQ + off_b + 1) - q_start  # scalar int32
        k_start = tl.load(CuSeqlensK + off_b)  # scalar int32
        seqlen_k = tl.load(CuSeqlensK + off_b + 1) - k_start  # scalar int32
    return q_start, k_start, seqlen_q, seqlen_k


@triton.jit
def tanh_f32(x):
    """tanh for fp32 tensors, written with exp2 so it runs on every target and the interpreter."""
    e = tl.exp2(tl.abs(x) * (-2.0 * LOG2E))  # tensor first: Triton 3.9's interpreter fails on constexpr * tensor
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def tanh_approx_f32(x):
    """tanh by NVIDIA's ``tanh.approx.f32`` (sm_75 and later): one special-function instruction, where
    ``tanh_f32`` takes an exponential and a division (two). Largest relative error 2^-10.99 (PTX ISA);
    flash_attn's own softcap uses the same instruction. Not in the interpreter, not on AMD."""
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


# heavy_first's group of (sequence, head)s: 8 heads' K / V (or Q / dO) at s=4096, d=128 are 16 MB of L2; one
# order over every head lost 4-21% on an H100 (benchmarks/results/run17/h100_bwd_order_ab_global_rejected.txt)
HEAVY_GROUP = tl.constexpr(8)


@triton.jit
def heavy_first(lin, n_blk, n_bh, LAST_HEAVIEST: tl.constexpr, GROUP: tl.constexpr):
    """(block, bh) of the program with linear index lin (lin = bh * n_blk + block: the GPU starts programs in that
    order) over n_blk blocks of n_bh (sequence, head)s, renumbered so that within each group of GROUP heads
    programs start block by block over the group, the heaviest blocks first: block 0 first (a causal dK/dV
    program: its keys are seen by the most query rows) or, LAST_HEAVIEST, the last block first (a causal query
    block: its rows see the most keys). The longest programs no longer start last (a causal grid's tail), while
    the programs running at once still read the tiles of a few heads (L2)."""
    group = lin // (GROUP * n_blk)
    rest = lin % (GROUP * n_blk)
    width = tl.minimum(n_bh - group * GROUP, GROUP)  # the last group may be narrower
    blk = rest // width
    if LAST_HEAVIEST:
        blk = n_blk - 1 - blk
    return blk, group * GROUP + rest % width


@triton.jit
def visible(offs_m, offs_n, diag, seqlen_k, window_left, window_right,
            IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, MASK_N: tl.constexpr):
    """[BLOCK_M, BLOCK_N] bool: key offs_n visible from query offs_m; query i sits at key
    position i + diag (diag = seqlen_k - seqlen_q + diag_offset: bottom-right aligned).

    window_left / window_right < 0 mean unbounded; IS_CAUSAL means window_right == 0.
    MASK_N also hides keys at or past seqlen_k.
    """
    i = offs_m[:, None] + diag
    j = offs_n[None, :]
    ok = j >= 0
    if MASK_N:
        ok = ok & (j < seqlen_k)
    if IS_CAUSAL:
        ok = ok & (j <= i)
    if HAS_WINDOW:
        # branch-free: a runtime `if` may not change ok's shape ([1, N] -> [M, N]) on GPU
        ok = ok & ((j >= i - window_left) | (window_left < 0))
        ok = ok & ((j <= i + window_right) | (window_right < 0))
    return ok


@triton.jit
def key_range(first_row, last_row, diag, seqlen_k, window_left, window_right,
              BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr):
    """[lo, hi) key columns that some query row first_row..last_row can see, lo aligned to BLOCK_N."""
    lo = 0
    hi = seqlen_k
    if IS_CAUSAL:
        hi = tl.minimum(hi, last_row + diag + 1)
    if HAS_WINDOW:
        if window_right >= 0:
            hi = tl.minimum(hi, last_row + diag + window_right + 1)
        if window_left >= 0:
            lo = tl.maximum(0, first_row + diag - window_left)
            lo = (lo // BLOCK_N) * BLOCK_N
    hi = tl.maximum(hi, lo)
    return lo, hi


@triton.jit
def key_blocks(start_m, diag, seqlen_k, window_left, window_right,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr):
    """(lo, full_lo, full_hi, hi) for query rows start_m .. start_m + BLOCK_M - 1: [lo, hi) are
    the keys some row sees; [full_lo, full_hi) (multiples of BLOCK_N past lo) the key blocks every
    row sees in full (no mask, no bounds check). [lo, full_lo) is empty without a left window bound.
    Forward and dQ loop over the same ranges."""
    lo, hi = key_range(start_m, start_m + BLOCK_M - 1, diag, seqlen_k, window_left, window_right,
                       BLOCK_N, IS_CAUSAL, HAS_WINDOW)
    lo = tl.minimum(lo, hi)  # a tensor even when key_range's lo is the literal 0
    full_lo = lo
    full_hi = hi
    if IS_CAUSAL:
        full_hi = tl.minimum(full_hi, start_m + diag + 1)
    if HAS_WINDOW:
        if window_right >= 0:
            full_hi = tl.minimum(full_hi, start_m + diag + window_right + 1)
        if window_left >= 0:
            full_lo = tl.maximum(lo, start_m + BLOCK_M - 1 + diag - window_left)
            full_lo = ((full_lo + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
            full_lo = tl.minimum(full_lo, hi)
    full_hi = (tl.maximum(full_hi, 0) // BLOCK_N) * BLOCK_N
    full_hi = tl.maximum(full_hi, full_lo)
    return lo, full_lo, full_hi, hi


# Keys a key-mask row is scanned for at a time (uint8 loads: 1 KiB, a few registers a thread).
KEY_SCAN = tl.constexpr(1024)


@triton.jit
def key_mask_span(row, seqlen_k, SCAN: tl.constexpr):
    """[first, last + 1) of the keys a key-mask row keeps (uint8 [seqlen_k], key stride 1, nonzero =
    kept); (seqlen_k, 0) when it keeps none."""
    first = tl.zeros([], tl.int32) + seqlen_k
    last = tl.full([], -1, tl.int32)
    for start in range(0, seqlen_k, SCAN):
        cols = start + tl.arange(0, SCAN)
        keep = tl.load(row + cols, mask=cols < seqlen_k, other=0) != 0  # [SCAN]
        first = tl.minimum(first, tl.min(tl.where(keep, cols, seqlen_k), 0))
        last = tl.maximum(last, tl.max(tl.where(keep, cols, -1), 0))
    return first, last + 1


@triton.jit
def trim_key_blocks(lo, full_lo, full_hi, hi, span_lo, span_hi, BLOCK_N: tl.constexpr):
    """``key_blocks``' ranges (lo, full_lo, full_hi multiples of BLOCK_N) narrowed to a key mask's span
    [span_lo, span_hi): the blocks before and after it keep no key, so skipping them changes nothing (their scores are
    all -inf: p = 0, the row max and sum unchanged, no dropout draw read). A row keeping no key
    gets the empty range: out 0, lse +inf, as a fully masked row."""
    lo = tl.multiple_of(tl.maximum(lo, (span_lo // BLOCK_N) * BLOCK_N), BLOCK_N)
    hi = tl.maximum(tl.minimum(hi, span_hi), lo)
    floor_hi = (hi // BLOCK_N) * BLOCK_N  # >= lo: lo is aligned and <= hi
    # the loops' starts stay multiples of BLOCK_N (told to the compiler: the pipeliner sizes the bias
    # tile's asynchronous copies by it, and a 1-byte copy does not compile on sm90)
    full_lo = tl.multiple_of(tl.minimum(tl.maximum(full_lo, lo), floor_hi), BLOCK_N)
    full_hi = tl.multiple_of(tl.maximum(tl.minimum(full_hi, floor_hi), full_lo), BLOCK_N)
    return lo, full_lo, full_hi, hi


@triton.jit
def score_mod(qk, offs_m, offs_n, diag, sm_scale, softcap, slope,
              HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, FAST_TANH: tl.constexpr):
    """fp32 scores in log2 units from raw dot products qk [BLOCK_M, BLOCK_N].

    s = sm_scale * qk; softcap: s = softcap * tanh(s / softcap); ALiBi: s -= slope * |i + diag - j|.
    Returns (s * log2(e), tanh) where tanh is what the backward pass needs for softcap
    (qk itself when HAS_SOFTCAP is off). FAST_TANH: tanh by ``tanh_approx_f32`` (the forward and the
    backward of one call take the same, so that the backward's P is the forward's).
    """
    if HAS_SOFTCAP and FAST_TANH:
        t = tanh_approx_f32(qk * (sm_scale / softcap))
        s = t * (softcap * LOG2E)
    elif HAS_SOFTCAP:
        t = tanh_f32(qk * (sm_scale / softcap))
        s = t * (softcap * LOG2E)
    else:
        t = qk
        s = qk * (sm_scale * LOG2E)
    if HAS_ALIBI:
        dist = (offs_m[:, None] + diag) - offs_n[None, :]
        s = s - (slope * LOG2E) * tl.abs(dist).to(tl.float32)
    return s, t


# ---------------------------------------------------------------------------------------------
# Head-dim chunks (head dims above 256, MLA's 576): a [rows, d] tile is held as a tuple of
# [rows, CHUNK] tiles, so no product ever spans the padded head dim (576 -> 9 chunks of 64, not
# one of 1024) and the register tiles of the QK^T and PV products have their own widths.

@triton.constexpr_function
def num_chunks(d, chunk):
    """Chunks of width ``chunk`` that cover ``d`` columns (0 when chunking is off)."""
    return (d + chunk - 1) // chunk if chunk else 0


@triton.jit
def load_chunks(ptrs, row_ok, col0, NUM: tl.constexpr, CHUNK: tl.constexpr, DIM: tl.constexpr,
                MASK_ROWS: tl.constexpr, SPLIT: tl.constexpr):
    """A tuple of NUM tiles [R, CHUNK]: chunk i holds columns col0 + i * CHUNK .. + CHUNK - 1.

    ptrs [R, CHUNK]: pointers to the first chunk (row offsets + arange(CHUNK)); columns at or
    past DIM and rows where row_ok [R] is False (MASK_ROWS) read 0. SPLIT: col0 is a runtime
    column (a program's share of the head dim), so every chunk is bounds-checked; else col0 is
    0 and only a chunk that crosses DIM is.
    """
    offs_c = tl.arange(0, CHUNK)
    chunks = ()
    for i in tl.static_range(NUM):
        if SPLIT or (i + 1) * CHUNK > DIM:
            col_ok = (col0 + i * CHUNK + offs_c)[None, :] < DIM
            if MASK_ROWS:
                x = tl.load(ptrs + i * CHUNK, mask=row_ok[:, None] & col_ok, other=0.0)
            else:
                x = tl.load(ptrs + i * CHUNK, mask=col_ok, other=0.0)
        elif MASK_ROWS:
            x = tl.load(ptrs + i * CHUNK, mask=row_ok[:, None], other=0.0)
        else:
            x = tl.load(ptrs + i * CHUNK)
        chunks = chunks + (x,)
    return chunks


@triton.jit
def store_chunks(ptrs, chunks, scale, row_ok, col0, NUM: tl.constexpr, CHUNK: tl.constexpr, DIM: tl.constexpr,
                 SPLIT: tl.constexpr):
    """Store chunks[i] * scale[:, None] (in ptrs' element type) at the columns load_chunks reads;
    rows where row_ok is False and columns at or past DIM are not written."""
    offs_c = tl.arange(0, CHUNK)
    for i in tl.static_range(NUM):
        x = (chunks[i] * scale[:, None]).to(ptrs.dtype.element_ty)
        if SPLIT or (i + 1) * CHUNK > DIM:
            tl.store(ptrs + i * CHUNK, x, mask=row_ok[:, None] & ((col0 + i * CHUNK + offs_c)[None, :] < DIM))
        else:
            tl.store(ptrs + i * CHUNK, x, mask=row_ok[:, None])


@triton.jit
def dot_chunks(a, b, acc, TRANS_B: tl.constexpr, IEEE_DOT: tl.constexpr):
    """acc + sum_i a[i] @ b[i] (b[i]^T with TRANS_B) over the chunk tuples a, b (acc None: 0)."""
    for i in tl.static_range(len(a)):
        bi = tl.trans(b[i]) if TRANS_B else b[i]
        if IEEE_DOT:
            acc = tl.dot(a[i].to(tl.float32), bi.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a[i], bi, acc)
    return acc


@triton.jit
def round_e4m3(x):
    """fp32 x (|x| <= 448) rounded to the nearest e4m3fn value (ties to even), returned in fp32.

    What ``x.to(fp8e4nv)`` computes on a GPU; Triton 3.6's interpreter gets that conversion wrong
    where rounding carries into the exponent (0.499 -> 0.25, not 0.5), so the FP8 forward rounds
    P with this in the interpreter (IEEE_DOT) to keep its fp8 math testable on the CPU.
    """
    bits = x.to(tl.int32, bitcast=True)
    lsb = (bits >> 20) & 1  # the last of the 3 mantissa bits kept: ties to even
    normal = ((bits + 0x7FFFF + lsb) & -0x100000).to(tl.float32, bitcast=True)
    y = tl.abs(x) * 512.0  # below 2**-6 (e4m3fn subnormals): multiples of 2**-9
    f = tl.floor(y)
    r = y - f
    up = (r > 0.5) | ((r == 0.5) & ((f.to(tl.int32) & 1) == 1))
    sub = tl.where(up, f + 1.0, f) * (1.0 / 512.0)
    return tl.where(tl.abs(x) < 0.015625, tl.where(x < 0, -sub, sub), normal)
