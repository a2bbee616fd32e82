"""Random calls of the public API against the float64 oracle (a differential fuzzer): ``draw`` makes a case (API
function, shapes, dtype, layout, options), ``check`` runs it through one backend (or the automatic choice) and
returns what it found. Used by tests/test_fuzz.py (a few seeded cases per run) and benchmarks/fuzz_api.py (hundreds,
on a GPU, every backend). The KV-cache cases are checked in fuzz_kvcache.py, the Hugging Face ones in fuzz_hf.py,
both against fuzz_oracle.py.

A case passes where: the call does not raise (a forced backend may decline: BackendUnavailable); out, the LSE and
every gradient are within flash_attn's rule of the float64 oracle (relative Frobenius error at most twice that of the
same plain math in the input dtype, plus 1e-4, and below 1e-2; fp32 below 1e-5, 1e-4 for gradients; gradients three
times, against the float64 gradient of a flash backward's own rounded output); a row that sees no key gives 0 and
LSE +inf (the sink where there is one), never NaN; no input changed (but the KV cache rows a call appends, which must
hold the new keys exactly); deterministic=True gives bitwise the same gradients twice. With dropout the call returns
flash_attn's S_dmask, whose sign is the keep mask the oracle then applies."""
from __future__ import annotations

import dataclasses
import random

import torch
from fuzz_hf import check_hf, draw_hf  # tests/
from fuzz_kvcache import check_kvcache
from fuzz_oracle import close, ref, slack, snapshot, softcap_floor, unchanged

import flash_attention_amd as fa

APIS = ("func", "qkvpacked", "kvpacked", "varlen", "varlen_qkvpacked", "varlen_kvpacked", "kvcache")
PACKED = ("qkvpacked", "kvpacked", "varlen_qkvpacked", "varlen_kvpacked")
HEADDIMS_CPU = (8, 16, 24, 32, 40, 59, 64)
HEADDIMS_GPU = (16, 32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 256)


@dataclasses.dataclass
class Case:
    seed: int
    api: str
    dtype: torch.dtype
    b: int
    sq: int
    sk: int
    h: int
    hk: int
    d: int
    dv: int
    causal: bool = False
    window: tuple = (-1, -1)
    softcap: float = 0.0
    alibi: str | None = None  # "1d" (h,) or "2d" (b, h)
    sinks: bool = False
    bias: str | None = None  # "float", "float_grad" or "bool"
    dropout: float = 0.0
    grad: bool = False
    lse: bool = False
    deterministic: bool = False
    scale: float | None = None
    strided: bool = False  # q, k, v views of wider tensors (non-contiguous but the last dim)
    seqlens_q: tuple = ()  # varlen: each sequence's lengths
    seqlens_k: tuple = ()
    cache_seqlens: tuple = ()  # kvcache: each cache's length before the call
    new: int = 0  # kvcache: new keys appended (0: none)
    paged: int = 0  # kvcache: page size (0: not paged)
    splits: int = 0  # kvcache: num_splits (0: the heuristic)
    batch_idx: bool = False  # kvcache: cache_batch_idx into a cache of b + 2 rows
    leftpad: tuple = ()  # kvcache: cache_leftpad, each sequence's
    rotary: int = 0  # kvcache: rotary_dim (0: none; needs new keys)
    interleaved: bool = True  # kvcache: rotary_interleaved
    hf_mask: str = ""  # hf: the mask HF passes (fuzz_hf.MASKS)
    hf_packed: bool = False  # hf: a padded call's packed route
    hf_window: int = 0  # hf: sliding_window (0: none)

    def label(self) -> str:
        opts = [f"{self.api}", str(self.dtype).removeprefix("torch."), f"b{self.b} sq{self.sq} sk{self.sk}",
                f"h{self.h}/{self.hk} d{self.d}" + (f"/{self.dv}" if self.dv != self.d else "")]
        opts += [n for n, on in (("causal", self.causal), ("sinks", self.sinks), ("grad", self.grad),
                                 ("lse", self.lse), ("det", self.deterministic), ("strided", self.strided)) if on]
        opts += [f"{n}={x}" for n, x, off in (("window", self.window, (-1, -1)), ("softcap", self.softcap, 0.0),
                                              ("alibi", self.alibi, None), ("bias", self.bias, None),
                                              ("dropout", self.dropout, 0.0), ("scale", self.scale, None),
                                              ("new", self.new, 0), ("paged", self.paged, 0),
                                              ("splits", self.splits, 0), ("batch_idx", self.batch_idx, False),
                                              ("leftpad", list(self.leftpad), []), ("rotary", self.rotary, 0),
                                              ("mask", self.hf_mask, ""), ("packed", self.hf_packed, False),
                                              ("sliding_window", self.hf_window, 0))
                 if x != off]
        if self.rotary:
            opts.append("interleaved" if self.interleaved else "neox")
        if self.seqlens_q:
            opts.append(f"lens q{list(self.seqlens_q)} k{list(self.seqlens_k)}")
        if self.cache_seqlens:
            opts.append(f"cache{list(self.cache_seqlens)}")
        return f"seed {self.seed}: " + " ".join(opts)


def draw(seed: int, device: str, plain: bool = False) -> Case:
    """One random case: sizes small enough for the float64 oracle (and, on the CPU, for seconds a case). plain: the
    same case without the options SDPA's kernels do not take (window, softcap, ALiBi, sinks, dropout, the LSE, a
    softmax scale of its own), so that the sdpa backend, which serves most real calls, is reached more often."""
    c = _draw(seed, device)
    if c.api != "kvcache" and random.Random(seed + 9_000_017).random() < 0.15:  # (drawn apart: the rest stays)
        c.api = "hf"
        draw_hf(c, seed)
    if plain:
        c = dataclasses.replace(c, window=(-1, -1), softcap=0.0, alibi=None, sinks=False, dropout=0.0, lse=False,
                                scale=None)
    return c


def _draw(seed: int, device: str) -> Case:
    r = random.Random(seed)
    gpu = device != "cpu"
    api = r.choice(APIS)
    dtype = r.choice((torch.bfloat16, torch.float16, torch.bfloat16, torch.float32) if gpu else
                     (torch.float32, torch.float32, torch.bfloat16))
    hk = r.choice((1, 1, 2, 3))
    h = hk * r.choice((1, 1, 2, 4))
    d = r.choice(HEADDIMS_GPU if gpu else HEADDIMS_CPU)
    dv = d if api in PACKED or r.random() < 0.85 else r.choice((16, 32, 64))
    top = 300 if gpu else 70
    sq, sk = r.randint(1, top), r.randint(1, top)
    c = Case(seed, api, dtype, r.randint(1, 3), sq, sk, h, hk, d, dv)
    if api.endswith("qkvpacked"):
        c.sk, c.hk = c.sq, c.h
    c.causal = r.random() < 0.45
    if r.random() < 0.3:
        c.window = (r.choice((-1, r.randint(0, 80))), r.choice((-1, r.randint(0, 80))))
    if r.random() < 0.25:
        c.softcap = round(r.uniform(2.0, 50.0), 2)
    if r.random() < 0.2:
        c.alibi = r.choice(("1d", "2d"))
    c.sinks = r.random() < 0.15
    if r.random() < 0.25:
        c.scale = round(r.uniform(0.02, 0.5), 4)
    c.strided = r.random() < 0.3
    if api == "kvcache":
        c.sk = r.randint(max(c.sq, 8), top + 40)  # the cache's capacity
        c.new = r.choice((0, c.sq)) if c.sq <= 64 else 0
        c.cache_seqlens = tuple(r.randint(1 if c.new == 0 else 0, c.sk - c.new) for _ in range(c.b))
        c.paged = r.choice((0, 0, 16, 7))
        c.alibi = c.alibi if c.alibi != "2d" else "1d"  # (b, h) slopes: test_kvcache.py's cases
        c.strided = False
        r2 = random.Random(seed + 7_000_003)  # (the options added later: the draws above stay as they were)
        c.splits = r2.choice((0, 0, 1, 3))
        c.batch_idx = not c.paged and r2.random() < 0.25
        if r2.random() < 0.2:
            c.leftpad = tuple(r2.randint(0, n) for n in c.cache_seqlens)
        if c.new and r2.random() < 0.3:
            c.rotary = r2.choice([n for n in (2, 8, 16, 32, 64) if n <= c.d])
            c.interleaved = r2.random() < 0.5
        return c
    c.grad = r.random() < 0.6
    c.lse = r.random() < 0.4
    c.deterministic = c.grad and r.random() < 0.3
    if r.random() < 0.15:
        c.dropout = r.choice((0.1, 0.3))
    if api.startswith("varlen"):
        c.seqlens_q = tuple(r.randint(0 if r.random() < 0.05 else 1, c.sq) for _ in range(c.b))
        c.seqlens_k = c.seqlens_q if api == "varlen_qkvpacked" else \
            tuple(r.randint(0 if r.random() < 0.05 else 1, c.sk) for _ in range(c.b))
    elif api != "qkvpacked" and r.random() < 0.2:
        c.bias = r.choice(("float", "float_grad", "bool"))
    return c


def _rand(shape, dtype, device, strided, gen):
    """A standard normal tensor of shape; strided: a view of a wider one (every dim but the last padded)."""
    if not strided:
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
    wide = torch.randn([n + 1 for n in shape[:-1]] + [shape[-1] + 8], generator=gen, device=device).to(dtype)
    return wide[tuple(slice(1, n + 1) for n in shape[:-1]) + (slice(0, shape[-1]),)]


class _Inputs:
    """The case's tensors (float64 copies for the oracle, the input dtype's for the plain math) and the call."""

    def __init__(self, c: Case, device: str):
        self.c, self.device = c, device
        gen = torch.Generator(device=device).manual_seed(c.seed)
        seq = c.api.startswith("varlen")
        tq, tk = (sum(c.seqlens_q), sum(c.seqlens_k)) if seq else (None, None)
        if c.api == "kvcache":
            rows = c.b + 2 if c.batch_idx else c.b
            self.q = _rand((c.b, c.sq, c.h, c.d), c.dtype, device, False, gen)
            self.k_cache = _rand((rows, c.sk, c.hk, c.d), c.dtype, device, False, gen)
            self.v_cache = _rand((rows, c.sk, c.hk, c.dv), c.dtype, device, False, gen)
            self.k_new = _rand((c.b, c.new, c.hk, c.d), c.dtype, device, False, gen) if c.new else None
            self.v_new = _rand((c.b, c.new, c.hk, c.dv), c.dtype, device, False, gen) if c.new else None
        elif seq:
            self.q = _rand((tq, c.h, c.d), c.dtype, device, c.strided, gen)
            self.k = _rand((tk, c.hk, c.d), c.dtype, device, c.strided, gen)
            self.v = _rand((tk, c.hk, c.dv), c.dtype, device, c.strided, gen)
        else:
            self.q = _rand((c.b, c.sq, c.h, c.d), c.dtype, device, c.strided, gen)
            self.k = _rand((c.b, c.sk, c.hk, c.d), c.dtype, device, c.strided, gen)
            self.v = _rand((c.b, c.sk, c.hk, c.dv), c.dtype, device, c.strided, gen)
        self.slopes = None
        if c.alibi:
            shape = (c.h,) if c.alibi == "1d" else (c.b, c.h)
            self.slopes = torch.rand(shape, generator=gen, device=device) * 0.5
        self.sinks = torch.randn(c.h, generator=gen, device=device) if c.sinks else None
        self.bias = None
        if c.bias == "bool":
            self.bias = torch.rand((c.b, 1, c.sq, c.sk), generator=gen, device=device) < 0.7
            self.bias[:, :, : max(1, c.sq // 5)] = False  # rows that see no key
        elif c.bias:
            self.bias = torch.randn((c.b, c.h, c.sq, c.sk), generator=gen, device=device).to(c.dtype)
        if c.grad:
            for t in (self.q, self.k, self.v):
                t.requires_grad_()
            if c.sinks:
                self.sinks.requires_grad_()
            if c.bias == "float_grad":
                self.bias.requires_grad_()

    def leaves(self):
        c = self.c
        out = [self.q, self.k, self.v]
        if c.sinks:
            out.append(self.sinks)
        if c.bias == "float_grad":
            out.append(self.bias)
        return out


def _leaf(t: torch.Tensor, dtype, grad: bool) -> torch.Tensor:
    return t.detach().to(dtype).requires_grad_(grad)


def _packed(c: Case, x: _Inputs):
    """The call's tensors as the API takes them: (args, leaves), leaves being what gradients are taken of."""
    q, k, v = (t.detach() for t in (x.q, x.k, x.v))
    if c.api.endswith("qkvpacked"):
        qkv = torch.stack((q, k, v), -3)
        return (qkv,), [qkv]
    if c.api in ("kvpacked", "varlen_kvpacked"):
        kv = torch.stack((k, v), -3)
        return (q, kv), [q, kv]
    return (q, k, v), [q, k, v]


def _unpack(c: Case, packed):
    """q, k, v of the API's tensors (views: gradients reach the packed leaves)."""
    if c.api.endswith("qkvpacked"):
        return packed[0].unbind(-3)
    if c.api in ("kvpacked", "varlen_kvpacked"):
        return (packed[0], *packed[1].unbind(-3))
    return packed


def _caller(c: Case, x: _Inputs, cu, compiled: bool):
    """The case's API call as a function of the tensors it takes (packed) -> (out, lse or None, S_dmask or None);
    compiled: through torch.compile(fullgraph=True) (a graph break raises)."""
    probs = c.lse or c.dropout > 0
    kw = dict(dropout_p=c.dropout, softmax_scale=c.scale, causal=c.causal, window_size=c.window, softcap=c.softcap,
              alibi_slopes=x.slopes, deterministic=c.deterministic, return_attn_probs=probs, sinks=x.sinks)

    def call(*packed):
        if c.api == "func":
            res = fa.flash_attn_func(*packed, attn_bias=x.bias, **kw)
        elif c.api == "qkvpacked":
            res = fa.flash_attn_qkvpacked_func(*packed, **kw)
        elif c.api == "kvpacked":
            res = fa.flash_attn_kvpacked_func(*packed, attn_bias=x.bias, **kw)
        elif c.api == "varlen":
            res = fa.flash_attn_varlen_func(*packed, cu[0], cu[1], max(c.seqlens_q), max(c.seqlens_k), **kw)
        elif c.api == "varlen_qkvpacked":
            res = fa.flash_attn_varlen_qkvpacked_func(*packed, cu[0], max(c.seqlens_q), **kw)
        else:
            res = fa.flash_attn_varlen_kvpacked_func(*packed, cu[0], cu[1], max(c.seqlens_q), max(c.seqlens_k), **kw)
        return res if probs else (res, None, None)
    if compiled:
        torch._dynamo.reset()  # (each case its own graph: no recompile limit across cases)
        return torch.compile(call, fullgraph=True)
    return call


def _oracle(c: Case, x: _Inputs, qkv, keep, dtype):
    """out, lse of the case (the API's layout) in dtype from q, k, v (the API's layout)."""
    q, k, v = (t.to(dtype) for t in qkv)
    slopes = x.slopes
    sinks = None if x.sinks is None else x.sinks
    bias = x.bias if x.bias is None or x.bias.dtype == torch.bool else x.bias.to(dtype)
    if not c.api.startswith("varlen"):
        return ref(q, k, v, c, slopes, bias, sinks, keep)
    outs, lses, (oq, ok) = [], [], (0, 0)
    for i, (lq, lk) in enumerate(zip(c.seqlens_q, c.seqlens_k)):
        sl = None if slopes is None else (slopes if slopes.dim() == 1 else slopes[i:i + 1])
        kp = None if keep is None else keep[i:i + 1, :, :lq, :lk]
        o, lse = ref(q[None, oq:oq + lq], k[None, ok:ok + lk], v[None, ok:ok + lk], c, sl, None, sinks, kp)
        outs.append(o[0])
        lses.append(lse[0])
        oq, ok = oq + lq, ok + lk
    return torch.cat(outs, 0), torch.cat(lses, 1)


def _loss(out, lse, dout, dlse):
    loss = (out.float() * dout.float()).sum() if out.dtype != torch.float64 else (out * dout.double()).sum()
    if lse is not None and dlse is not None:
        loss = loss + (torch.where(torch.isfinite(lse), lse, 0.0) * dlse.to(lse.dtype)).sum()
    return loss


def check(c: Case, device: str, backend: str = "auto", compiled: bool = False) -> tuple[str, list[str]]:
    """Runs the case through backend ("auto": the dispatcher's choice) -> (status, findings): status "ok",
    "declined" (a forced backend that cannot serve the call said so; findings hold its reason) or "failed"."""
    if c.api == "hf":
        return check_hf(c, device, backend)
    x = _Inputs(c, device)
    if c.api == "kvcache":
        return check_kvcache(c, x, backend, compiled)
    seq = c.api.startswith("varlen")
    cu = None
    if seq:
        cu = tuple(torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
                   for lens in (c.seqlens_q, c.seqlens_k))
    packed, leaves = _packed(c, x)
    leaves = [_leaf(t, c.dtype, c.grad) for t in leaves]
    if c.strided:  # views of wider tensors again (the packed leaves are contiguous)
        packed = [(torch.empty(*[n + 1 for n in t.shape[:-1]], t.shape[-1] + 8, device=device, dtype=t.dtype)
                   [tuple(slice(1, n + 1) for n in t.shape[:-1]) + (slice(0, t.shape[-1]),)]) for t in leaves]
        for p, lf in zip(packed, leaves):
            p.copy_(lf.detach())
        packed = [p.requires_grad_(c.grad) for p in packed]
        leaves = packed
    else:
        packed = leaves
    extra = [t for t in (x.sinks, x.bias) if t is not None and t.requires_grad]
    snap = snapshot([*packed, x.slopes, x.sinks, x.bias, *(cu or ())])
    found: list[str] = []
    try:
        with fa.use_backend(None if backend == "auto" else backend):
            call = _caller(c, x, cu, compiled)
            out, lse, smask = call(*packed)
            grads = None
            if c.grad:
                gen = torch.Generator(device=device).manual_seed(c.seed + 1)
                dout = torch.randn(out.shape, generator=gen, device=device).to(out.dtype)
                dlse = torch.randn(lse.shape, generator=gen, device=device) if lse is not None else None
                grads = torch.autograd.grad(_loss(out, lse, dout, dlse), [*leaves, *extra])
                if c.deterministic and c.dropout == 0:  # the same call again: bitwise the same gradients
                    out2, lse2, _ = call(*packed)
                    again = torch.autograd.grad(_loss(out2, lse2, dout, dlse), [*leaves, *extra])
                    if not all(torch.equal(a, b) for a, b in zip(grads, again)):
                        found.append("deterministic=True: a second backward differs")
    except fa.BackendUnavailable as e:
        return "declined", [str(e).splitlines()[0][:300]]
    except Exception as e:  # noqa: BLE001 (every other exception is a finding)
        return "failed", [f"raised {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"]
    unchanged(snap, found)
    if packed[0].is_contiguous() and c.api in ("func", "kvpacked", "varlen", "varlen_kvpacked") \
            and not out.is_contiguous():  # (flash_attn allocates out like q)
        found.append(f"out has strides {out.stride()} where q is contiguous")
    keep = None if c.dropout == 0 else ~torch.signbit(smask)
    if keep is not None and not seq:
        keep = keep[:, :, : c.sq, : c.sk]
    results = {}
    for name, dtype in (("ref", torch.float64), ("lowp", c.dtype)):
        lv = [_leaf(t, dtype, c.grad) for t in leaves]
        ex = [_leaf(t, dtype if dtype == torch.float64 else t.dtype, True) for t in extra]
        saved = (x.sinks, x.bias)
        if c.sinks and c.grad:
            x.sinks = ex[0]
        if c.bias == "float_grad" and c.grad:
            x.bias = ex[-1]
        o, lse_r = _oracle(c, x, _unpack(c, lv), keep, dtype)
        x.sinks, x.bias = saved
        g = None
        if c.grad:
            loss = _loss(o, lse_r if lse is not None else None, dout.to(dtype), dlse)
            if dtype == torch.float64 and c.dtype != torch.float32:
                # the gradient a flash backward computes exactly: its rows' dO . O (delta) read the output it
                # returned, rounded to the input dtype, where the plain math's softmax has its own values. A row's
                # delta enters the scores' gradient as its LSE's weight does, so a constant weight of (the exact
                # delta - the rounded one) on the LSE moves the oracle's delta to the rounded one.
                shift = (dout.double() * (o.detach() - out.detach().double())).sum(-1)  # [b, sq, h] / [total, h]
                shift = shift.transpose(0, 1) if seq else shift.transpose(1, 2)  # as the LSE
                loss = loss + (torch.where(torch.isfinite(lse_r), lse_r, 0.0) * shift).sum()
            g = torch.autograd.grad(loss, [*lv, *ex], allow_unused=True)
        results[name] = (o, lse_r, g)
    (o64, l64, g64), (olp, llp, glp) = results["ref"], results["lowp"]
    loose = slack(c, device, backend)
    close("out", out, o64, olp, found, 1e-5, c.dtype, 2.0 * loose, softcap_floor(c, loose))
    if lse is not None:
        close("lse", lse, l64, llp, found, 1e-5, c.dtype, 2.0 * loose)
    if grads is not None:
        names = [f"d{i}" for i in range(len(leaves))] + (["dsinks"] if c.sinks else []) + \
            (["dbias"] if c.bias == "float_grad" else [])  # (the leaves' order)
        for n, gg, gr, gl in zip(names, grads, g64, glp):
            gr = gr if gr is not None else torch.zeros_like(gg, dtype=torch.float64)
            gl = gl if gl is not None else torch.zeros_like(gg)
            close(n, gg, gr, gl, found, 1e-4, c.dtype, 3.0 * loose, softcap_floor(c, loose))
    return ("failed" if found else "ok"), found
