"""tests/fuzz.py's Hugging Face cases: ``integrations.hf.attention_forward`` (what ``attn_implementation="fa_amd"``
calls in every attention layer) on HF's [b, h, s, d] tensors, with HF's masks: none, a 2-D padding mask [b, sk]
(right or left padded, or with holes), a 4-D bool mask (a static cache's), or packed sequences without padding
(``cu_seq_lens_q`` / ``cu_seq_lens_k``, batch 1); sliding window, softcap and sinks (``s_aux``) as HF passes them.
A padded call takes one of two routes by its size (``PACK_MIN_SCORES``): the fuzzer takes the packed one by setting
that bound to 0 for the call (``hf_packed``), as a large call would.

Padding query rows are compared nowhere and get no gradient (a model's loss ignores them, and what they output
reaches no valid position of the next layer): the two routes differ there by design (the dense one computes them,
the packed one writes 0)."""
from __future__ import annotations

import contextlib
import dataclasses
import random

import torch
from fuzz_oracle import close, ref, slack, softcap_floor  # tests/

import flash_attention_amd as fa
from flash_attention_amd.integrations import hf

MASKS = ("none", "right", "left", "holes", "4d", "cu")


def draw_hf(c, seed: int) -> None:
    """c (a fuzz.Case of api "hf") completed in place: HF's shapes (q's tokens the last sq of sk; dv = d) and mask."""
    r = random.Random(seed + 9_000_011)
    c.dv = c.d
    c.sq = min(c.sq, c.sk)
    c.hf_mask = r.choice(MASKS)
    if c.hf_mask == "cu":  # one row of packed sequences: self-attention
        c.b, c.sq = 1, c.sk
        cuts = sorted(r.sample(range(1, c.sk), min(r.randint(0, 4), c.sk - 1)))
        c.seqlens_q = c.seqlens_k = tuple(b - a for a, b in zip([0, *cuts], [*cuts, c.sk]))
    c.hf_packed = c.hf_mask in ("right", "left", "holes") and r.random() < 0.5
    c.hf_window = r.randint(1, 40) if r.random() < 0.25 else 0
    if c.hf_mask != "cu":
        c.seqlens_q = c.seqlens_k = ()
    c.window, c.alibi, c.bias, c.dropout, c.lse, c.deterministic = (-1, -1), None, None, 0.0, False, False


def _hf_window(w: int, sk: int) -> tuple[int, int]:
    """HF's flash convention: a window of w tokens including the current one, both sides; none where it covers sk."""
    return (-1, -1) if not w or sk <= w else (w - 1, w - 1)


def _inputs(c, device, gen):
    """q, k, v as HF holds them ([b, h, s, d]: views of [b, s, h, d] projections where strided, else contiguous) and
    the leaves gradients are taken of."""
    out, leaves = [], []
    for s, heads in ((c.sq, c.h), (c.sk, c.hk), (c.sk, c.hk)):
        base = torch.randn((c.b, s, heads, c.d), generator=gen, device=device).to(c.dtype)
        if not c.strided:
            base = base.transpose(1, 2).contiguous()
        base.requires_grad_(c.grad)
        leaves.append(base)
        out.append(base.transpose(1, 2) if c.strided else base)
    return out, leaves


def _mask(c, device, gen):
    """(the mask HF passes, the visibility it means [b, 1, sq, sk] bool, the valid query rows [b, sq] bool)."""
    b, sq, sk = c.b, c.sq, c.sk
    if c.hf_mask in ("none", "cu"):
        seen = torch.ones(b, 1, sq, sk, dtype=torch.bool, device=device)
        if c.hf_mask == "cu":
            seq = torch.repeat_interleave(torch.arange(len(c.seqlens_k)), torch.tensor(c.seqlens_k)).to(device)
            seen = (seq[:, None] == seq[None, :])[None, None]
        return None, seen, torch.ones(b, sq, dtype=torch.bool, device=device)
    if c.hf_mask == "4d":
        mask = torch.rand((b, 1, sq, sk), generator=gen, device=device) < 0.75
        mask[:, :, : max(1, sq // 6)] = False  # rows that see no key
        return mask, mask, torch.ones(b, sq, dtype=torch.bool, device=device)
    keys = torch.ones(b, sk, dtype=torch.long, device=device)
    for i in range(b):
        n = int(torch.randint(1, sk + 1, (1,), generator=gen, device=device))
        if c.hf_mask == "right":
            keys[i, n:] = 0
        elif c.hf_mask == "left":
            keys[i, : sk - n] = 0
        else:
            keys[i] = (torch.rand(sk, generator=gen, device=device) < 0.8).long()
    return keys, keys.bool()[:, None, None, :].expand(b, 1, sq, sk), keys.bool()[:, sk - sq:]


@contextlib.contextmanager
def _packed(on: bool):
    """The packed route for this call (a padded call past PACK_MIN_SCORES takes it)."""
    bound = hf.PACK_MIN_SCORES
    hf.PACK_MIN_SCORES = 0 if on else bound
    try:
        yield
    finally:
        hf.PACK_MIN_SCORES = bound


def check_hf(c, device: str, backend: str) -> tuple[str, list[str]]:
    gen = torch.Generator(device=device).manual_seed(c.seed)
    (q, k, v), leaves = _inputs(c, device, gen)
    mask, seen, valid = _mask(c, device, gen)
    sinks = torch.randn(c.h, generator=gen, device=device).requires_grad_(c.grad) if c.sinks else None
    module = torch.nn.Module().eval()
    module.is_causal = c.causal
    kw = {}
    if c.hf_mask == "cu":
        cu = torch.tensor([0, *torch.tensor(c.seqlens_k).cumsum(0).tolist()], dtype=torch.int32, device=device)
        kw = dict(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(c.seqlens_q), max_length_k=max(c.seqlens_k))
    found: list[str] = []
    snap = [(t, t.detach().clone()) for t in (q, k, v, mask, sinks) if t is not None]
    extra = [sinks] if c.sinks and c.grad else []
    try:
        with fa.use_backend(None if backend == "auto" else backend), _packed(c.hf_packed):
            out, _ = hf.attention_forward(module, q, k, v, mask, dropout=0.0, scaling=c.scale,
                                          sliding_window=c.hf_window or None, softcap=c.softcap or None,
                                          is_causal=c.causal, s_aux=sinks, **kw)
            grads = None
            if c.grad:
                dout = torch.randn(out.shape, generator=gen, device=device).to(out.dtype) * valid[..., None, None]
                grads = torch.autograd.grad((out.float() * dout.float()).sum(), [*leaves, *extra])
    except fa.BackendUnavailable as e:
        return "declined", [str(e).splitlines()[0][:300]]
    except Exception as e:  # noqa: BLE001
        return "failed", [f"raised {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"]
    for i, (t, before) in enumerate(snap):
        if not torch.equal(t.detach(), before):
            found.append(f"input {i} modified by the call")
    four = c.hf_mask == "4d"  # the mask says it all: no causal flag, no window
    case = dataclasses.replace(c, causal=c.causal and not four,
                               window=(-1, -1) if four else _hf_window(c.hf_window, c.sk))
    results = {}
    for name, dtype in (("ref", torch.float64), ("lowp", c.dtype)):
        lv = [t.detach().to(dtype).requires_grad_(c.grad) for t in leaves]
        sk_ = None if sinks is None else sinks.detach().to(torch.float64 if dtype == torch.float64 else torch.float32
                                                            ).requires_grad_(c.grad)
        views = [t.transpose(1, 2) if not c.strided else t for t in lv]  # [b, s, h, d] for the oracle
        o, lse = ref(*views, case, None, seen, sk_, None)
        o = o * valid[..., None, None]
        g = None
        if c.grad:
            loss = (o * dout.to(dtype)).sum()
            if dtype == torch.float64 and c.dtype != torch.float32:  # the delta of the rounded output (fuzz.check's)
                shift = (dout.double() * (o.detach() - out.detach().double())).sum(-1).transpose(1, 2)
                loss = loss + (torch.where(torch.isfinite(lse), lse, 0.0) * shift).sum()
            g = torch.autograd.grad(loss, [*lv, *([sk_] if extra else [])])
        results[name] = (o, g)
    (o64, g64), (olp, glp) = results["ref"], results["lowp"]
    loose = slack(c, device, backend)
    close("out", out * valid[..., None, None], o64, olp, found, 1e-5, c.dtype, 2.0 * loose, softcap_floor(c, loose))
    if grads is not None:
        for n, gg, gr, gl in zip(("dq", "dk", "dv", "dsinks"), grads, g64, glp):
            close(n, gg, gr, gl, found, 1e-4, c.dtype, 3.0 * loose, softcap_floor(c, loose))
    return ("failed" if found else "ok"), found
