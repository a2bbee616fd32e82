"""The ``torch`` backend: FlashAttention written with plain PyTorch ops. Runs anywhere.

Every option of CONTRACT.md (causal, window, softcap, ALiBi, dropout, GQA, varlen, any
head dim 1..512 with its own ``headdim_v``) in fp16 / bf16 / fp32 / fp64, forward and
backward, on any device; FP8 (e4m3) inputs with descale factors forward only, each tile
dequantised in fp32 as it is read (the plain twin of the Triton FP8 forward), output bf16.
The FlashAttention algorithm: queries in blocks of ``block_m``
rows, keys in blocks of ``block_n`` columns, an online softmax with a running max and
sum, so the [seqlen_q, seqlen_k] score matrix never exists: memory is O(seqlen) plus one
[block_m, block_n] tile per (batch, head). fp16/bf16 compute in fp32, fp64 stays fp64.
Key blocks that the causal / window masks hide entirely are skipped by the loop bounds.

The backward pass recomputes P tile by tile from q, k and the saved LSE, with
``delta = rowsum(dO * O)``; dropout masks are regenerated from Philox (``philox.py``),
never stored.

Beyond flash_attn: ``params.attn_bias`` (a 4-D view broadcastable to [b, h, sq, sk]) is read
tile by tile (a slice of the view, size-1 dims broadcast: nothing is materialised beyond
the bias itself); a float bias is added after ALiBi, a bool one hides keys. Its gradient is the
score gradient dS summed over the broadcast dims (fp32 accumulation, returned in the bias
dtype). ``params.sinks`` [h] start each row's online softmax with the sink as one logit
(row max = sink, row sum = 1), so a row with no visible key gets out 0 and lse = sink;
dsinks_h = -sum_{b,i} exp(sink_h - lse_bhi) * (delta_bhi - dlse_bhi).

Shape legend: b batch, sq/sk query/key length, h query heads, hk key/value heads,
g = h // hk query heads per KV head, d q/k head dim, dv value head dim,
bm/bn query/key block sizes.
Inside the tile loops tensors are 5-D [b, hk, g, bm, *]: query head ``hk_idx * g + g_idx``
reads KV head ``hk_idx``, and K/V tiles are [b, hk, bn, *] (shared by the g query heads
through a reshape of q to [b, hk, g * bm, d], never repeated).
"""
from __future__ import annotations

import math

import torch

from ..params import AttnParams, Problem
from ..philox import dropout_keep_mask, quad_mask
from ..validation import FP8_DTYPES
from .base import KernelBackend

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MAX_HEADDIM = 512
# Elements of one score tile summed over batch and heads (a query block is sized to fill
# it): bounds the working set to a few such tiles whatever the sequence length. On the CPU
# a tile of 2**18 fp32 (1 MiB) measured fastest (session 52, this repository's 2-core machine, softcap 30,
# forward + backward: 0.72-0.89x the time of 2**17's tiles at b=2 s=256 h=4/2 d=64 causal, b=1 s=1k h=8 d=64
# causal, b=1 s=2k h=8 d=128 causal, 0.95-1.01x at b=4 s=512 h=8 d=64; 2**19 faster on that one, slower on the
# first two: benchmarks/results/run49/cpu_tile_size*); on a GPU a large one keeps the number of launched ops down.
TILE_ELEMS_CPU = 1 << 18
TILE_ELEMS_GPU = 1 << 22
MIN_BLOCK_M = 32
# softmax with 0, not NaN, on rows whose scores are all -inf (torch >= 2.5; else the one-tile forward's own ops)
_SAFE_SOFTMAX = getattr(torch, "_safe_softmax", None)
# exp(x) as exp2(x * log2(e)) on the score tiles: on this repository's CPU machine torch.exp takes 9x a finite tile's
# time on a tile whose hidden half is -inf and 40-80x where results underflow (-90, -104: a row's far keys), where
# exp2 stays at 1.0-1.7x a finite tile's exp for every input (benchmarks/results/run50/cpu_mask_fill_probe.md)
_LOG2E = 1.0 / math.log(2.0)
_MASK_ROWS: list = []  # [the last bool mask seen, its version, whether each of its rows keeps a key (None: not read)]
_HIDDEN: list = []  # [the last bool mask seen, its version, its complement]
_MERGED: list = []  # [the last bool mask merged, its version, the tile's key, the union of hidden keys]
_BANDS: dict = {}  # (rows, cols, upper, lower, device) -> the window band's hidden [rows, cols] (a few per model)


def _merged(mask: torch.Tensor, hidden: torch.Tensor, band: torch.Tensor, tile: tuple) -> torch.Tensor:
    """hidden | band (a bool mask's complement, as the tile reads it, and the window band's hidden keys), made once
    per mask, version and tile (the layers of a forward pass share them: a prefill's causal calls); per call while
    tracing."""
    if torch.compiler.is_compiling():
        return hidden | band
    last = _MERGED
    if not (last and last[0] is mask and last[1] == mask._version and last[2] == tile):
        last[:] = [mask, mask._version, tile, hidden | band]
    return last[3]


def _hidden(mask: torch.Tensor) -> torch.Tensor:
    """~mask (True where a key is hidden), made once per mask and version (the layers of a decoding step share one
    mask); made per call while tracing, and for masks of more than a CPU tile's elements (not kept alive here)."""
    if torch.compiler.is_compiling() or mask.numel() > TILE_ELEMS_CPU:
        return ~mask
    last = _HIDDEN
    if not (last and last[0] is mask and last[1] == mask._version):
        last[:] = [mask, mask._version, ~mask]
    return last[2]


def _keeps_a_key(mask: torch.Tensor) -> bool:
    """Whether every row of the bool mask (4-D, True = visible) keeps a key, read on the CPU from the second call
    with the same mask (the layers of a decoding step share one) and kept while its version stands; False where not
    read (the first call with a mask, a GPU's: reading it would synchronise, while tracing). Where it holds, a dense
    call's tile over every key that no window or causal bound cuts has no row without a key, so the plain softmax gives
    the safe one's values (its checks cost 2.6x the softmax on a decoding step's tile: 14 against 5.4 us on this
    repository's CPU machine)."""
    if not mask.is_cpu or torch.compiler.is_compiling():
        return False
    last = _MASK_ROWS
    if last and last[0] is mask and last[1] == mask._version:
        if last[2] is None:
            last[2] = bool(mask.any(-1).all())
        return last[2]
    last[:] = [mask, mask._version, None]
    return False


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _out_dtype(dtype: torch.dtype) -> torch.dtype:
    """q's dtype, bf16 for FP8 inputs (CONTRACT.md)."""
    return torch.bfloat16 if dtype in FP8_DTYPES else dtype


def _lse_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32, or fp64 for fp64 inputs: an fp32 LSE would round what merges partial results by
    their LSE (ring attention) and the backward's P to 1e-7 where fp64 is exact."""
    return torch.float64 if dtype == torch.float64 else torch.float32


class _Tiles:
    """Per-call constants of a dense (one batch slice) problem and the tile helpers.

    q5 [b, hk, g, sq, d], k4/v4 [b, hk, sk, d|dv] are views of the caller's tensors. What the shapes, the device and
    the params' scalars fix is set here; what the call's tensors bring, by ``bind`` (a copy of a kept instance rebinds
    only that: ``TorchBackend.forward_heads_first``).
    """

    def __init__(self, q, k, v, params: AttnParams, batch_offset: int, block_m, block_n, heads_first=False):
        if heads_first:  # q [b, h, sq, d], k / v [b, hk, sk, d|dv]
            b, h, sq, d = q.shape
            hk, sk = k.shape[1], k.shape[2]
        else:
            b, sq, h, d = q.shape
            sk, hk = k.shape[1], k.shape[2]
        self.b, self.sq, self.sk, self.h, self.hk, self.g = b, sq, sk, h, hk, h // hk
        self.d, self.dv = d, v.shape[-1]
        self.cdt = _compute_dtype(q.dtype)
        self.device = q.device
        self.scale = params.softmax_scale
        self.softcap = params.softcap
        self.diag = sk - sq + params.diag_offset  # diag_offset: a chunk of a longer sequence (params.py)
        self.left = params.window_left
        self.right = 0 if params.causal else params.window_right
        self.batch_offset = batch_offset
        self.heads_first = heads_first
        self.block_n = max(1, min(block_n, max(sk, 1)))
        if block_m is None:
            tile = TILE_ELEMS_CPU if self.device.type == "cpu" else TILE_ELEMS_GPU
            block_m = max(MIN_BLOCK_M, tile // max(1, b * h * self.block_n))
        self.block_m = max(1, min(block_m, max(sq, 1)))
        self.bh = None
        if params.dropout_p > 0:
            bi = torch.arange(b, device=self.device) + batch_offset
            bh = bi[:, None] * h + torch.arange(h, device=self.device)  # [b, h]
            self.bh = bh.view(b, hk, self.g, 1, 1)
        self.bind(q, k, v, params)

    _CALL = ("params", "q5", "k4", "v4", "neg_slopes", "q_scale", "k_scale", "v_scale", "bias", "sinks")

    def unbound(self) -> _Tiles:
        """A copy without the call's tensors (what a plan may keep: no reference to a call's q, k, v or mask)."""
        t = _Tiles.__new__(_Tiles)
        t.__dict__.update(self.__dict__)
        for name in self._CALL:
            setattr(t, name, None)
        return t

    def bound(self, q, k, v, params: AttnParams) -> _Tiles:
        """A copy bound to this call's tensors (``bind``): the constants without recomputing them."""
        t = _Tiles.__new__(_Tiles)
        t.__dict__.update(self.__dict__)
        t.bind(q, k, v, params)
        return t

    def bind(self, q, k, v, params: AttnParams) -> None:
        """The call's tensors: q, k, v as the tiles read them and what params carries (ALiBi slopes, FP8 descales,
        the bias or mask, sinks; the dropout key), for q, k, v and params of the shapes and scalars __init__ saw."""
        b, hk, g, batch_offset = self.b, self.hk, self.g, self.batch_offset
        self.params = params
        if self.heads_first:
            self.q5, self.k4, self.v4 = q.view(b, hk, g, self.sq, self.d), k, v
        else:
            self.q5 = q.view(b, self.sq, hk, g, self.d).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, d]
            self.k4 = k.permute(0, 2, 1, 3)  # [b, hk, sk, d]
            self.v4 = v.permute(0, 2, 1, 3)  # [b, hk, sk, dv]
        self.neg_slopes = None
        if params.alibi_slopes is not None:
            s = params.alibi_slopes.to(device=self.device, dtype=self.cdt)
            s = s.view(1, self.h) if s.dim() == 1 else s[batch_offset:batch_offset + b]
            self.neg_slopes = -s.reshape(-1, hk, g, 1, 1)  # [b|1, hk, g, 1, 1]
        self.q_scale = self.k_scale = self.v_scale = None
        if params.q_descale is not None:  # FP8: tiles are dequantised as they are read (x * descale[b, kv head])
            rows = slice(batch_offset, batch_offset + b)
            self.q_scale = params.q_descale[rows].to(self.cdt).view(b, hk, 1, 1, 1)
            self.k_scale = params.k_descale[rows].to(self.cdt).view(b, hk, 1, 1)
            self.v_scale = params.v_descale[rows].to(self.cdt).view(b, hk, 1, 1)
        self.bias = None  # [b|1, hk|1, g|1, sq|1, sk|1] view of the 4-D bias view (a bool mask: its complement)
        if params.attn_bias is not None:
            bias = params.attn_bias
            if bias.dtype == torch.bool:
                bias = _hidden(bias)  # True = hidden
            if bias.shape[0] != 1 and (batch_offset != 0 or bias.shape[0] != b):
                bias = bias[batch_offset:batch_offset + b]
            bias = bias.unflatten(1, (hk, g)) if bias.shape[1] != 1 else bias.unsqueeze(1)
            self.bias = bias if bias.device == self.device else bias.to(self.device)
        self.sinks = None  # [1, hk, g, 1, 1]
        if params.sinks is not None:
            self.sinks = params.sinks.to(device=self.device, dtype=self.cdt).view(1, hk, g, 1, 1)

    def query_blocks(self):
        for m0 in range(0, self.sq, self.block_m):
            yield m0, min(m0 + self.block_m, self.sq)

    def key_blocks(self, m0: int, m1: int):
        """Key blocks [n0, n1) that some row of queries [m0, m1) can see, and whether the
        block needs the mask (some element hidden)."""
        lo, hi = 0, self.sk
        if self.left >= 0:
            lo = max(lo, m0 + self.diag - self.left)
        if self.right >= 0:
            hi = min(hi, m1 - 1 + self.diag + self.right + 1)
        if hi <= lo:
            return
        for n0 in range(lo, hi, self.block_n):
            n1 = min(n0 + self.block_n, hi)
            partial = (self.left >= 0 and m1 - 1 + self.diag - self.left > n0) or (
                self.right >= 0 and m0 + self.diag + self.right < n1 - 1
            )
            yield n0, n1, partial

    def q_tile(self, m0, m1):
        """[b, hk, g * bm, d] compute-dtype copy of a query block, times ``q_fold``.

        q_fold = scale (scale / softcap with softcap) folds the first score op into q, so
        a raw tile product is already s (resp. the tanh argument).
        """
        qt = self.q5 if m1 - m0 == self.sq else self.q5[:, :, :, m0:m1]
        if self.q_scale is not None:  # FP8
            qt = qt.to(self.cdt) * self.q_scale
        # the [b, hk, g * bm, d] shape first: a view where q came heads first, so the product is the only copy
        qt = qt.reshape(self.b, self.hk, self.g * (m1 - m0), self.d)
        return qt.to(self.cdt).mul_(self.q_fold) if qt.dtype != self.cdt else qt * self.q_fold

    @property
    def q_fold(self) -> float:
        return self.scale / self.softcap if self.softcap > 0 else self.scale

    def kv_tile(self, t4, n0, n1):
        t = t4 if n1 - n0 == self.sk else t4[:, :, n0:n1]  # [b, hk, bn, d|dv]
        if t.dtype != self.cdt:
            t = t.to(self.cdt)
        if self.k_scale is not None:  # FP8
            t = t * (self.k_scale if t4 is self.k4 else self.v_scale)
        return t

    def scores(self, qt, kt, m0, m1, n0, n1, partial, keep_tanh=False, merge=False):
        """Scores [b, hk, g, bm, bn] (-inf where hidden) and, with softcap and keep_tanh,
        the tanh tile the backward pass needs (else None). A bool mask and the window's band are hidden by one fill of
        their union (a broadcast bool fill costs about 1 ns an element on the CPU machine, twice for two); merge (the
        one-tile forward): the union kept per mask (``_merged``)."""
        b, hk, rows, d = qt.shape  # bmm on 3-D views (copies only where a view cannot be): matmul's 4-D wrapping costs
        s = torch.bmm(qt.reshape(b * hk, rows, d), kt.reshape(b * hk, n1 - n0, d).transpose(1, 2))
        s = s.view(b, hk, self.g, m1 - m0, n1 - n0)
        t = None
        if self.softcap > 0:
            s.tanh_()
            if keep_tanh:
                t, s = s, s * self.softcap
            else:
                s.mul_(self.softcap)
        if self.neg_slopes is not None:
            i = torch.arange(m0, m1, device=self.device)[:, None] + self.diag  # [bm, 1]
            j = torch.arange(n0, n1, device=self.device)[None, :]  # [1, bn]
            s.addcmul_(self.neg_slopes, (i - j).abs().to(self.cdt))
        if self.bias is not None:  # after ALiBi; a bool bias is a mask (held as its complement: True = hidden)
            bias = self.bias_tile(m0, m1, n0, n1)
            if bias.dtype == torch.bool:
                if partial:  # the mask and the band in one fill (their union is the size of the mask's tile)
                    band = self.hidden(m0, m1, n0, n1)
                    s.masked_fill_(_merged(self.params.attn_bias, bias, band, (
                        bias.shape, self.batch_offset, m0, m1, n0, n1, self.diag, self.left, self.right))
                        if merge else bias | band, -math.inf)
                    return s, t
                s.masked_fill_(bias, -math.inf)
            else:
                s.add_(bias.to(self.cdt))
        if partial:
            s.masked_fill_(self.hidden(m0, m1, n0, n1), -math.inf)
        return s, t

    def hidden(self, m0, m1, n0, n1):
        """[bm, bn] bool, true where key j (n0 + col) lies outside the window of query i (m0 + row), which sits at key
        i + diag: j < i + diag - left or j > i + diag + right. Made as the band's complement by tril_ / triu_."""
        upper = m0 + self.diag + self.right - n0 if self.right >= 0 else None  # keep col <= row + upper
        lower = m0 + self.diag - self.left - n0 if self.left >= 0 else None  # keep col >= row + lower
        key = (m1 - m0, n1 - n0, upper, lower, self.device)
        band = None if torch.compiler.is_compiling() else _BANDS.get(key)  # (read only: a fill's mask)
        if band is None:
            band = torch.ones(m1 - m0, n1 - n0, dtype=torch.bool, device=self.device)
            if upper is not None:
                band.tril_(upper)
            if lower is not None:
                band.triu_(lower)
            band.logical_not_()
            if not torch.compiler.is_compiling():
                if len(_BANDS) >= 64:
                    _BANDS.clear()
                _BANDS[key] = band
        return band

    def bias_tile(self, m0, m1, n0, n1):
        """The bias [b|1, hk|1, g|1, bm|1, bn|1] over queries [m0, m1) and keys [n0, n1) (a view)."""
        t = self.bias
        if t.shape[3] != 1 and m1 - m0 != t.shape[3]:
            t = t[:, :, :, m0:m1]
        if t.shape[4] != 1 and n1 - n0 != t.shape[4]:
            t = t[:, :, :, :, n0:n1]
        return t

    def dropout_scale(self, m0, m1, n0, n1):
        """Kept-element scale [b, hk, g, bm, bn]: 1 / (1 - p) where kept, 0 where dropped."""
        p = self.params.dropout_p
        rows = torch.arange(m0, m1, device=self.device)[:, None] + self.params.dropout_offset_q
        cols = torch.arange(n0, n1, device=self.device)[None, :] + self.params.dropout_offset_k
        keep = dropout_keep_mask(self.params.seed, p, self.bh, rows, cols,  # an int, or a tensor on the device
                                 quad_mask(self.params.alibi_slopes is not None, self.params.softcap))
        return keep.to(self.cdt).mul_(1.0 / (1.0 - p))


def _forward_dense(q, k, v, out, lse, params, batch_offset, block_m, block_n):
    """Writes out [b, sq, h, dv] and lse [b, h, sq] (views allowed; lse None: not wanted, where the one-tile forward
    serves, else written to a scratch tensor) for one dense slice."""
    T = _Tiles(q, k, v, params, batch_offset, block_m, block_n)
    b, hk, g = T.b, T.hk, T.g
    out5 = out.unflatten(2, (hk, g)).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, dv]
    if T.block_m >= T.sq:
        blocks = list(T.key_blocks(0, T.sq))
        if len(blocks) == 1:
            _forward_tile(T, out5, None if lse is None else lse.unflatten(1, (hk, g)), *blocks[0])
            return
    if lse is None:
        lse = torch.empty((b, T.h, T.sq), dtype=_lse_dtype(q.dtype), device=q.device)
    lse4 = lse.unflatten(1, (hk, g))  # [b, hk, g, sq]
    for m0, m1 in T.query_blocks():
        bm = m1 - m0
        qt = T.q_tile(m0, m1)
        # the running state: row_max / row_sum [b, hk, g, bm, 1], acc [b, hk, g, bm, dv]; None before the first
        # key block (no sinks), which then starts it without a rescale (the same values as from -inf / 0 / 0)
        row_max = row_sum = acc = None
        if T.sinks is not None:  # the sink is one more logit: the softmax starts from it
            row_max = T.sinks.expand(b, hk, g, bm, 1).clone()
            row_sum = torch.ones((b, hk, g, bm, 1), dtype=T.cdt, device=T.device)
            acc = torch.zeros((b, hk, g, bm, T.dv), dtype=T.cdt, device=T.device)
        for n0, n1, partial in T.key_blocks(m0, m1):
            s, _ = T.scores(qt, T.kv_tile(T.k4, n0, n1), m0, m1, n0, n1, partial)
            new_max = s.amax(dim=-1, keepdim=True)
            if row_max is not None:
                new_max = torch.maximum(row_max, new_max)
            # rows with nothing visible yet keep max -inf: shift by 0 so exp gives 0, not NaN
            shift = torch.nan_to_num(new_max, nan=math.nan, posinf=math.inf, neginf=0.0)
            p = s.sub_(shift).mul_(_LOG2E).exp2_()  # exp (exp2: see _LOG2E)
            alpha = None if row_max is None else torch.exp(row_max - shift)
            row_sum = p.sum(dim=-1, keepdim=True) if alpha is None else row_sum * alpha + p.sum(dim=-1, keepdim=True)
            if T.bh is not None:
                p.mul_(T.dropout_scale(m0, m1, n0, n1))
            pv = torch.matmul(p.view(b, hk, g * bm, n1 - n0), T.kv_tile(T.v4, n0, n1)).view(b, hk, g, bm, T.dv)
            acc = pv if alpha is None else acc.mul_(alpha).add_(pv)
            row_max = new_max
        if acc is None:  # no key block: every row sees nothing
            row_max = torch.full((b, hk, g, bm, 1), -math.inf, dtype=T.cdt, device=T.device)
            row_sum = torch.zeros((b, hk, g, bm, 1), dtype=T.cdt, device=T.device)
            acc = torch.zeros((b, hk, g, bm, T.dv), dtype=T.cdt, device=T.device)
        empty = row_sum == 0
        out5[:, :, :, m0:m1] = acc.div_(torch.where(empty, 1.0, row_sum))
        blk_lse = torch.where(empty, math.inf, row_max + torch.log(row_sum))
        lse4[:, :, :, m0:m1] = blk_lse.squeeze(-1)


def _forward_tile(T: _Tiles, out5, lse4, n0: int, n1: int, partial: bool):
    """_forward_dense where every query sees only keys [n0, n1), one tile: the softmax of whole score rows, with none
    of the online loop's rescaling, in about half its ops (what a small call costs on the host, a decoding step with
    sq = 1 among them; issue 10). Rows that see no key get out 0 and lse +inf (with sinks: lse = sink), as from the
    loop. lse4 None (no lse wanted) and no sinks: torch's safe softmax, one op (0 on rows that see no key), or its plain
    softmax where every row sees a key (``_keeps_a_key``)."""
    b, hk, g, sq = T.b, T.hk, T.g, T.sq
    s, _ = T.scores(T.q_tile(0, sq), T.kv_tile(T.k4, n0, n1), 0, sq, n0, n1, partial, merge=True)  # [b, hk, g, sq, bn]
    if lse4 is None and T.sinks is not None:
        # the sink as one more logit of each row (so none is empty): softmax's fused kernel over [s, sink], where
        # exp_ of the -inf the masks leave costs up to 10x a finite element's on the CPU machine
        p = torch.cat([s, T.sinks.expand(b, hk, g, sq, 1)], -1).softmax(-1)[..., :-1]
        row_sum = None
    elif lse4 is None and _SAFE_SOFTMAX is not None:
        mask = T.params.attn_bias  # (its rows over every key: the tile's where it spans them, dense)
        if not partial and n0 == 0 and n1 == T.sk and not T.params.is_varlen and (
                mask is None or (mask.dtype == torch.bool and _keeps_a_key(mask))):
            p = s.softmax(-1)  # every row sees a key: the safe softmax's values
        else:
            p = _SAFE_SOFTMAX(s, -1)
        row_sum = None
    else:
        row_max = s.amax(dim=-1, keepdim=True)  # [b, hk, g, sq, 1]; -inf where nothing is visible
        if T.sinks is not None:  # the sink is one more logit of the denominator
            row_max = torch.maximum(row_max, T.sinks)
        shift = torch.nan_to_num(row_max, nan=math.nan, posinf=math.inf, neginf=0.0)  # 0 where -inf: exp gives 0
        p = s.sub_(shift).mul_(_LOG2E).exp2_()  # exp (exp2: see _LOG2E)
        row_sum = p.sum(dim=-1, keepdim=True)
        if T.sinks is not None:
            row_sum.add_((T.sinks - shift).exp_())
    if T.bh is not None:
        p.mul_(T.dropout_scale(0, sq, n0, n1))
    out = torch.bmm(p.view(b * hk, g * sq, n1 - n0), T.kv_tile(T.v4, n0, n1).reshape(b * hk, n1 - n0, T.dv))
    out = out.view(b, hk, g, sq, T.dv)
    if row_sum is None:
        out5.copy_(out)
        return
    # a row's sum is >= 1 where it sees a key (its max gives exp(0) = 1) and 0 where it sees none (its out is 0):
    # clamping at 1 changes only the latter, and log(row_sum) >= 0 but there, where |log 0| gives the lse +inf
    out5.copy_(out.div_(row_sum.clamp_min(1.0)))
    if lse4 is not None:
        lse4.copy_(row_sum.log_().abs_().add_(shift).squeeze(-1))


def _backward_dense(dout, q, k, v, out, lse, dq, dk, dv, params, batch_offset, block_m, block_n, dlse=None,
                    dbias=None):
    """Writes dq [b, sq, h, d], dk [b, sk, hk, d], dv [b, sk, hk, dv] for one dense slice.

    dlse [b, h, sq] (or None): gradient of the LSE output, taken in as delta - dlse.
    dbias (or None): a zeroed compute-dtype buffer shaped like the 4-D bias view, into which
    the score gradient is summed (over the bias's broadcast dims).

    dk / dv accumulate in the compute dtype over query blocks ([b, hk, sk, *] buffers), dq
    per query block over its key blocks. With qt = q * q_fold, the score gradient
    ds = dP-term * P (* (1 - tanh^2)) gives dq = scale * ds @ k and dk = (scale / q_fold) * ds^T @ qt.
    """
    T = _Tiles(q, k, v, params, batch_offset, block_m, block_n)
    b, hk, g, cdt = T.b, T.hk, T.g, T.cdt
    do5 = dout.unflatten(2, (hk, g)).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, dv]
    o5 = out.unflatten(2, (hk, g)).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, dv]
    lse4 = lse.unflatten(1, (hk, g))  # [b, hk, g, sq]
    dlse4 = None if dlse is None else dlse.unflatten(1, (hk, g))  # [b, hk, g, sq]
    dq5 = dq.unflatten(2, (hk, g)).permute(0, 2, 3, 1, 4)  # [b, hk, g, sq, d]
    dk_acc = torch.zeros((b, hk, T.sk, T.d), dtype=cdt, device=T.device)
    dbias5 = None
    if dbias is not None:  # [b|1, hk|1, g|1, sq|1, sk|1], like T.bias
        dbias5 = dbias.unflatten(1, (hk, g)) if dbias.shape[1] != 1 else dbias.unsqueeze(1)
    dv_acc = torch.zeros((b, hk, T.sk, T.dv), dtype=cdt, device=T.device)
    for m0, m1 in T.query_blocks():
        bm = m1 - m0
        blocks = list(T.key_blocks(m0, m1))
        if not blocks:
            dq5[:, :, :, m0:m1] = 0
            continue
        qt = T.q_tile(m0, m1)  # [b, hk, g * bm, d]
        dot = do5[:, :, :, m0:m1].to(cdt)  # [b, hk, g, bm, dv]
        delta = (dot * o5[:, :, :, m0:m1].to(cdt)).sum(-1, keepdim=True)  # [b, hk, g, bm, 1]
        if dlse4 is not None:
            delta = delta - dlse4[:, :, :, m0:m1].to(cdt).unsqueeze(-1)
        row_lse = lse4[:, :, :, m0:m1].to(cdt).unsqueeze(-1)  # [b, hk, g, bm, 1]
        dot = dot.reshape(b, hk, g * bm, T.dv)
        dq_acc = torch.zeros((b, hk, g * bm, T.d), dtype=cdt, device=T.device)
        for n0, n1, partial in blocks:
            bn = n1 - n0
            kt, vt = T.kv_tile(T.k4, n0, n1), T.kv_tile(T.v4, n0, n1)
            s, t = T.scores(qt, kt, m0, m1, n0, n1, partial, keep_tanh=True)
            p = s.sub_(row_lse).mul_(_LOG2E).exp2_()  # exp: [b, hk, g, bm, bn]; 0 where hidden, empty rows (lse +inf)
            dp = torch.matmul(dot, vt.transpose(-1, -2)).view(b, hk, g, bm, bn)
            if T.bh is not None:
                z = T.dropout_scale(m0, m1, n0, n1)
                dp.mul_(z)
                p_used = z.mul_(p)
            else:
                p_used = p
            dv_acc[:, :, n0:n1] += torch.matmul(p_used.view(b, hk, g * bm, bn).transpose(-1, -2), dot)
            ds = dp.sub_(delta).mul_(p)
            if dbias5 is not None:  # dS before the softcap factor: the bias is added after softcap
                rows = slice(m0, m1) if dbias5.shape[3] != 1 else slice(None)
                cols = slice(n0, n1) if dbias5.shape[4] != 1 else slice(None)
                dims = [i for i in range(5) if dbias5.shape[i] == 1 and ds.shape[i] != 1]
                dbias5[:, :, :, rows, cols] += ds.sum(dims, keepdim=True) if dims else ds
            if t is not None:
                ds.mul_(t.square_().neg_().add_(1.0))
            ds = ds.view(b, hk, g * bm, bn)
            dq_acc += torch.matmul(ds, kt)
            dk_acc[:, :, n0:n1] += torch.matmul(ds.transpose(-1, -2), qt)
        dq5[:, :, :, m0:m1] = dq_acc.mul_(T.scale).view(b, hk, g, bm, T.d)
    dk.copy_(dk_acc.mul_(T.scale / T.q_fold).permute(0, 2, 1, 3))
    dv.copy_(dv_acc.permute(0, 2, 1, 3))


class TorchBackend(KernelBackend):
    """FlashAttention in PyTorch ops: every option, every dtype, any device.

    ``block_m`` (None: sized so one tile holds about ``TILE_ELEMS_CPU`` / ``TILE_ELEMS_GPU``
    elements over batch and heads, at least ``MIN_BLOCK_M`` rows) and ``block_n`` set the tile shape;
    tests use small ones to exercise the loops.
    """

    name = "torch"

    def __init__(self, block_m: int | None = None, block_n: int = 256):
        self.block_m = block_m
        self.block_n = block_n

    def available(self) -> str | None:
        return None

    def supports(self, problem: Problem) -> str | None:
        if problem.fp8:
            if problem.needs_grad:
                return "FP8 attention is forward-only (no backward)"
        elif problem.dtype not in _DTYPES:
            return f"dtype {problem.dtype} is not one of fp16, bf16, fp32, fp64"
        for name, d in (("headdim", problem.headdim), ("headdim_v", problem.headdim_v)):
            if not 1 <= d <= MAX_HEADDIM:
                return f"{name}={d} is outside 1..{MAX_HEADDIM}"
        return None

    def forward(self, q, k, v, params: AttnParams, slot: dict | None = None):
        """-> out like q with v's head dim, lse fp32 (fp64 for fp64 inputs; see KernelBackend for the shapes).
        Records no autograd history (grad mode off inside; set by hand: ``torch.no_grad()`` costs 2 us a call)."""
        enabled = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        try:
            return self._forward(q, k, v, params, slot is None or slot.get("lse", True))
        finally:
            torch._C._set_grad_enabled(enabled)

    def forward_heads_first(self, q, k, v, params: AttnParams, slot: dict):
        """``forward``'s out [b, sq, h, dv] of q [b, h, sq, d], k / v [b, hk, sk, d|dv] (heads first, as
        ``core.attention_heads_first`` gets them; no gradient, no lse: ``slot["lse"] is False``) where the call is
        dense and fits one tile (``_forward_tile``), read without views to the flash_attn layout and back (a decoding
        step's call: issue 10); None for the others (the caller takes views for ``forward``)."""
        if params.is_varlen or slot.get("lse", True) is not False:
            return None
        kept = slot.get("tile")  # (the plan's _Tiles without a call's tensors, its one key block or None)
        if kept is None:
            T = _Tiles(q, k, v, params, 0, self.block_m, self.block_n, heads_first=True)
            blocks = list(T.key_blocks(0, T.sq)) if T.block_m >= T.sq else []
            kept = slot["tile"] = (T.unbound(), blocks[0] if len(blocks) == 1 else None)
        elif kept[1] is not None:
            T = kept[0].bound(q, k, v, params)
        if kept[1] is None:  # more than one tile: the caller's views
            return None
        enabled = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        try:
            out = torch.empty((T.b, T.sq, T.h, T.dv), dtype=_out_dtype(q.dtype), device=q.device)
            _forward_tile(T, out.view(T.b, T.sq, T.hk, T.g, T.dv).permute(0, 2, 3, 1, 4), None, *kept[1])
            return out
        finally:
            torch._C._set_grad_enabled(enabled)

    def forward_saving(self, q, k, v, params: AttnParams, slot: dict):
        """A CPU training call's forward that keeps its probabilities for ``backward_saved`` -> (out, kept), or None
        where the call signature does not qualify (torch_saved.py)."""
        from .torch_saved import forward_saving

        return forward_saving(self, q, k, v, params, slot)

    @staticmethod
    def backward_saved(dout, out, kept) -> tuple:
        """(dq, dk, dv) of a call ``forward_saving`` served, from what it kept (torch_saved.py)."""
        from .torch_saved import backward_saved

        return backward_saved(dout, out, kept)

    def _forward(self, q, k, v, params: AttnParams, need_lse: bool):
        h, dv = q.shape[-2], v.shape[-1]
        if not params.is_varlen:
            b, sq = q.shape[0], q.shape[1]
            out = torch.empty((b, sq, h, dv), dtype=_out_dtype(q.dtype), device=q.device)
            lse = torch.empty((b, h, sq), dtype=_lse_dtype(q.dtype), device=q.device) if need_lse else None
            _forward_dense(q, k, v, out, lse, params, 0, self.block_m, self.block_n)
            return out, lse
        total_q = q.shape[0]
        out = torch.zeros((total_q, h, dv), dtype=_out_dtype(q.dtype), device=q.device)
        lse = torch.full((h, total_q), math.inf, dtype=_lse_dtype(q.dtype), device=q.device)
        for bi, (q0, q1, k0, k1) in enumerate(_segments(params)):
            if q1 == q0:
                continue
            _forward_dense(q[q0:q1][None], k[k0:k1][None], v[k0:k1][None], out[q0:q1][None],
                           lse[:, q0:q1][None], params, bi, self.block_m, self.block_n)
        return out, lse

    @torch.no_grad()
    def backward(self, dout, q, k, v, out, lse, params: AttnParams, dlse=None, slot: dict | None = None):
        """-> (dq, dk, dv) like q, k, v; zero for rows / keys that take part in nothing. With
        attn_bias or sinks: (dq, dk, dv, dbias, dsinks), dbias shaped like the 4-D bias view in
        its dtype (None unless a float bias requires grad), dsinks like sinks (None without)."""
        if dout is None:
            dout = torch.zeros_like(out)
        grads = self._backward(dout, q, k, v, out, lse, params, dlse)
        if params.attn_bias is None and params.sinks is None:
            return grads[:3]
        dsinks = None if params.sinks is None else sinks_grad(params.sinks, dout, out, lse, dlse, params.is_varlen)
        return (*grads[:3], grads[3], dsinks)

    def _backward(self, dout, q, k, v, out, lse, params: AttnParams, dlse):
        if not params.is_varlen:
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            bias = params.attn_bias
            dbias = None
            if bias is not None and bias.dtype != torch.bool and bias.requires_grad:
                dbias = torch.zeros(bias.shape, dtype=_compute_dtype(q.dtype), device=q.device)
            _backward_dense(dout, q, k, v, out, lse, dq, dk, dv, params, 0, self.block_m, self.block_n, dlse,
                            dbias)
            return dq, dk, dv, None if dbias is None else dbias.to(bias.dtype)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for bi, (q0, q1, k0, k1) in enumerate(_segments(params)):
            if q1 == q0 or k1 == k0:
                continue
            _backward_dense(dout[q0:q1][None], q[q0:q1][None], k[k0:k1][None], v[k0:k1][None],
                            out[q0:q1][None], lse[:, q0:q1][None], dq[q0:q1][None],
                            dk[k0:k1][None], dv[k0:k1][None], params, bi, self.block_m, self.block_n,
                            None if dlse is None else dlse[:, q0:q1][None])
        return dq, dk, dv, None

    def supports_decode(self, problem: Problem) -> str | None:
        return None

    def decode(self, q, k_cache, v_cache, cache_seqlens, params: AttnParams, slot=None, **cache_args):
        from . import torch_decode

        return torch_decode.decode(q, k_cache, v_cache, cache_seqlens, params, **cache_args)


def sinks_grad(sinks, dout, out, lse, dlse, varlen: bool):
    """dsinks [h] (sinks' dtype): -sum over batch and rows of exp(sink_h - lse) * (delta - dlse),
    delta = rowsum(dout * out); rows with lse = +inf (outside every sequence) add nothing.
    O(b * h * sq) work and memory. Dense lse [b, h, sq], varlen lse [h, total_q]."""
    cdt = torch.float64 if lse.dtype == torch.float64 else torch.float32
    delta = (dout.to(cdt) * out.to(cdt)).sum(-1)  # [b, sq, h] or [total_q, h]
    delta = delta.transpose(0, 1) if varlen else delta.transpose(1, 2)  # like lse
    if dlse is not None:
        delta = delta - dlse.to(cdt)
    return sinks_grad_from_delta(sinks, lse, delta, varlen)


def sinks_grad_from_delta(sinks, lse, delta, varlen: bool):
    """dsinks from the LSE and delta = rowsum(dout * out) - dlse, both like lse."""
    cdt = torch.float64 if lse.dtype == torch.float64 else torch.float32
    sink = sinks.to(cdt).view(-1, 1) if varlen else sinks.to(cdt).view(1, -1, 1)
    lse = lse.to(cdt)
    weight = torch.exp(sink - lse)  # P of the sink; 0 where lse = +inf
    term = torch.where(torch.isfinite(lse), weight * delta.to(cdt), 0.0)
    dims = (1,) if varlen else (0, 2)
    return (-term.sum(dims)).to(sinks.dtype)


def _segments(params: AttnParams):
    """(q0, q1, k0, k1) row ranges of each sequence of a varlen call."""
    cq = params.cu_seqlens_q.tolist()
    ck = params.cu_seqlens_k.tolist()
    return [(cq[i], cq[i + 1], ck[i], ck[i + 1]) for i in range(len(cq) - 1)]
