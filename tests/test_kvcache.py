"""``flash_attn_with_kvcache`` against the float64 oracle, on the torch path and the Triton
decode kernels (Triton's interpreter on CPU, the real kernels on a GPU).

Each case builds a cache (contiguous, contiguous with cache_batch_idx, or paged with a
shuffled block table), appends new k/v, optionally with rotary, and checks:
- the cache in place: the appended rows hold the (rotated) new k/v, every other element
  is bit-for-bit untouched (expected state built with plain Python loops);
- out and lse against ``reference.attention_ref`` on each sequence's gathered keys,
  with q rotated by an independent float64 rotary.
Triton outputs and partial buffers are allocated NaN-poisoned (launch/decode._empty).
"""
from __future__ import annotations

import math

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import config
from flash_attention_amd.dispatch import use_backend
from flash_attention_amd.kvcache import flash_attn_with_kvcache
from flash_attention_amd.reference import attention_ref
from helpers import DEVICE, HAS_TRITON, assert_matches, rel_err

BACKENDS = ["torch"] + (["triton"] if HAS_TRITON and (DEVICE == "cuda" or config.triton_interpret()) else [])


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    if "triton" not in BACKENDS:
        return
    from flash_attention_amd.launch import decode as launch_decode

    monkeypatch.setattr(launch_decode, "_empty",
                        lambda shape, dtype, device: torch.full(shape, math.nan, dtype=dtype, device=device))


# ------------------------------------------------------------------ independent reference pieces

def rotate_ref(x, cos, sin, pos, interleaved):
    """float64 RoPE of x [b, s, h, d] at integer positions pos [b][s] (plain loops over b, s)."""
    x = x.double().clone()
    half = cos.shape[1]
    for bi in range(x.shape[0]):
        for si in range(x.shape[1]):
            c, s = cos[pos[bi][si]].double(), sin[pos[bi][si]].double()
            if interleaved:
                z = torch.view_as_complex(x[bi, si, :, :2 * half].reshape(x.shape[2], half, 2).contiguous())
                z = z * torch.complex(c, s)
                x[bi, si, :, :2 * half] = torch.view_as_real(z).reshape(x.shape[2], 2 * half)
            else:
                a, b_ = x[bi, si, :, :half].clone(), x[bi, si, :, half:2 * half].clone()
                x[bi, si, :, :half] = a * c - b_ * s
                x[bi, si, :, half:2 * half] = b_ * c + a * s
    return x


def make_case(*, b=3, sq=1, h=4, hk=1, d=32, kind="contig", page=16, cap=48, seqlens=None,
              sn=1, leftpad=None, dtype=torch.float32, rotary=None, rotary_dim=None, seed=0):
    """Inputs of one call plus the physical location of every logical cache position."""
    g = torch.Generator().manual_seed(seed)
    if seqlens is None:  # empty, ragged, and full after the append
        seqlens = (0, 17, -(-cap // page) * page - sn if kind == "paged" else cap - sn)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    case = dict(q=rnd(b, sq, h, d), seqlens=list(seqlens), sn=sn, kind=kind, dtype=dtype)
    if kind == "paged":
        max_blocks = -(-cap // page)
        num_blocks = b * max_blocks + 3
        table = torch.randperm(num_blocks, generator=g)[: b * max_blocks].view(b, max_blocks).to(torch.int32)
        case["k_cache"], case["v_cache"] = rnd(num_blocks, page, hk, d), rnd(num_blocks, page, hk, d)
        case["block_table"] = table
        case["loc"] = lambda bi, p: (int(table[bi, p // page]), p % page)
        cap = max_blocks * page
    elif kind == "batch_idx":
        rows = torch.randperm(b + 2, generator=g)[:b].to(torch.int32)
        case["k_cache"], case["v_cache"] = rnd(b + 2, cap, hk, d), rnd(b + 2, cap, hk, d)
        case["cache_batch_idx"] = rows
        case["loc"] = lambda bi, p: (int(rows[bi]), p)
    else:
        case["k_cache"], case["v_cache"] = rnd(b, cap, hk, d), rnd(b, cap, hk, d)
        case["loc"] = lambda bi, p: (bi, p)
    case["cap"] = cap
    if sn:
        case["k"], case["v"] = rnd(b, sn, hk, d), rnd(b, sn, hk, d)
    if leftpad is not None:
        case["cache_leftpad"] = torch.tensor(leftpad, dtype=torch.int32)
    if rotary is not None:
        rd = rotary_dim or d
        angle = torch.rand(cap + sq, rd // 2, generator=g) * 2 * math.pi
        case["rotary_cos"], case["rotary_sin"] = angle.cos().to(dtype), angle.sin().to(dtype)
        case["rotary_interleaved"] = rotary == "interleaved"
    return case


def expected(case, causal, window_size, softcap, alibi):
    """(expected k_cache, v_cache, written mask, out64, lse64, out_lowp) by plain loops."""
    q, kc, vc, sn = case["q"], case["k_cache"].clone(), case["v_cache"].clone(), case["sn"]
    b, sq = q.shape[:2]
    written = torch.zeros(kc.shape[:2], dtype=torch.bool)
    seqlens = case["seqlens"]
    q64 = q.double()
    k_new = case.get("k")
    if "rotary_cos" in case:
        cos, sin, il = case["rotary_cos"], case["rotary_sin"], case["rotary_interleaved"]
        local = causal or window_size != (-1, -1)
        q64 = rotate_ref(q, cos, sin, [[s + (i if local else 0) for i in range(sq)] for s in seqlens], il)
        k_new = rotate_ref(k_new, cos, sin, [[s + i for i in range(sn)] for s in seqlens], il).to(q.dtype)
    for bi in range(b):
        for i in range(sn):
            r, p = case["loc"](bi, seqlens[bi] + i)
            kc[r, p], vc[r, p] = k_new[bi, i], case["v"][bi, i]
            written[r, p] = True
    outs, lses, lows = [], [], []
    for bi in range(b):
        start = 0 if "cache_leftpad" not in case else int(case["cache_leftpad"][bi])
        rows = [case["loc"](bi, p) for p in range(start, seqlens[bi] + sn)]
        keys = torch.stack([kc[r, p] for r, p in rows])[None] if rows else kc[:1, :0]
        vals = torch.stack([vc[r, p] for r, p in rows])[None] if rows else vc[:1, :0]
        kw = dict(causal=causal, window_size=window_size, softcap=softcap, alibi_slopes=alibi, batch_index=bi)
        o, lse_ref = attention_ref(q64[bi:bi + 1], keys.double(), vals.double(),
                             **{**kw, "alibi_slopes": None if alibi is None else alibi.double()})
        outs.append(o)
        lses.append(lse_ref)
        if q.dtype != torch.float32:
            lows.append(attention_ref(q64[bi:bi + 1].to(q.dtype), keys, vals, **kw)[0])
    return kc, vc, written, torch.cat(outs), torch.cat(lses), (torch.cat(lows) if lows else None)


def run(case, backend, causal=False, window_size=(-1, -1), softcap=0.0, alibi=None, num_splits=0,
        seqlens_as_int=False, device=DEVICE):
    """Call the API on copies of the case's tensors (moved to device) -> (out, lse, k_cache, v_cache)."""
    def dev(t):
        return None if t is None else t.clone().to(device)

    kc, vc = dev(case["k_cache"]), dev(case["v_cache"])
    seqlens = case["seqlens"][0] if seqlens_as_int else torch.tensor(case["seqlens"], dtype=torch.int32, device=device)
    kw = {n: dev(case.get(n)) for n in ("k", "v", "rotary_cos", "rotary_sin", "cache_batch_idx",
                                          "cache_leftpad", "block_table")}
    with use_backend(backend):
        out, lse = flash_attn_with_kvcache(
            dev(case["q"]), kc, vc, cache_seqlens=seqlens, causal=causal, window_size=window_size,
            softcap=softcap, alibi_slopes=dev(alibi), num_splits=num_splits, return_softmax_lse=True,
            rotary_interleaved=case.get("rotary_interleaved", True), **kw)
    return out.cpu(), lse.cpu(), kc.cpu(), vc.cpu()


def check(case, backend, causal=False, window_size=(-1, -1), softcap=0.0, alibi=None, num_splits=0, **kw):
    out, lse, kc, vc = run(case, backend, causal, window_size, softcap, alibi, num_splits, **kw)
    kc_ref, vc_ref, written, out64, lse64, low = expected(case, causal, window_size, softcap, alibi)
    # the cache: untouched outside the appended rows, the appended rows hold the (rotated) new k/v
    assert torch.equal(kc[~written], kc_ref[~written]) and torch.equal(vc, vc_ref), "cache changed outside the append"
    tol = 1e-6 if case["dtype"] == torch.float32 else 1e-2
    torch.testing.assert_close(kc[written], kc_ref[written], rtol=tol, atol=tol)
    assert out.shape == case["q"].shape and out.dtype == case["dtype"] and lse.dtype == torch.float32
    assert not out.isnan().any() and not lse.isnan().any()
    assert_matches(out, out64, low, name=f"out[{backend}]")
    assert rel_err(lse, lse64) < (1e-5 if case["dtype"] == torch.float32 else 2e-3), f"lse[{backend}]"
    return out, lse


# ------------------------------------------------------------------ correctness

CASES = {
    # name: (make_case kwargs, call kwargs)
    "contig-gqa4": (dict(h=4, hk=1), dict()),
    "contig-sq4-causal-gqa1": (dict(sq=4, h=2, hk=2, seqlens=(0, 30, 44), sn=4), dict(causal=True)),
    "contig-full-noappend": (dict(h=8, hk=1, sn=0, seqlens=(48, 0, 21)), dict(causal=True)),
    "batch_idx-leftpad-gqa8": (dict(kind="batch_idx", h=8, hk=1, sq=2, leftpad=(0, 5, 40)), dict(causal=True)),
    "paged16-window": (dict(kind="paged", page=16, sq=4, sn=2, h=4, hk=2, seqlens=(3, 33, 46)),
                       dict(causal=True, window_size=(8, 0))),
    "paged1-alibi": (dict(kind="paged", page=1, cap=40, d=16, seqlens=(0, 1, 39)), dict(causal=True, alibi=True)),
    "paged48-softcap-d40": (dict(kind="paged", page=48, cap=96, d=40, h=2, hk=1, seqlens=(95, 50, 0)),
                            dict(softcap=5.0)),
    "paged16-leftpad-sq4": (dict(kind="paged", page=16, sq=4, sn=2, leftpad=(0, 10, 46)), dict(causal=True)),
    "window-noncausal-alibi2d": (dict(sq=3, h=4, hk=2, sn=2, seqlens=(5, 20, 46)),
                                 dict(window_size=(6, 1), alibi="2d")),
    "rotary-interleaved-causal": (dict(sq=3, sn=3, h=4, hk=2, seqlens=(0, 12, 45), rotary="interleaved"),
                                  dict(causal=True)),
    "rotary-neox-partial-noncausal": (dict(kind="paged", page=16, sq=2, sn=2, d=32, rotary="neox",
                                           rotary_dim=16, seqlens=(4, 0, 30)), dict()),
    "rotary-neox-leftpad-window": (dict(kind="batch_idx", sq=2, sn=1, rotary="neox", leftpad=(2, 0, 9),
                                        seqlens=(8, 3, 40)), dict(window_size=(5, -1))),
    "bf16-paged16-gqa4": (dict(kind="paged", page=16, dtype=torch.bfloat16, h=8, hk=2, sn=2, sq=2), dict(causal=True)),
    "fp16-rotary-softcap": (dict(dtype=torch.float16, rotary="interleaved", sq=2, sn=2, seqlens=(1, 9, 40)),
                            dict(causal=True, softcap=20.0)),
}


def _alibi(which, case):
    h, b = case["q"].shape[2], case["q"].shape[0]
    if which == "2d":
        return torch.rand(b, h) * 0.5
    return torch.rand(h) * 0.5 if which else None


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs triton")
@pytest.mark.parametrize("kind", ["contig", "paged"])
@pytest.mark.parametrize("num_splits", [1, 3])
def test_triton_long_append(kind, num_splits):
    """A chunk of prompt appended in one call (37 new tokens: more than two key tiles): the split kernel
    reads the new keys from k / v and its programs share out writing them (split s the tiles s, s + S,
    ...); the cache and the outputs match the reference, with and without a left pad; the output
    without the LSE (the kernels skip storing it) equals the output with it."""
    case = make_case(kind=kind, page=16, cap=96, sq=37, sn=37, h=4, hk=2, seqlens=(0, 20, 59),
                     leftpad=(0, 3, 11))
    out, _ = check(case, "triton", causal=True, num_splits=num_splits)
    kw = {n: case.get(n) for n in ("k", "v", "cache_leftpad", "block_table")}
    kc, vc = case["k_cache"].clone().to(DEVICE), case["v_cache"].clone().to(DEVICE)
    with use_backend("triton"):
        alone = flash_attn_with_kvcache(case["q"].to(DEVICE), kc, vc,
                                        cache_seqlens=torch.tensor(case["seqlens"], dtype=torch.int32).to(DEVICE),
                                        causal=True, num_splits=num_splits,
                                        **{n: (t.to(DEVICE) if t is not None else None) for n, t in kw.items()})
    assert isinstance(alone, torch.Tensor) and torch.equal(alone.cpu(), out.cpu())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_kvcache_matches_reference(name, backend):
    case_kw, call_kw = CASES[name]
    case = make_case(**case_kw)
    call_kw = dict(call_kw)
    call_kw["alibi"] = _alibi(call_kw.get("alibi"), case)
    check(case, backend, **call_kw)


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs triton")
@pytest.mark.parametrize("name", list(CASES))
def test_repeated_calls_replay_the_planned_launch(name, monkeypatch):
    """A repeated call signature (its value checks off, as on a GPU outside debug mode) goes straight to the
    backend's planned launch (``_Plan.replay``, no ``_run``) where every call of the signature allows it:
    no rotary, an int32 cache_seqlens tensor, no per-call alibi; each call still matches the reference, the
    appended cache rows included. Signatures that do not qualify keep ``_run`` on every call."""
    from flash_attention_amd import kvcache

    monkeypatch.setattr(kvcache, "_reads_values_ok", lambda device, debug=None: False)
    runs = []
    real_run = kvcache._run
    monkeypatch.setattr(kvcache, "_run", lambda *a, **k: runs.append(1) or real_run(*a, **k))
    kvcache._plans.clear()
    case_kw, call_kw = CASES[name]
    case = make_case(**case_kw)
    call_kw = dict(call_kw)
    call_kw["alibi"] = _alibi(call_kw.get("alibi"), case)
    for _ in range(3):
        check(case, "triton", **call_kw)
    replays = "rotary" not in name and call_kw["alibi"] is None
    assert len(runs) == (1 if replays else 3), (name, len(runs))
    kvcache._plans.clear()


@pytest.fixture
def merge_in_split(request, monkeypatch):
    """Splits merged by the split kernel itself (True: NVIDIA's and the interpreter's path) or by the
    combine kernel (False: AMD's path, and head-dim chunks); the plans are made afresh."""
    from flash_attention_amd import kvcache
    from flash_attention_amd.launch import decode as launch_decode

    monkeypatch.setattr(launch_decode, "MERGE_IN_SPLIT", request.param)
    kvcache._plans.clear()
    yield request.param
    kvcache._plans.clear()


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs triton")
@pytest.mark.parametrize("merge_in_split", [True, False], indirect=True)
@pytest.mark.parametrize("num_splits", [1, 2, 0, 9])
def test_triton_splits(num_splits, merge_in_split):
    """Splits 1 (no combine), 2, auto and many (more than some sequences have tiles: empty splits),
    merged in the split kernel and by the combine kernel."""
    case = make_case(kind="paged", page=16, cap=64, sq=2, h=8, hk=2, sn=1, seqlens=(0, 16, 63))
    out, lse = check(case, "triton", causal=True, num_splits=num_splits)
    base, base_lse = run(case, "torch", causal=True)[:2]
    assert rel_err(out, base) < 1e-5 and rel_err(lse, base_lse) < 1e-5


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs triton")
@pytest.mark.parametrize("merge_in_split", [True, False], indirect=True)
def test_split_merge_launches_and_workspace(monkeypatch, merge_in_split):
    """A split call launches the split kernel alone when it merges its splits (else also the combine
    kernel, and always above MERGE_MAX_SPLITS splits); calls of several plans and split counts, with
    and without sinks, share the stream's workspace (stale partials of the call before in it) and
    leave its counters at 0."""
    from flash_attention_amd.launch import decode as launch_decode
    from flash_attention_amd.launch import runtime
    from flash_attention_amd.reference import attention_ref

    names = []
    launch = runtime.KernelSlot.launch

    def spy(self, *args, **kw):
        names.append(self.fn.__name__)
        return launch(self, *args, **kw)

    monkeypatch.setattr(runtime.KernelSlot, "launch", spy)
    dt = torch.float32 if DEVICE == "cpu" else torch.bfloat16
    many = launch_decode.MERGE_MAX_SPLITS + 1
    for b, sq, h, hk, splits, with_sinks in ((3, 1, 4, 2, 3, False), (2, 3, 6, 3, 5, True), (3, 1, 4, 2, 2, True),
                                             (2, 1, 4, 2, many, True), (3, 1, 4, 2, 3, True)):
        d, cap = 16, 50
        kc, vc = (torch.randn(b, cap, hk, d, device=DEVICE, dtype=dt) for _ in range(2))
        q = torch.randn(b, sq, h, d, device=DEVICE, dtype=dt)
        seqlens = torch.randint(sq, cap + 1, (b,), dtype=torch.int32, device=DEVICE)
        sinks = torch.randn(h, device=DEVICE) if with_sinks else None
        names.clear()
        with use_backend("triton"):
            out, lse = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True, num_splits=splits,
                                               return_softmax_lse=True, sinks=sinks)
        expect = ["decode_split_kernel"] + ([] if merge_in_split and splits < many else ["decode_combine_kernel"])
        assert names == expect
        for bi in range(b):
            n = int(seqlens[bi])
            ro, rl = attention_ref(q[bi:bi + 1].double(), kc[bi:bi + 1, :n].double(), vc[bi:bi + 1, :n].double(),
                                   causal=True, sinks=None if sinks is None else sinks.double())
            assert rel_err(out[bi:bi + 1].double(), ro) < (1e-5 if dt == torch.float32 else 1e-2)
            assert rel_err(lse[bi:bi + 1].double(), rl) < 1e-5
    counters = [ws[1] for ws in launch_decode._workspaces.values()]
    assert counters if merge_in_split else True
    assert all(int(c.abs().sum()) == 0 for c in counters)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_rows(backend):
    """Empty caches, and causal rows that see no key (sq > seqlen_k): out 0, lse +inf, no NaN."""
    case = make_case(sq=4, sn=2, seqlens=(0, 0, 1), h=2, hk=1)
    out, lse, _, _ = run(case, backend, causal=True)
    assert torch.equal(out[0, :2], torch.zeros_like(out[0, :2])) and torch.isinf(lse[0, :, :2]).all()
    assert torch.isfinite(lse[0, :, 2:]).all()
    check(case, backend, causal=True)
    empty = make_case(sn=0, seqlens=(0, 0, 0))
    out, lse, _, _ = run(empty, backend)
    assert torch.equal(out, torch.zeros_like(out)) and (lse == math.inf).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_seqlens_and_out_only(backend):
    """cache_seqlens as a Python int; return_softmax_lse=False returns the tensor alone."""
    case = make_case(seqlens=(20, 20, 20), sn=2, rotary="interleaved", sq=2)
    check(case, backend, causal=True, seqlens_as_int=True)
    with use_backend(backend):
        out = flash_attn_with_kvcache(case["q"].to(DEVICE), case["k_cache"].to(DEVICE), case["v_cache"].to(DEVICE),
                                      cache_seqlens=5)
    assert isinstance(out, torch.Tensor) and out.shape == case["q"].shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_is_contiguous(backend):
    """out comes contiguous, as flash_attn's does (callers view it as [b, sq, h * dv]): the torch backend's einsum laid
    several query rows out heads first until session 57."""
    case = make_case(seqlens=(20, 9, 30), sn=0, sq=4, h=3, hk=3)
    with use_backend(backend):
        out, lse = flash_attn_with_kvcache(case["q"].to(DEVICE), case["k_cache"].to(DEVICE),
                                           case["v_cache"].to(DEVICE), cache_seqlens=9, causal=True,
                                           return_softmax_lse=True)
    assert out.is_contiguous() and lse.is_contiguous(), (out.stride(), lse.stride())
    assert out.view(out.shape[0], out.shape[1], -1).shape[-1] == out.shape[2] * out.shape[3]


def test_inputs_not_modified():
    case = make_case(sq=2, sn=2, rotary="neox")
    saved = {n: case[n].clone() for n in ("q", "k", "v", "rotary_cos")}
    run(case, "torch", causal=True)
    for n, t in saved.items():
        assert torch.equal(case[n], t), n


def test_noncontiguous_q_and_new_kv():
    """q and k/v strided (last dim contiguous, or not at all) give the same result."""
    case = make_case(sq=2, sn=2, h=4, hk=2)
    base = run(case, "torch", causal=True)[0]
    strided = dict(case)
    strided["q"] = case["q"].transpose(1, 2).contiguous().transpose(1, 2)
    strided["k"] = case["k"].transpose(0, 3).contiguous().transpose(0, 3)  # last dim strided
    for backend in BACKENDS:
        assert rel_err(run(strided, backend, causal=True)[0], base) < 1e-5


# ------------------------------------------------------------------ errors

def _err_inputs():
    b, h, hk, d, cap = 2, 4, 2, 16, 8
    return dict(q=torch.randn(b, 1, h, d), k_cache=torch.randn(b, cap, hk, d), v_cache=torch.randn(b, cap, hk, d),
                k=torch.randn(b, 1, hk, d), v=torch.randn(b, 1, hk, d),
                cache_seqlens=torch.tensor([3, 7], dtype=torch.int32))


def _paged_inputs():
    kw = _err_inputs()
    kw["k_cache"], kw["v_cache"] = torch.randn(5, 4, 2, 16), torch.randn(5, 4, 2, 16)
    kw["block_table"] = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    return kw


ERRORS = [
    ("q 3-D", lambda kw: kw.update(q=kw["q"][0]), ValueError, "q must have 4 dims"),
    ("q int", lambda kw: kw.update(q=kw["q"].int()), TypeError, "q has dtype"),
    ("cache dtype", lambda kw: kw.update(k_cache=kw["k_cache"].half()), TypeError, "k_cache has dtype"),
    ("heads", lambda kw: kw.update(q=torch.randn(2, 1, 3, 16)), ValueError, "divisible"),
    ("headdim mismatch", lambda kw: kw.update(q=torch.randn(2, 1, 4, 8)), ValueError, "head dim"),
    ("headdim too big", lambda kw: kw.update(q=torch.randn(2, 1, 4, 600), k_cache=torch.randn(2, 8, 2, 600),
                                             v_cache=torch.randn(2, 8, 2, 600), k=None, v=None),
     ValueError, "headdim is 600"),
    ("window", lambda kw: kw.update(window_size=(-2, 0)), ValueError, "window_size"),
    ("window type", lambda kw: kw.update(window_size=3), ValueError, "window_size"),
    ("softcap<0", lambda kw: kw.update(softcap=-1.0), ValueError, "softcap"),
    ("scale nan", lambda kw: kw.update(softmax_scale=float("nan")), ValueError, "softmax_scale"),
    ("num_splits", lambda kw: kw.update(num_splits=-1), ValueError, "num_splits"),
    # unhashable scalars: named by validation, not a TypeError from the plan cache's dict
    ("scale list", lambda kw: kw.update(softmax_scale=[0.1]), ValueError, "softmax_scale is [0.1]"),
    ("softcap list", lambda kw: kw.update(softcap=[1.0]), ValueError, "softcap is [1.0]"),
    ("num_splits list", lambda kw: kw.update(num_splits=[2]), ValueError, "num_splits is [2]"),
    ("window list", lambda kw: kw.update(window_size=(1, [2])), ValueError, "window_size is (1, [2])"),
    ("causal list", lambda kw: kw.update(causal=[True]), TypeError, "causal is [True]"),
    ("cache room", lambda kw: kw.update(cache_seqlens=torch.tensor([3, 8], dtype=torch.int32)),
     ValueError, "cache_seqlens[1] is 8"),
    ("negative seqlens", lambda kw: kw.update(cache_seqlens=torch.tensor([-1, 2], dtype=torch.int32)),
     ValueError, "cache_seqlens holds -1"),
    ("int seqlens room", lambda kw: kw.update(cache_seqlens=8), ValueError, "cache_seqlens is 8"),
    ("seqlens dtype", lambda kw: kw.update(cache_seqlens=kw["cache_seqlens"].float()),
     TypeError, "cache_seqlens has dtype"),
    ("seqlens shape", lambda kw: kw.update(cache_seqlens=torch.zeros(3, dtype=torch.int32)),
     ValueError, "cache_seqlens has"),
    ("seqlens type", lambda kw: kw.update(cache_seqlens=[1, 2]), TypeError, "cache_seqlens is list"),
    ("k without v", lambda kw: kw.update(v=None), ValueError, "pass both or neither"),
    ("k shape", lambda kw: kw.update(k=torch.randn(2, 1, 4, 16)), ValueError, "k has shape"),
    ("k dtype", lambda kw: kw.update(k=kw["k"].double()), TypeError, "k has dtype"),
    ("k without seqlens", lambda kw: kw.update(cache_seqlens=None), ValueError, "cache_seqlens is None"),
    ("cache batch", lambda kw: kw.update(k_cache=torch.randn(3, 8, 2, 16), v_cache=torch.randn(3, 8, 2, 16)),
     ValueError, "3 sequences but q has batch 2"),
    ("v_cache shape", lambda kw: kw.update(v_cache=torch.randn(2, 9, 2, 16)), ValueError, "v_cache has"),
    ("cache last dim", lambda kw: kw.update(k_cache=torch.randn(2, 8, 16, 2).transpose(2, 3)), ValueError,
     "last dim must be contiguous"),
    ("device", lambda kw: kw.update(cache_seqlens=torch.zeros(2, dtype=torch.int32, device="meta")),
     ValueError, "cache_seqlens is on meta"),
    ("rotary without k",
     lambda kw: kw.update(k=None, v=None, rotary_cos=torch.rand(16, 8), rotary_sin=torch.rand(16, 8)),
     ValueError, "rotary_cos/rotary_sin are given but k/v are not"),
    ("rotary one", lambda kw: kw.update(rotary_cos=torch.rand(16, 8)), ValueError, "given together"),
    ("rotary dim", lambda kw: kw.update(rotary_cos=torch.rand(16, 9), rotary_sin=torch.rand(16, 9)),
     ValueError, "rotary_dim 18 > headdim 16"),
    ("rotary short", lambda kw: kw.update(rotary_cos=torch.rand(6, 8), rotary_sin=torch.rand(6, 8)),
     ValueError, "rotary_cos has 6 rows"),
    ("batch_idx range", lambda kw: kw.update(cache_batch_idx=torch.tensor([0, 2], dtype=torch.int32)),
     ValueError, "cache_batch_idx[1] is 2"),
    ("batch_idx dtype", lambda kw: kw.update(cache_batch_idx=torch.tensor([0.0, 1.0])),
     TypeError, "cache_batch_idx has dtype"),
    ("leftpad > seqlens", lambda kw: kw.update(cache_leftpad=torch.tensor([4, 0], dtype=torch.int32)),
     ValueError, "cache_leftpad[0] is 4"),
    ("alibi shape", lambda kw: kw.update(alibi_slopes=torch.rand(3)), ValueError, "alibi_slopes has"),
    ("alibi dtype", lambda kw: kw.update(alibi_slopes=torch.rand(4).half()), TypeError, "alibi_slopes has dtype"),
]

PAGED_ERRORS = [
    ("block_table range", lambda kw: kw["block_table"].__setitem__((1, 1), 5), ValueError, "block_table[1, 1] is 5"),
    ("block_table negative", lambda kw: kw["block_table"].__setitem__((0, 0), -1),
     ValueError, "block_table[0, 0] is -1"),
    ("block_table dtype", lambda kw: kw.update(block_table=kw["block_table"].float()),
     TypeError, "block_table has dtype"),
    ("block_table rank", lambda kw: kw.update(block_table=kw["block_table"][0]),
     ValueError, "block_table must have 2 dims"),
    ("paged room", lambda kw: kw.update(cache_seqlens=torch.tensor([8, 1], dtype=torch.int32)), ValueError,
     "cache_seqlens[0] is 8"),
    ("paged + batch_idx", lambda kw: kw.update(cache_batch_idx=torch.tensor([0, 1], dtype=torch.int32)),
     ValueError, "cannot be combined with block_table"),
]


@pytest.mark.parametrize("name,mutate,exc,text", ERRORS + PAGED_ERRORS, ids=[e[0] for e in ERRORS + PAGED_ERRORS])
def test_errors(name, mutate, exc, text):
    kw = _paged_inputs() if any(name == e[0] for e in PAGED_ERRORS) else _err_inputs()
    mutate(kw)
    before = kw["k_cache"].clone()
    with pytest.raises(exc) as info:
        flash_attn_with_kvcache(**kw)
    assert text in str(info.value), str(info.value)
    assert torch.equal(kw["k_cache"], before), "the cache was written before the error"


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_block_table_entries_are_not_checked(backend):
    """Pages past a sequence's end may hold anything (vLLM pads with -1): the call runs, appends,
    and computes each sequence over its own keys only."""
    kw = _paged_inputs()
    kw["block_table"][0, 1] = -1  # sequence 0 ends at 3 + 1 = 4 tokens: one page
    kc0, vc0 = kw["k_cache"].clone(), kw["v_cache"].clone()
    kw["alibi_slopes"] = torch.tensor([0.1, 0.3, 0.7, 1.3])  # key order matters: a wrong page shows
    dev = {name: t.to(DEVICE) if isinstance(t, torch.Tensor) else t for name, t in kw.items()}
    with use_backend(backend):
        out = flash_attn_with_kvcache(**dev).cpu()
    # the new tokens land at position 3 of sequence 0 (block 0, row 3) and 7 of sequence 1 (block 3, row 3)
    kc_exp, vc_exp = kc0.clone(), vc0.clone()
    kc_exp[0, 3], vc_exp[0, 3] = kw["k"][0, 0], kw["v"][0, 0]
    kc_exp[3, 3], vc_exp[3, 3] = kw["k"][1, 0], kw["v"][1, 0]
    assert torch.equal(dev["k_cache"].cpu(), kc_exp) and torch.equal(dev["v_cache"].cpu(), vc_exp)
    in_use = {0: [(0, r) for r in range(4)], 1: [(2, r) for r in range(4)] + [(3, r) for r in range(4)]}
    for bi, rows in in_use.items():
        keys = torch.stack([kc_exp[blk, r] for blk, r in rows])[None].double()
        vals = torch.stack([vc_exp[blk, r] for blk, r in rows])[None].double()
        ref, _ = attention_ref(kw["q"][bi:bi + 1].double(), keys, vals, alibi_slopes=kw["alibi_slopes"].double())
        assert_matches(out[bi:bi + 1], ref, name=f"out[{bi}]")


def _poisoned_cache(kind, poison):
    """q, k_cache, v_cache, extra kwargs and the keys / values in use per sequence, with ``poison`` in
    every cache slot that no sequence uses (past cache_seqlens, before cache_leftpad, unused pages)."""
    g = torch.Generator().manual_seed(5)
    b, h, hk, d, cap, page = 2, 4, 2, 16, 16, 4
    seqlens = [4, 9]
    q = torch.randn(b, 1, h, d, generator=g)
    extra, used = {}, []
    if kind == "paged":
        table = torch.tensor([[5, 2, 7, 0], [1, 6, 4, 3]], dtype=torch.int32)
        kc = torch.full((8, page, hk, d), poison)
        vc = torch.full((8, page, hk, d), poison)
        for bi, n in enumerate(seqlens):
            locs = [(int(table[bi, p // page]), p % page) for p in range(n)]
            for blk, r in locs:
                kc[blk, r], vc[blk, r] = torch.randn(hk, d, generator=g), torch.randn(hk, d, generator=g)
            used.append(locs)
        extra["block_table"] = table
    else:
        kc = torch.full((b, cap, hk, d), poison)
        vc = torch.full((b, cap, hk, d), poison)
        start = [2, 0] if kind == "leftpad" else [0, 0]
        for bi, n in enumerate(seqlens):
            locs = [(bi, p) for p in range(start[bi], n)]
            for row, p in locs:
                kc[row, p], vc[row, p] = torch.randn(hk, d, generator=g), torch.randn(hk, d, generator=g)
            used.append(locs)
        if kind == "leftpad":
            extra["cache_leftpad"] = torch.tensor(start, dtype=torch.int32)
    extra["cache_seqlens"] = torch.tensor(seqlens, dtype=torch.int32)
    return q, kc, vc, extra, used


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["contig", "paged", "leftpad"])
@pytest.mark.parametrize("poison", [math.nan, math.inf])
def test_garbage_in_unused_cache_slots_never_reaches_the_output(backend, kind, poison):
    """A cache made with torch.empty may hold NaN / inf past each sequence: out and lse are those of
    the sequences' own keys (issue 11, defect 1: the torch path multiplied 0 by NaN)."""
    q, kc, vc, extra, used = _poisoned_cache(kind, poison)
    with use_backend(backend):
        out, lse = flash_attn_with_kvcache(q.to(DEVICE), kc.to(DEVICE), vc.to(DEVICE), causal=True,
                                           return_softmax_lse=True,
                                           **{n: t.to(DEVICE) for n, t in extra.items()})
    out, lse = out.cpu(), lse.cpu()
    for bi, locs in enumerate(used):
        keys = torch.stack([kc[r, p] for r, p in locs])[None].double()
        vals = torch.stack([vc[r, p] for r, p in locs])[None].double()
        ref, ref_lse = attention_ref(q[bi:bi + 1].double(), keys, vals, causal=True)
        assert_matches(out[bi:bi + 1], ref, name=f"out[{bi}]")
        assert_matches(lse[bi:bi + 1], ref_lse, name=f"lse[{bi}]")


@pytest.mark.parametrize("backend", BACKENDS)
def test_plan_cache_validates_and_follows_each_call(backend):
    """Calls repeat with one set of shapes (the API reuses its validated plan): every argument
    is still checked, and scalars that change between calls (scale, causal, window, lse) take effect."""
    case = make_case(sq=2, sn=0, h=4, hk=2, seqlens=(10, 30, 47))
    q, kc, vc = (case[n].to(DEVICE) for n in ("q", "k_cache", "v_cache"))
    seqlens = torch.tensor(case["seqlens"], dtype=torch.int32, device=DEVICE)
    with use_backend(backend):
        def call(**kw):
            return flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, return_softmax_lse=True, **kw)

        for _ in range(2):
            base = call(causal=True)
            _, _, _, out64, _, low = expected(case, True, (-1, -1), 0.0, None)
            assert_matches(base[0].cpu(), out64, low, name="repeat")
        with pytest.raises(TypeError, match="causal"):
            call(causal="no")  # a bool or 0 / 1, as in every function (causal=1 is True)
        torch.testing.assert_close(call(causal=1)[0], base[0])
        with pytest.raises(ValueError, match="window_size"):
            call(window_size=(-2, -1))
        with pytest.raises(ValueError, match="softmax_scale"):
            call(softmax_scale=math.inf)
        with pytest.raises(TypeError, match="cache_seqlens"):
            flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens.to(torch.int16))
        scaled = call(causal=True, softmax_scale=0.05)
        assert rel_err(scaled[0].cpu(), base[0].cpu()) > 1e-3  # the new scale is used
        out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True)
        assert isinstance(out, torch.Tensor) and torch.equal(out.cpu(), base[0].cpu())
        for _ in range(2):  # window as a list: validated every call, same numbers as the tuple
            windowed = call(window_size=[3, 0])
            assert torch.equal(windowed[0].cpu(), call(window_size=(3, 0))[0].cpu())


# ------------------------------------------------------------------ GPU

@pytest.mark.gpu
@pytest.mark.parametrize("kind,page", [("contig", 0), ("paged", 16), ("paged", 256)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_realistic(kind, page, dtype):
    """d=128, 32/8 heads, ragged lengths up to 1000: triton and torch agree with the oracle."""
    case = make_case(b=4, h=32, hk=8, d=128, kind=kind, page=page or 16, cap=1024, dtype=dtype,
                     seqlens=(0, 1, 513, 1023), sn=1, rotary="neox", sq=1)
    for backend in BACKENDS:
        check(case, backend, causal=True, device="cuda")


@pytest.mark.gpu
def test_gpu_bad_values_do_not_crash(monkeypatch):
    """Out-of-range block_table/seqlens on the GPU: no host check, clamped indices, no fault.
    With FLASH_ATTENTION_DEBUG=1 the same call raises."""
    b, hk, d = 2, 2, 64
    kc, vc = torch.randn(6, 16, hk, d, device="cuda").half(), torch.randn(6, 16, hk, d, device="cuda").half()
    q = torch.randn(b, 1, 8, d, device="cuda").half()
    table = torch.tensor([[0, 99], [-5, 3]], dtype=torch.int32, device="cuda")
    seqlens = torch.tensor([40, 1000], dtype=torch.int32, device="cuda")
    with use_backend("triton"):
        out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, block_table=table)
    torch.cuda.synchronize()
    assert not out.isnan().any()
    monkeypatch.setenv("FLASH_ATTENTION_DEBUG", "1")
    with pytest.raises(ValueError):
        flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, block_table=table)


@pytest.mark.gpu
def test_gpu_merged_splits_on_two_streams():
    """Eager split calls that merge their splits, issued on two streams at once (a workspace per
    stream): each stream's outputs equal the same calls run one at a time, and both workspaces'
    counters are 0 afterwards."""
    from flash_attention_amd.launch import decode as launch_decode

    b, h, hk, d, cap = 4, 16, 4, 128, 2048
    dt = torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(7)
    kc, vc = (torch.randn(b, cap, hk, d, device="cuda", dtype=dt, generator=g) for _ in range(2))
    qs = [torch.randn(b, 1, h, d, device="cuda", dtype=dt, generator=g) for _ in range(8)]
    lens = torch.tensor([5, 700, 1500, 2048], dtype=torch.int32, device="cuda")

    def step(q):
        return flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, num_splits=8)

    with use_backend("triton"):
        alone = [step(q) for q in qs]
        torch.cuda.synchronize()
        streams = (torch.cuda.Stream(), torch.cuda.Stream())
        for s in streams:
            s.wait_stream(torch.cuda.current_stream())
        outs = [None] * len(qs)
        for i, q in enumerate(qs):  # alternate: the two streams' steps overlap on the GPU
            with torch.cuda.stream(streams[i % 2]):
                torch.cuda._sleep(100_000)
                outs[i] = step(q)
        torch.cuda.synchronize()
    assert all(torch.equal(o, a) for o, a in zip(outs, alone))
    keys = [key for key in launch_decode._workspaces if key[1] in {s.cuda_stream for s in streams}]
    assert len(keys) == 2
    assert all(int(launch_decode._workspaces[key][1].abs().sum()) == 0 for key in keys)


@pytest.mark.gpu
@pytest.mark.parametrize("paged", [False, True])
def test_gpu_cuda_graph_decode_step(paged):
    """Capture append + attention in a CUDA graph, replay with new q/k/v and new lengths."""
    b, h, hk, d, cap, page = 4, 16, 4, 128, 512, 16
    dt, dev = torch.bfloat16, "cuda"
    if paged:
        blocks = cap // page
        kc = torch.randn(b * blocks, page, hk, d, device=dev, dtype=dt)
        table = torch.randperm(b * blocks, device=dev).view(b, blocks).to(torch.int32)
    else:
        kc, table = torch.randn(b, cap, hk, d, device=dev, dtype=dt), None
    vc = torch.randn_like(kc)
    q, k, v = (torch.randn(b, 1, n, d, device=dev, dtype=dt) for n in (h, hk, hk))
    seqlens = torch.tensor([5, 100, 300, 510], dtype=torch.int32, device=dev)
    angle = torch.rand(cap, d // 2, device=dev) * 6.28
    cos, sin = angle.cos().to(dt), angle.sin().to(dt)

    def step():
        return flash_attn_with_kvcache(q, kc, vc, k=k, v=v, rotary_cos=cos, rotary_sin=sin, cache_seqlens=seqlens,
                                       block_table=table, causal=True, return_softmax_lse=True)

    with use_backend("triton"):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            step()  # warm-up: compile outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out, lse = step()
        for lens in ([0, 7, 64, 511], [300, 2, 33, 200]):
            case = dict(q=torch.randn_like(q).cpu(), k=torch.randn_like(k).cpu(), v=torch.randn_like(v).cpu(),
                        seqlens=lens, sn=1, kind="paged" if paged else "contig", dtype=dt,
                        k_cache=kc.cpu(), v_cache=vc.cpu(), rotary_cos=cos.cpu(), rotary_sin=sin.cpu(),
                        rotary_interleaved=True, cap=cap)
            if paged:
                t = table.cpu()
                case["block_table"] = t
                case["loc"] = lambda bi, p, t=t: (int(t[bi, p // page]), p % page)
            else:
                case["loc"] = lambda bi, p: (bi, p)
            q.copy_(case["q"])
            k.copy_(case["k"])
            v.copy_(case["v"])
            seqlens.copy_(torch.tensor(lens, dtype=torch.int32))
            graph.replay()
            torch.cuda.synchronize()
            kc_ref, vc_ref, written, out64, lse64, low = expected(case, True, (-1, -1), 0.0, None)
            assert torch.equal(vc.cpu(), vc_ref)
            torch.testing.assert_close(kc.cpu()[written], kc_ref[written], rtol=1e-2, atol=1e-2)
            assert_matches(out.cpu(), out64, low, name="graph out")
            assert rel_err(lse.cpu(), lse64) < 2e-3


@pytest.mark.gpu
def test_gpu_direct_launch_matches_triton_launch():
    """The launcher's cached direct launches (launch/runtime.py) give the same numbers as
    Triton's own launch path, including a q whose data pointer is not 16-byte aligned (a
    different specialisation of the same shapes) and a change of split count."""
    from flash_attention_amd.launch import runtime

    b, h, hk, d, cap = 3, 8, 2, 64, 200
    kc, vc = (torch.randn(b, cap, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    seqlens = torch.tensor([0, 77, 200], dtype=torch.int32, device="cuda")
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    flat = torch.empty(q.numel() + 1, device="cuda", dtype=torch.bfloat16)
    q_odd = flat[1:].view(q.shape)  # data_ptr % 16 == 2
    q_odd.copy_(q)
    assert q_odd.data_ptr() % 16 != 0
    results = {}
    with use_backend("triton"):
        for fast in (False, True, True):
            runtime.FAST_LAUNCH = fast
            try:
                for name, qq in (("aligned", q), ("odd", q_odd)):
                    for splits in (0, 1, 3):
                        out, lse = flash_attn_with_kvcache(qq, kc, vc, cache_seqlens=seqlens, num_splits=splits,
                                                           return_softmax_lse=True)
                        results.setdefault((name, splits), []).append((out.clone(), lse.clone()))
            finally:
                runtime.FAST_LAUNCH = True
    torch.cuda.synchronize()
    from flash_attention_amd import kvcache

    keys = [key for plan in kvcache._plans.values() if "decode" in plan.slot
            for key in plan.slot["decode"].split_slot.kernels]  # (launch context, q's (dtype, aligned), ...)
    assert {key[1][1] for key in keys} == {True, False}  # q aligned and not: two specialisations
    ref = results[("aligned", 1)][0]
    for key, runs in results.items():
        for out, lse in runs[1:]:
            assert not out.isnan().any()
            assert torch.equal(out, runs[0][0]) and torch.equal(lse, runs[0][1]), key
        assert rel_err(runs[0][0].float(), ref[0].float()) < 1e-2, key


def test_failed_call_leaves_the_cache_unwritten(monkeypatch):
    """Nothing is appended unless the call succeeds: a forced backend that declines raises before
    the append, and a launch that fails on a plan's first call restores the overwritten slots."""
    kw = _err_inputs()
    before_k, before_v = kw["k_cache"].clone(), kw["v_cache"].clone()
    with use_backend("sdpa"), pytest.raises(fa.BackendUnavailable, match="decoding"):
        flash_attn_with_kvcache(**kw)
    assert torch.equal(kw["k_cache"], before_k) and torch.equal(kw["v_cache"], before_v)

    from flash_attention_amd.backends import registry

    def broken(*args, **kwargs):
        raise RuntimeError("launch failed")

    monkeypatch.setattr(registry()["torch"], "decode", broken)
    with use_backend("torch"), pytest.raises(RuntimeError, match="launch failed"):
        flash_attn_with_kvcache(**kw)
    assert torch.equal(kw["k_cache"], before_k) and torch.equal(kw["v_cache"], before_v)


@pytest.mark.skipif("triton" not in BACKENDS, reason="the triton backend cannot run here")
@pytest.mark.parametrize("fused", [True, False])
def test_failed_fused_append_restores_the_cache(monkeypatch, fused):
    """The triton backend appends in its split kernel (fused) or in one kernel before it
    (launch/decode.append_kv); if that launch fails on a plan's first call after writing, the
    overwritten slots get their old contents back."""
    from flash_attention_amd import kvcache as kvcache_module
    from flash_attention_amd.launch import decode as launch_decode

    kw = {n: (t.to(DEVICE) if isinstance(t, torch.Tensor) else t) for n, t in _err_inputs().items()}
    before_k, before_v = kw["k_cache"].clone(), kw["v_cache"].clone()

    def broken(*args, **kwargs):
        k_cache, v_cache = (args[2], args[3]) if fused else (args[0], args[1])  # run_decode: (plan, q, kc, vc ...)
        k_cache.fill_(7.0)
        v_cache.fill_(7.0)
        raise RuntimeError("append failed")

    monkeypatch.setattr(kvcache_module, "_plans", {})  # a plan's first call (its slot caches fuses_append)
    if fused:
        monkeypatch.setattr(launch_decode, "run_decode", broken)
    else:
        monkeypatch.setattr(launch_decode, "fuses_append", lambda *a: False)
        monkeypatch.setattr(launch_decode, "append_kv", broken)
    with use_backend("triton"), pytest.raises(RuntimeError, match="append failed"):
        flash_attn_with_kvcache(**kw)
    # the slots the call would write are restored; a failed launch that wrote elsewhere is not
    # something the real kernel can do (it writes only the appended slots)
    written = torch.zeros(kw["k_cache"].shape[:2], dtype=torch.bool)
    for bi, start in enumerate(kw["cache_seqlens"].tolist()):
        written[bi, start] = True
    assert torch.equal(kw["k_cache"].cpu()[written], before_k.cpu()[written])
    assert torch.equal(kw["v_cache"].cpu()[written], before_v.cpu()[written])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rotary", [False, True])
def test_grad_mode_outputs_have_no_graph(backend, rotary):
    """flash_attn_with_kvcache has no backward: under grad mode, with q and the new k / v requiring grad,
    out and lse carry no autograd graph (the triton path skips no_grad() when nothing it runs is a
    PyTorch op that autograd records: no rotary) and equal the same call in no-grad mode."""
    g = torch.Generator().manual_seed(3)
    b, h, hk, d, cap = 2, 4, 2, 16, 24
    q = torch.randn(b, 1, h, d, generator=g).to(DEVICE)
    k_new, v_new = (torch.randn(b, 1, hk, d, generator=g).to(DEVICE) for _ in range(2))
    cache = [torch.randn(b, cap, hk, d, generator=g).to(DEVICE) for _ in range(2)]
    lens = torch.tensor([5, 11], dtype=torch.int32, device=DEVICE)
    rot = {}
    if rotary:
        angle = torch.rand(cap, d // 4, generator=g).to(DEVICE)
        rot = dict(rotary_cos=angle.cos(), rotary_sin=angle.sin())
    results = []
    for grad in (True, False):
        kc, vc = (c.clone() for c in cache)
        qq, kk, vv = (t.clone().requires_grad_(grad) for t in (q, k_new, v_new))
        with use_backend(backend), torch.set_grad_enabled(grad):
            out, lse = flash_attn_with_kvcache(qq, kc, vc, k=kk, v=vv, cache_seqlens=lens, causal=True,
                                               return_softmax_lse=True, **rot)
        assert not out.requires_grad and out.grad_fn is None and not lse.requires_grad
        results.append((out, lse, kc, vc))
    for x, y in zip(*results):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_a_row_reads_gives_nan_in_that_row(backend):
    """CONTRACT.md: a NaN in q, or in a key a row sees, gives NaN in that row and no other; a NaN in a cache slot no
    row sees (past a sequence's keys) changes nothing (before session 53 the torch path turned such rows into 0)."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 1, 4, 16, generator=g).to(DEVICE)
    k_cache, v_cache = (torch.randn(2, 32, 2, 16, generator=g).to(DEVICE) for _ in range(2))
    seqlens = torch.tensor([10, 20], dtype=torch.int32, device=DEVICE)
    q[0, 0, 1, 3] = math.nan  # sequence 0, query head 1
    k_cache[1, 5, 0, 0] = math.nan  # sequence 1, a key of KV head 0 (query heads 0 and 1) its row sees
    k_cache[0, 25, 1, 0] = math.nan  # sequence 0, past its 10 keys: no row sees it
    with fa.use_backend(backend):
        out = fa.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens)
    nan_rows = torch.zeros(2, 1, 4, dtype=torch.bool, device=DEVICE)
    nan_rows[0, 0, 1] = nan_rows[1, 0, 0] = nan_rows[1, 0, 1] = True
    assert torch.isnan(out).any(-1).equal(nan_rows)
    assert torch.isnan(out[nan_rows]).all()
