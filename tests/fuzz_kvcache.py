"""tests/fuzz.py's KV-cache cases: ``flash_attn_with_kvcache`` with and without appends, paged or not, with
num_splits, cache_batch_idx, cache_leftpad and rotary (interleaved or NeoX), against the float64 oracle; the caches
as the call must leave them (the new keys at cache_seqlens, rotated where rotary is on: within an ulp of the float64
rotation, as the call rotates in fp32)."""
from __future__ import annotations

import torch
from fuzz_oracle import close, ref, slack, snapshot, softcap_floor, unchanged  # tests/

import flash_attention_amd as fa


def _rotate(x, cos, sin, pos, interleaved):
    """x [s, h, d] with its first rotary dims rotated by the angles of rows pos [s] (float64 math)."""
    half = cos.shape[1]
    c, sn = cos.double()[pos][:, None, :], sin.double()[pos][:, None, :]
    xr = x[..., : 2 * half].double()
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        rot = torch.stack((x1 * c - x2 * sn, x2 * c + x1 * sn), -1).flatten(-2)
    else:
        x1, x2 = xr[..., :half], xr[..., half:]
        rot = torch.cat((x1 * c - x2 * sn, x2 * c + x1 * sn), -1)
    return torch.cat((rot, x[..., 2 * half:].double()), -1)


def check_kvcache(c, x, backend: str, compiled: bool = False) -> tuple[str, list[str]]:
    device = x.q.device
    gen = torch.Generator().manual_seed(c.seed + 2)
    lens = torch.tensor(c.cache_seqlens, dtype=torch.int32, device=device)
    k_cache, v_cache, table = x.k_cache, x.v_cache, None
    rows = list(range(c.b))
    idx = None
    if c.batch_idx:  # each sequence's row of a cache of b + 2 rows
        rows = torch.randperm(c.b + 2, generator=gen)[: c.b].tolist()
        idx = torch.tensor(rows, dtype=torch.int32, device=device)
    if c.paged:  # the caches cut into pages of c.paged rows, in a shuffled order
        per = -(-c.sk // c.paged)
        order = torch.randperm(c.b * per + 3, generator=gen)[: c.b * per]
        table = order.view(c.b, per).to(device=device, dtype=torch.int32)

        def paged(cache):
            full = torch.zeros(c.b * per + 3, c.paged, *cache.shape[2:], dtype=cache.dtype, device=device)
            rows = torch.zeros(c.b, per * c.paged, *cache.shape[2:], dtype=cache.dtype, device=device)
            rows[:, : c.sk] = cache
            full[order.to(device)] = rows.view(c.b * per, c.paged, *cache.shape[2:])
            return full
        k_cache, v_cache = paged(k_cache), paged(v_cache)
    pad = torch.tensor(c.leftpad, dtype=torch.int32, device=device) if c.leftpad else None
    cos = sin = None
    k_new64, q64 = (None if x.k_new is None else x.k_new.double()), x.q.double()
    if c.rotary:  # angles for every cache position
        theta = torch.rand(c.sk + 1, c.rotary // 2, generator=gen) * 6.3
        cos, sin = theta.cos().to(device), theta.sin().to(device)
        consecutive = c.causal or c.window != (-1, -1)
        k_new64 = torch.stack([_rotate(x.k_new[i], cos, sin, torch.arange(n, n + c.new), c.interleaved)
                               for i, n in enumerate(c.cache_seqlens)])
        q64 = torch.stack([_rotate(x.q[i], cos, sin, torch.arange(n, n + c.sq) if consecutive else
                                   torch.full((c.sq,), n), c.interleaved) for i, n in enumerate(c.cache_seqlens)])

    def slot(cache, i, p):  # the cache row view of sequence i's position p
        if table is None:
            return cache[rows[i], p]
        return cache[table[i, p // c.paged], p % c.paged]
    want_k, want_v = k_cache.clone(), v_cache.clone()  # the caches as the call must leave them
    new_k = None if k_new64 is None else k_new64.to(c.dtype)
    for i, n in enumerate(c.cache_seqlens):
        for j in range(c.new):
            slot(want_k, i, n + j).copy_(new_k[i, j])
            slot(want_v, i, n + j).copy_(x.v_new[i, j])
    snap = snapshot([x.q, x.k_new, x.v_new, lens, table, x.slopes, x.sinks, idx, pad, cos, sin])
    found: list[str] = []
    try:
        with fa.use_backend(None if backend == "auto" else backend):
            def call(q, k_cache, v_cache, k_new, v_new):
                return fa.flash_attn_with_kvcache(
                    q, k_cache, v_cache, k_new, v_new, rotary_cos=cos, rotary_sin=sin, cache_seqlens=lens,
                    cache_batch_idx=idx, cache_leftpad=pad, block_table=table, softmax_scale=c.scale, causal=c.causal,
                    window_size=c.window, softcap=c.softcap, rotary_interleaved=c.interleaved, alibi_slopes=x.slopes,
                    num_splits=c.splits, return_softmax_lse=c.lse, sinks=x.sinks)
            if compiled:  # torch.compile(fullgraph=True): a graph break raises
                torch._dynamo.reset()
                call = torch.compile(call, fullgraph=True)
            res = call(x.q, k_cache, v_cache, x.k_new, x.v_new)
    except fa.BackendUnavailable as e:
        return "declined", [str(e).splitlines()[0][:300]]
    except Exception as e:  # noqa: BLE001
        return "failed", [f"raised {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"]
    out, lse = res if c.lse else (res, None)
    unchanged(snap, found)
    if not out.is_contiguous():  # (flash_attn allocates out like q, contiguous here)
        found.append(f"out has strides {out.stride()} where q is contiguous")
    # the new keys as rotated in float64 and rounded may differ from the call's by an ulp (it rotates in fp32)
    ulp = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}.get(c.dtype, 1e-6)
    for name, got, want in (("k_cache", k_cache, want_k), ("v_cache", v_cache, want_v)):
        same = torch.equal(got, want) if not (c.rotary and name == "k_cache") else torch.allclose(
            got.double(), want.double(), rtol=ulp, atol=ulp)
        if not same:
            found.append(f"{name} after the call is not the old cache with the new keys at cache_seqlens")

    def keys(cache, i, lo, hi):  # sequence i's cache rows lo..hi-1
        if table is None:
            return cache[rows[i], lo:hi]
        return cache[table[i].long()].flatten(0, 1)[lo:hi]
    results = {}
    for name, dtype in (("ref", torch.float64), ("lowp", c.dtype)):
        outs, lses = [], []
        for i, n in enumerate(c.cache_seqlens):
            lo, hi = (c.leftpad[i] if c.leftpad else 0), n + c.new
            kk = keys(want_k, i, lo, hi).double()
            if c.rotary and hi > max(lo, n):  # the new keys unrounded (the oracle's)
                kk[max(lo, n) - lo:] = k_new64[i, max(lo, n) - n:]
            sl = None if x.slopes is None else (x.slopes if x.slopes.dim() == 1 else x.slopes[i:i + 1])
            o, lsr = ref(q64[i:i + 1].to(dtype), kk[None].to(dtype), keys(want_v, i, lo, hi)[None].to(dtype), c, sl,
                          None, x.sinks, None)
            outs.append(o)
            lses.append(lsr)
        results[name] = torch.cat(outs), torch.cat(lses)
    loose = 2.0 * slack(c, x.q.device.type, backend)
    close("out", out, results["ref"][0], results["lowp"][0], found, 1e-5, c.dtype, loose, softcap_floor(c, loose / 2))
    if lse is not None:
        close("lse", lse, results["ref"][1], results["lowp"][1], found, 1e-5, c.dtype, loose)
    return ("failed" if found else "ok"), found
