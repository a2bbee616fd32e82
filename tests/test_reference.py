"""Sanity of the oracle itself: reference.py against the contract's formula written element by
element in plain Python, and the Philox twins (philox.py, kernels/common.py:philox / dropout_keep)
against Random123's known-answer vectors and each other."""
from __future__ import annotations

import math

import pytest
import torch

from flash_attention_amd.philox import dropout_keep_mask, dropout_threshold, philox_words, quad_mask
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
from helpers import DEVICE, HAS_TRITON

# --------------------------------------------------------------------------- plain-Python Philox

_MASK = 0xFFFFFFFF


def philox4x32(ctr, key, rounds):
    """Philox-4x32-R on Python ints, written from the Random123 paper's round function."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & _MASK, (k1 + 0xBB67AE85) & _MASK
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & _MASK, p1 & _MASK, ((p0 >> 32) ^ c3 ^ k1) & _MASK, p0 & _MASK
    return c0, c1, c2, c3


# Random123 tests/kat_vectors (DEShawResearch/random123): philox4x32 R, ctr[4], key[2] -> out[4]
KAT = [
    (7, (0, 0, 0, 0), (0, 0), (0x5F6FB709, 0x0D893F64, 0x4F121F81, 0x4F730A48)),
    (7, (_MASK,) * 4, (_MASK, _MASK), (0x5207DDC2, 0x45165E59, 0x4D8EE751, 0x8C52F662)),
    (7, (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0x4DFCCABA, 0x190A87F0, 0xC47362BA, 0xB6B5242A)),
    (10, (0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (10, (_MASK,) * 4, (_MASK, _MASK), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (10, (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("rounds,ctr,key,expect", KAT)
def test_plain_philox_known_answers(rounds, ctr, key, expect):
    assert philox4x32(ctr, key, rounds) == expect


def test_torch_philox_matches_plain():
    """philox_words = the four words of Philox-4x32-7 with counter (c0, c1, c2, 0), key (seed lo, hi)."""
    zero = torch.tensor(0)
    assert [int(w) for w in philox_words(0, zero, zero, zero)] == list(KAT[0][3])
    g = torch.Generator().manual_seed(1)
    for seed in (0, 1, 0x123456789ABCDEF0, 2**64 - 1):
        c = torch.randint(0, 2**32, (3, 200), generator=g, dtype=torch.int64)
        c[:, :4] = torch.tensor([[0, _MASK, 2**31, 2**31 - 1]] * 3)
        got = list(zip(*(w.tolist() for w in philox_words(seed, c[0], c[1], c[2]))))
        key = (seed & _MASK, seed >> 32 & _MASK)
        want = [philox4x32((a, b, e, 0), key, 7) for a, b, e in zip(*c.tolist())]
        assert got == want


def test_keep_mask_reads_word_i_mod_4():
    """Row i of key j reads word i % 4 of counters (j, i // 4, bh): the contract of every twin."""
    seed, p = 0x0123456789ABCDEF, 0.5
    rows, cols = torch.arange(3, 14)[:, None], torch.arange(5)[None, :]
    key = (seed & _MASK, seed >> 32)
    want = torch.tensor([[philox4x32((j, i // 4, 7, 0), key, 7)[i % 4] >= 2**31 for j in range(5)]
                         for i in range(3, 14)])
    assert torch.equal(dropout_keep_mask(seed, p, 7, rows, cols), want)


def test_classic_keep_mask_reads_word_0():
    """quads=False (calls with ALiBi or softcap, quad_mask): word 0 of counters (j, i, bh)."""
    seed, p = 0x0123456789ABCDEF, 0.5
    rows, cols = torch.arange(3, 14)[:, None], torch.arange(5)[None, :]
    key = (seed & _MASK, seed >> 32)
    want = torch.tensor([[philox4x32((j, i, 7, 0), key, 7)[0] >= 2**31 for j in range(5)] for i in range(3, 14)])
    assert torch.equal(dropout_keep_mask(seed, p, 7, rows, cols, quads=False), want)
    assert not torch.equal(dropout_keep_mask(seed, p, 7, rows, cols), want)
    assert quad_mask(False, 0.0) and not quad_mask(True, 0.0) and not quad_mask(False, 30.0)


def test_keep_mask_statistics_and_threshold():
    rows, cols = torch.arange(128)[:, None], torch.arange(256)[None, :]
    for p in (0.0, 0.1, 0.5, 0.9):
        keep = dropout_keep_mask(42, p, 3, rows, cols)
        assert abs(keep.double().mean().item() - (1 - p)) < 0.01
    assert dropout_threshold(0.0) == 0 and dropout_threshold(0.5) == 2**31
    assert dropout_threshold(0.9999999999) <= _MASK
    a = dropout_keep_mask(42, 0.5, 3, rows, cols)
    assert not torch.equal(a, dropout_keep_mask(43, 0.5, 3, rows, cols))  # seed matters
    assert not torch.equal(a, dropout_keep_mask(42, 0.5, 4, rows, cols))  # head / batch matter
    # neighbouring rows share a Philox evaluation but not a word: no correlation within a quad
    kept = dropout_keep_mask(42, 0.5, 3, torch.arange(512)[:, None], cols).double()
    for shift in (1, 2, 3):
        agree = (kept[:-shift] == kept[shift:]).double().mean().item()
        assert abs(agree - 0.5) < 0.01, shift


if HAS_TRITON:  # conftest.py has set TRITON_INTERPRET=1 on machines without a GPU
    import triton
    import triton.language as tl

    from flash_attention_amd.kernels.common import dropout_keep, philox, philox_keep

    @triton.jit
    def _words_kernel(c0_ptr, c1_ptr, c2_ptr, out_ptr, seed_lo, seed_hi, n, BLOCK: tl.constexpr):
        """out[w, i] = word w of philox(seed, c0[i], c1[i], c2[i]) (uint32 bits as int32)."""
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inb = offs < n
        c0 = tl.load(c0_ptr + offs, mask=inb, other=0)  # [BLOCK]
        c1 = tl.load(c1_ptr + offs, mask=inb, other=0)  # [BLOCK]
        c2 = tl.load(c2_ptr + offs, mask=inb, other=0)  # [BLOCK]
        w0, w1, w2, w3 = philox(seed_lo, seed_hi, c0, c1, c2)
        tl.store(out_ptr + offs, w0.to(tl.int32, bitcast=True), mask=inb)
        tl.store(out_ptr + n + offs, w1.to(tl.int32, bitcast=True), mask=inb)
        tl.store(out_ptr + 2 * n + offs, w2.to(tl.int32, bitcast=True), mask=inb)
        tl.store(out_ptr + 3 * n + offs, w3.to(tl.int32, bitcast=True), mask=inb)

    @triton.jit
    def _classic_kernel(out_ptr, seed_lo, seed_hi, threshold, col0, row0, bh, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr):
        """out [BLOCK_M, BLOCK_N] = philox_keep (the classic mask) of rows row0.. and keys col0.."""
        rows, cols = row0 + tl.arange(0, BLOCK_M), col0 + tl.arange(0, BLOCK_N)
        keep = philox_keep(seed_lo, seed_hi, cols[None, :], rows[:, None], bh, threshold)  # [BLOCK_M, BLOCK_N]
        om, on = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N)
        tl.store(out_ptr + om[:, None] * BLOCK_N + on[None, :], keep.to(tl.int32))

    @triton.jit
    def _tile_kernel(out_ptr, seed_lo, seed_hi, threshold, col0, row0, bh, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, QUADS: tl.constexpr, KEYS_FIRST: tl.constexpr):
        """out [BLOCK_M, BLOCK_N] = dropout_keep of rows row0.. and keys col0.. (transposed back)."""
        cols = col0 + tl.arange(0, BLOCK_N)
        keep = dropout_keep(seed_lo, seed_hi, threshold, row0, cols, bh, BLOCK_M, QUADS, KEYS_FIRST)
        if KEYS_FIRST:
            keep = tl.trans(keep)  # [BLOCK_M, BLOCK_N]
        om, on = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N)
        tl.store(out_ptr + om[:, None] * BLOCK_N + on[None, :], keep.to(tl.int32))


@pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
def test_triton_philox_twin_matches_torch():
    """kernels/common.py:philox (interpreter on CPU) == philox.philox_words, all four words, bit for bit."""
    g = torch.Generator().manual_seed(2)
    n = 300
    c = torch.randint(0, 2**31, (3, n), generator=g, dtype=torch.int32)
    c[:, :3] = torch.tensor([[0, 1, 2**31 - 1]] * 3, dtype=torch.int32)
    for seed in (0, 0x0123456789ABCDEF, 2**64 - 1):
        out = torch.full((4, n), -1, dtype=torch.int32, device=DEVICE)
        cd = c.to(DEVICE)
        _words_kernel[(triton.cdiv(n, 128),)](cd[0], cd[1], cd[2], out, seed & _MASK, seed >> 32, n, BLOCK=128)
        want = torch.stack(philox_words(seed, c[0].long(), c[1].long(), c[2].long()))
        assert torch.equal(out.cpu().long() & _MASK, want), seed


@pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
@pytest.mark.parametrize("keys_first", [False, True])
@pytest.mark.parametrize("row0,quads", [(0, True), (96, True), (4, True), (3, False), (97, False), (8, False)])
def test_triton_keep_tile_matches_torch(row0, quads, keys_first):
    """kernels/common.py:dropout_keep, one Philox per four rows (QUADS) or per element, in both tile
    orientations == philox.dropout_keep_mask of the same rows and columns."""
    seed, p, bh, col0 = 0x0123456789ABCDEF, 0.4, 5, 11
    out = torch.full((16, 32), -1, dtype=torch.int32, device=DEVICE)
    thr = dropout_threshold(p)
    _tile_kernel[(1,)](out, seed & _MASK, seed >> 32, thr - 2**32 * (thr >= 2**31), col0, row0, bh,
                       BLOCK_M=16, BLOCK_N=32, QUADS=quads, KEYS_FIRST=keys_first)
    rows, cols = torch.arange(row0, row0 + 16)[:, None], torch.arange(col0, col0 + 32)[None, :]
    want = dropout_keep_mask(seed, p, bh, rows, cols)
    assert torch.equal(out.cpu().bool(), want)
    assert 0 < int(want.sum()) < want.numel()


@pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
def test_triton_classic_keep_matches_torch():
    """kernels/common.py:philox_keep == philox.dropout_keep_mask(quads=False), bit for bit."""
    seed, p, bh, col0, row0 = 0x0123456789ABCDEF, 0.4, 5, 11, 7
    out = torch.full((16, 32), -1, dtype=torch.int32, device=DEVICE)
    thr = dropout_threshold(p)
    _classic_kernel[(1,)](out, seed & _MASK, seed >> 32, thr - 2**32 * (thr >= 2**31), col0, row0, bh,
                          BLOCK_M=16, BLOCK_N=32)
    rows, cols = torch.arange(row0, row0 + 16)[:, None], torch.arange(col0, col0 + 32)[None, :]
    want = dropout_keep_mask(seed, p, bh, rows, cols, quads=False)
    assert torch.equal(out.cpu().bool(), want)
    assert 0 < int(want.sum()) < want.numel()


# --------------------------------------------------------------------------- plain-Python attention

def naive_attention(q, k, v, *, scale, causal=False, window=(-1, -1), softcap=0.0, slopes=None,
                    dropout_p=0.0, seed=0, batch_index=0):
    """CONTRACT.md's formula element by element on Python floats: out [b][sq][h][dv], lse [b][h][sq]."""
    b, sq, h, d = q.shape
    sk, hk, dv = k.shape[1], k.shape[2], v.shape[3]
    q, k, v = q.tolist(), k.tolist(), v.tolist()
    left, right = window
    if causal:
        right = 0
    out = [[[[0.0] * dv for _ in range(h)] for _ in range(sq)] for _ in range(b)]
    lse = [[[math.inf] * sq for _ in range(h)] for _ in range(b)]
    thr = dropout_threshold(dropout_p)
    key = (seed & _MASK, seed >> 32 & _MASK)
    for bi in range(b):
        for hi in range(h):
            kh = hi // (h // hk)
            slope = 0.0
            if slopes is not None:
                slope = float(slopes[hi] if slopes.dim() == 1 else slopes[batch_index + bi][hi])
            for i in range(sq):
                ii = i + sk - sq
                scores = {}
                for j in range(sk):
                    if (left >= 0 and j < ii - left) or (right >= 0 and j > ii + right):
                        continue
                    s = scale * sum(q[bi][i][hi][x] * k[bi][j][kh][x] for x in range(d))
                    if softcap > 0:
                        s = softcap * math.tanh(s / softcap)
                    scores[j] = s - slope * abs(ii - j)
                if not scores:
                    continue
                m = max(scores.values())
                total = sum(math.exp(s - m) for s in scores.values())
                lse[bi][hi][i] = m + math.log(total)
                for j, s in scores.items():
                    pij = math.exp(s - m) / total
                    if dropout_p > 0 and (slopes is not None or softcap > 0):  # the classic mask
                        word = philox4x32((j, i, (batch_index + bi) * h + hi, 0), key, 7)[0]
                        pij = pij / (1 - dropout_p) if word >= thr else 0.0
                    elif dropout_p > 0:  # the four-row mask
                        word = philox4x32((j, i // 4, (batch_index + bi) * h + hi, 0), key, 7)[i % 4]
                        pij = pij / (1 - dropout_p) if word >= thr else 0.0
                    for x in range(dv):
                        out[bi][i][hi][x] += pij * v[bi][j][kh][x]
    out = torch.tensor(out, dtype=torch.float64).reshape(b, sq, h, dv)
    return out, torch.tensor(lse, dtype=torch.float64).reshape(b, h, sq)


CASES = {
    "plain": dict(),
    "causal_sq_gt_sk": dict(causal=True),
    "window": dict(window=(2, 1)),
    "softcap_alibi1d": dict(softcap=1.5, slopes="1d"),
    "causal_alibi2d_softcap": dict(causal=True, softcap=2.0, slopes="2d"),
    "dropout_window": dict(window=(3, -1), dropout_p=0.4, seed=0xDEADBEEF12345),
    "dropout_softcap": dict(softcap=2.0, dropout_p=0.4, seed=0xDEADBEEF12345),
}


@pytest.mark.parametrize("sq,sk", [(6, 4), (3, 7)])
@pytest.mark.parametrize("case", list(CASES))
def test_reference_matches_naive(case, sq, sk):
    b, h, hk, d, dv = 2, 4, 2, 5, 3
    q, k, v = torch.randn(b, sq, h, d, dtype=torch.float64), torch.randn(b, sk, hk, d, dtype=torch.float64), \
        torch.randn(b, sk, hk, dv, dtype=torch.float64)
    opts = dict(CASES[case])
    slopes = {"1d": torch.rand(h), "2d": torch.rand(b, h), None: None}[opts.pop("slopes", None)]
    scale = 0.7
    out, lse = attention_ref(q, k, v, softmax_scale=scale, causal=opts.get("causal", False),
                             window_size=opts.get("window", (-1, -1)), softcap=opts.get("softcap", 0.0),
                             alibi_slopes=slopes, dropout_p=opts.get("dropout_p", 0.0), seed=opts.get("seed", 0))
    out_n, lse_n = naive_attention(q, k, v, scale=scale, slopes=slopes, **opts)
    torch.testing.assert_close(out, out_n, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse, lse_n, rtol=1e-12, atol=1e-12)  # +inf rows must match too
    if case == "causal_sq_gt_sk" and sq > sk:
        assert torch.isposinf(lse[:, :, : sq - sk]).all() and (out[:, : sq - sk] == 0).all()


def test_reference_varlen_matches_naive():
    """Per-sequence masks, batch index of the 2-D slopes and of the dropout counters."""
    lq, lk, h, hk, d = [2, 0, 5], [3, 2, 4], 2, 1, 4
    cq = torch.tensor([0, 2, 2, 7], dtype=torch.int32)
    ck = torch.tensor([0, 3, 5, 9], dtype=torch.int32)
    q, k, v = torch.randn(7, h, d, dtype=torch.float64), torch.randn(9, hk, d, dtype=torch.float64), \
        torch.randn(9, hk, d, dtype=torch.float64)
    slopes = torch.rand(3, h)
    kw = dict(causal=True, alibi_slopes=slopes, dropout_p=0.3, seed=7)
    out, lse = attention_ref_varlen(q, k, v, cq, ck, **kw)
    for bi in range(3):
        q0, q1, k0, k1 = cq[bi], cq[bi + 1], ck[bi], ck[bi + 1]
        o_n, l_n = naive_attention(q[q0:q1][None], k[k0:k1][None], v[k0:k1][None], scale=d ** -0.5, causal=True,
                                   slopes=slopes, dropout_p=0.3, seed=7, batch_index=bi)
        torch.testing.assert_close(out[q0:q1], o_n[0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(lse[:, q0:q1], l_n[0], rtol=1e-12, atol=1e-12)
    assert sum(lq) == out.shape[0] and sum(lk) == k.shape[0]
