"""The fa4 backend (FA4, the flash-attn-4 package, as ``flash_attn.cute``).

On the CPU: a stand-in FA4 package (a ``flash_attn/cute`` namespace portion, as the real wheel installs
it) computes with the float64-capable reference, so the argument mapping (windows, LSE convention,
varlen) is checked end to end; the declines, the rule table and compat.install() beside FA4 too.
On an sm90 GPU with FA4 installed: the real package through our API against the float64 reference.
"""
from __future__ import annotations

import importlib.metadata
import math
import sys
import textwrap

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import compat, dispatch
from flash_attention_amd.backends.fa4_backend import FA4Backend
from flash_attention_amd.params import AttnParams, Problem
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
from helpers import DEVICE, assert_matches

FAKE_FA4 = """
import importlib.metadata
import math
import torch
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
CALLS = []

def _win(window_size):
    return tuple(-1 if w is None else w for w in window_size)

def _fa4_lse(lse):
    # FA4's convention: -inf on rows that see no key
    return torch.where(lse == math.inf, -math.inf, lse).float()

def flash_attn_func(q, k, v, softmax_scale=None, causal=False, window_size=(None, None), softcap=0.0,
                    learnable_sink=None, return_lse=False, **kw):
    CALLS.append(dict(kw, varlen=False, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                      softcap=softcap, learnable_sink=learnable_sink, return_lse=return_lse))
    out, lse = attention_ref(q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=_win(window_size),
                             softcap=softcap, sinks=learnable_sink)
    return out, _fa4_lse(lse)

def flash_attn_varlen_func(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
                           softmax_scale=None, causal=False, window_size=(None, None), softcap=0.0,
                           learnable_sink=None, return_lse=False, **kw):
    CALLS.append(dict(kw, varlen=True, cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q, causal=causal,
                      window_size=window_size))
    out, lse = attention_ref_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale=softmax_scale,
                                    causal=causal, window_size=_win(window_size), softcap=softcap)
    return out, _fa4_lse(lse)
"""


@pytest.fixture
def fake_fa4(tmp_path, monkeypatch, clean_flash_attn):
    """A stand-in FA4 installed as the wheel installs it: flash_attn/cute, no flash_attn/__init__.py."""
    pkg = tmp_path / "flash_attn" / "cute"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(FAKE_FA4))
    monkeypatch.syspath_prepend(str(tmp_path))
    # the stand-in has no distribution metadata: hide a real flash-attn-4's (a GPU machine may have one), so
    # explain() reports what it reports for a module without metadata
    real_version = importlib.metadata.version

    def version(name):
        if name == "flash-attn-4":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    import flash_attn.cute

    return flash_attn.cute


BASE = dict(device_type="cuda", is_rocm=False, arch="sm90", dtype=torch.bfloat16, batch=4, seqlen_q=4096,
            seqlen_k=4096, nheads=16, nheads_k=16, headdim=128, headdim_v=128)


def test_declines_where_it_cannot_serve():
    be = FA4Backend()
    assert be.supports(Problem(**BASE)) is None
    assert be.supports(Problem(**BASE, causal=True, window_left=128, softcap=30.0, has_sinks=True,
                               needs_grad=True, return_lse=True)) is None
    cases = {
        "NVIDIA GPUs only": dict(device_type="cpu", arch=None),
        "sm90 only, not sm80": dict(arch="sm80"),
        "torch.compile": dict(compiling=True),
        "no dropout": dict(dropout_p=0.1),
        "no ALiBi": dict(has_alibi=True),
        "no attn_bias": dict(bias="bool", bias_shape=(4, 1, 1, 4096)),
        "FP8": dict(fp8=True),
        "chunk offsets": dict(offsets=True),
        "headdim 320/320": dict(headdim=320, headdim_v=320),
        "headdim 100/100": dict(headdim=100, headdim_v=100),
        "headdim 128/64": dict(headdim_v=64),
        "deterministic backward": dict(deterministic=True, needs_grad=True),
        "zero_tensors": dict(is_varlen=True, zero_tensors=True),
        "varlen LSE": dict(is_varlen=True, return_lse=True),
        "fp16/bf16, not torch.float32": dict(dtype=torch.float32),
    }
    for words, change in cases.items():
        reason = be.supports(Problem(**dict(BASE, **change)))
        assert reason is not None and words in reason, (words, reason)
    assert "with_kvcache" in be.supports(Problem(**BASE, kind="kvcache"))
    assert be.supports(Problem(**BASE, deterministic=True)) is None  # forward only: nothing to be deterministic


def test_not_installed_declines_and_forcing_raises(clean_flash_attn):
    reason = FA4Backend().available()
    if reason is None:
        pytest.skip("FA4 is installed here")
    assert "not importable" in reason and "flash-attn-4" in reason
    q = torch.randn(1, 8, 2, 16)
    with fa.use_backend("fa4"), pytest.raises(fa.BackendUnavailable, match="fa4.*not importable"):
        fa.flash_attn_func(q, q, q)
    # the rule table leaves fa4 out of the front where it is not installed
    assert dispatch.preference(Problem(**BASE, needs_grad=True))[0] == "sdpa"
    assert "fa4" not in dispatch.order_rule(Problem(**BASE, needs_grad=True))


def test_rule_table_with_fa4_installed(fake_fa4):
    train = Problem(**BASE, causal=True, needs_grad=True)  # 275 GFLOP
    assert dispatch.preference(train)[:2] == ("fa4", "sdpa")
    assert "FA4 installed: fa4 first" in dispatch.order_rule(train) and "then sm90, plain" in dispatch.order_rule(train)
    window = Problem(**dict(BASE, causal=True, window_left=1024, needs_grad=True))
    assert dispatch.preference(window)[0] == "fa4"
    assert dispatch.preference(Problem(**BASE, has_sinks=True, needs_grad=True))[0] == "fa4"
    gqa = Problem(**dict(BASE, nheads=32, nheads_k=8, causal=True, needs_grad=True))
    assert dispatch.preference(gqa)[0] == "fa4"
    not_first = {
        "softcap: ours faster forward": dict(softcap=30.0, needs_grad=True),
        "varlen: not measured": dict(is_varlen=True, needs_grad=True),
        "small training call (host-bound)": dict(batch=1, seqlen_q=1024, seqlen_k=1024, needs_grad=True),
        "forward only below 4k keys": dict(seqlen_q=2048, seqlen_k=2048, batch=64),
        "d=256 with grads (cuDNN faster)": dict(headdim=256, headdim_v=256, needs_grad=True),
        "bottom-right causal": dict(seqlen_q=1024, causal=True, needs_grad=True),
        "cross-attention (not measured)": dict(seqlen_q=2048, batch=16, needs_grad=True),
        "sm80: not measured": dict(arch="sm80", needs_grad=True),
        "dropout": dict(dropout_p=0.1, needs_grad=True),
    }
    for why, change in not_first.items():
        assert dispatch.preference(Problem(**dict(BASE, **change)))[0] != "fa4", why
    assert dispatch.preference(Problem(**dict(BASE, headdim=256, headdim_v=256)))[0] == "fa4"  # forward, 4k
    # the rule's limits: just below / at FA4_TRAIN_FLOP (causal d=128 1k: 16 x 16 heads = 68.7 GFLOP)
    at = dict(BASE, batch=16, seqlen_q=1024, seqlen_k=1024, causal=True, needs_grad=True)
    assert dispatch.forward_flop(Problem(**at)) >= dispatch.FA4_TRAIN_FLOP
    assert dispatch.preference(Problem(**at))[0] == "fa4"
    assert dispatch.preference(Problem(**dict(at, batch=15)))[0] != "fa4"
    # every backend that is not first is still there, torch last
    order = dispatch.preference(train)
    assert sorted(order) == sorted(dispatch.registry()) and order[-1] == "torch"
    # explain() names the FA4 that serves
    text = dispatch.decide(train).describe()
    assert "-> fa4 (auto)" in text and "FA4 version unknown" in text and "flash_attn/cute" in text


def _params(**kw):
    return AttnParams(softmax_scale=kw.pop("softmax_scale", 0.25), **kw)


def test_run_maps_options_and_lse_convention(fake_fa4):
    be = FA4Backend()
    assert be.available() is None
    torch.manual_seed(1)
    q = torch.randn(2, 7, 4, 16, dtype=torch.float64)
    k = torch.randn(2, 11, 2, 16, dtype=torch.float64)
    v = torch.randn(2, 11, 2, 16, dtype=torch.float64)
    sinks = torch.randn(4, dtype=torch.float64)
    cases = [
        dict(causal=True, window_left=-1, window_right=0),
        dict(window_left=3, window_right=2),
        dict(causal=True, window_left=4, window_right=0, softcap=5.0),
        dict(sinks=sinks),
    ]
    for kw in cases:
        params = _params(return_lse=True, **kw)
        out, lse = be.run(q, k, v, params)
        call = fake_fa4.CALLS[-1]
        wl, wr = kw.get("window_left", -1), kw.get("window_right", -1)
        assert call["window_size"] == (None if wl < 0 else wl, None if wr < 0 else wr)
        assert call["causal"] == kw.get("causal", False) and call["return_lse"] is True
        ref_out, ref_lse = attention_ref(q, k, v, softmax_scale=0.25, causal=kw.get("causal", False),
                                         window_size=(wl, wr), softcap=kw.get("softcap", 0.0), sinks=kw.get("sinks"))
        torch.testing.assert_close(out, ref_out)
        torch.testing.assert_close(lse, ref_lse.float())
    # causal with more queries than keys: the first rows see no key (ours: lse +inf, out 0)
    kk, vv = (torch.randn(2, 7, 2, 16, dtype=torch.float64) for _ in range(2))
    out, lse = be.run(torch.randn(2, 11, 4, 16, dtype=torch.float64), kk, vv,
                      _params(causal=True, window_right=0, return_lse=True))
    assert math.isinf(lse[0, 0, 0].item()) and lse[0, 0, 0].item() > 0 and out[:, :4].abs().max() == 0
    out, lse = be.run(q, k, v, _params(causal=True, window_right=0))
    assert lse is None
    # a plan's slot keeps the entry point and the options: the next call of the signature reuses them
    slot, params = {}, _params(window_left=3, window_right=2)
    be.run(q, k, v, params, slot)
    assert slot["fa4"][1]["window_size"] == (3, 2)
    slot["fa4"][1]["window_size"] = (1, 1)  # what the next call passes comes from the slot
    be.run(q, k, v, params, slot)
    assert fake_fa4.CALLS[-1]["window_size"] == (1, 1)


def test_run_varlen(fake_fa4):
    be = FA4Backend()
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    q, k, v = (torch.randn(12, 2, 8, dtype=torch.float64) for _ in range(3))
    out, lse = be.run(q, k, v, _params(causal=True, window_right=0, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                       max_seqlen_q=7, max_seqlen_k=7))
    call = fake_fa4.CALLS[-1]
    assert call["varlen"] and call["max_seqlen_q"] == 7 and torch.equal(call["cu_seqlens_q"], cu)
    torch.testing.assert_close(out, attention_ref_varlen(q, k, v, cu, cu, softmax_scale=0.25, causal=True)[0])
    assert lse is None


def test_compat_install_beside_fa4(fake_fa4):
    """FA4's wheel installs only flash_attn/cute: not a real flash_attn 2.x; FA4 stays importable."""
    assert compat.real_flash_attn() is None
    from flash_attention_amd.backends.flash_attn_backend import FlashAttnBackend

    assert "not a 2.x build" in FlashAttnBackend().available()
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("error")
        assert compat.install() is True
    import flash_attn
    import flash_attn.cute

    assert flash_attn.flash_attn_func is fa.flash_attn_func and flash_attn.cute is fake_fa4
    assert FA4Backend().available() is None
    assert compat.uninstall() is True
    import flash_attn as again

    assert not getattr(again, compat.MARK, False) and again.cute is fake_fa4


def test_compat_install_beside_fa4_not_yet_imported(fake_fa4):
    for n in [n for n in sys.modules if n.startswith("flash_attn")]:
        del sys.modules[n]
    assert compat.install() is True
    import flash_attn.cute  # found through the stand-in package's path

    assert hasattr(flash_attn.cute, "flash_attn_varlen_func")
    assert FA4Backend().available() is None


# ---------------------------------------------------------------------------------- the real FA4, GPU

def _real_fa4() -> bool:
    if DEVICE != "cuda" or torch.version.hip is not None or torch.cuda.get_device_capability() != (9, 0):
        return False
    return FA4Backend().available() is None


needs_fa4 = pytest.mark.skipif(not _real_fa4(), reason="needs FA4 (flash-attn-4) on an sm90 GPU")


@needs_fa4
@pytest.mark.parametrize("case", ["causal", "window", "softcap", "gqa", "sinks", "lse_bottom_right", "fp16",
                                  "d256", "varlen"])
def test_real_fa4_matches_reference(case):
    torch.manual_seed(["causal", "window", "softcap", "gqa", "sinks", "lse_bottom_right", "fp16", "d256",
                       "varlen"].index(case))
    dtype = torch.float16 if case == "fp16" else torch.bfloat16
    b, sq, sk, h, hk, d = 2, 203, 203, 4, 4, 128
    kw = dict(causal=True)
    if case == "window":
        kw = dict(window_size=(48, 16))
    elif case == "softcap":
        kw["softcap"] = 20.0
    elif case == "gqa":
        h, hk = 8, 2
    elif case == "lse_bottom_right":
        sq, sk = 203, 150  # the first 53 rows see no key
        kw["return_attn_probs"] = True
    elif case == "d256":
        d = 256
    sinks = torch.randn(h, device=DEVICE, requires_grad=True) if case == "sinks" else None
    q = torch.randn(b, sq, h, d, device=DEVICE, dtype=dtype, requires_grad=True)
    k = torch.randn(b, sk, hk, d, device=DEVICE, dtype=dtype, requires_grad=True)
    v = torch.randn(b, sk, hk, d, device=DEVICE, dtype=dtype, requires_grad=True)
    dout = torch.randn(b, sq, h, d, device=DEVICE, dtype=dtype)
    if case == "varlen":
        cu = torch.tensor([0, 70, 203, 406], dtype=torch.int32, device=DEVICE)
        qv, kv, vv = (t.detach().reshape(-1, t.shape[2], d).requires_grad_() for t in (q, k, v))
        with fa.use_backend("fa4"):
            out = fa.flash_attn_varlen_func(qv, kv, vv, cu, cu, 133, 133, causal=True)
        out.backward(dout.reshape(-1, h, d))
        ref_in = [t.detach().double().requires_grad_() for t in (qv, kv, vv)]
        ref, _ = attention_ref_varlen(*ref_in, cu, cu, causal=True)
        low_in = [t.detach().clone().requires_grad_() for t in (qv, kv, vv)]
        low, _ = attention_ref_varlen(*low_in, cu, cu, causal=True)
        ref.backward(dout.reshape(-1, h, d).double())
        low.backward(dout.reshape(-1, h, d))
        assert_matches(out, ref, low)
        for name, g, gr, gl in zip("qkv", (qv.grad, kv.grad, vv.grad), ref_in, low_in):
            assert_matches(g, gr.grad, gl.grad, name=f"d{name}")
        return
    extra = {} if sinks is None else dict(sinks=sinks)
    with fa.use_backend("fa4"):
        res = fa.flash_attn_func(q, k, v, **kw, **extra)
    out = res[0] if isinstance(res, tuple) else res
    ref_kw = dict(causal=kw.get("causal", False), window_size=kw.get("window_size", (-1, -1)),
                  softcap=kw.get("softcap", 0.0))
    ref_in = [t.detach().double().requires_grad_() for t in (q, k, v)]
    sref = None if sinks is None else sinks.detach().double().requires_grad_()
    ref, ref_lse = attention_ref(*ref_in, sinks=sref, **ref_kw)
    low_in = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    low, _ = attention_ref(*low_in, sinks=None if sinks is None else sinks.detach(), **ref_kw)
    assert_matches(out, ref, low)
    if case == "lse_bottom_right":
        lse = res[1]
        assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse)) and bool((lse[torch.isinf(lse)] > 0).all())
        assert out[:, :53].abs().max().item() == 0
        torch.testing.assert_close(lse[torch.isfinite(lse)], ref_lse[torch.isfinite(ref_lse)].float(),
                                   atol=2e-3, rtol=0)
    out.backward(dout)
    ref.backward(dout.double())
    low.backward(dout)
    for name, g, gr, gl in zip("qkv", (q.grad, k.grad, v.grad), ref_in, low_in):
        assert_matches(g, gr.grad, gl.grad, name=f"d{name}")
    if sinks is not None:  # a per-head sum that nearly cancels: no worse than our triton kernels on the same call
        mine = sinks.detach().clone().requires_grad_()
        with fa.use_backend("triton"):
            fa.flash_attn_func(*[t.detach() for t in (q, k, v)], sinks=mine, **kw).backward(dout)

        def err(g):
            return float((g.double() - sref.grad).norm() / sref.grad.norm())

        # 8 seeds on an H100 (run21/h100b_fa4_sinks_seeds.txt): FA4 1.1e-3 - 4.5e-3, ours 1.1e-3 - 4.6e-3
        assert err(sinks.grad) < 1e-2 and err(sinks.grad) <= 2 * err(mine.grad) + 5e-3, (err(sinks.grad),
                                                                                        err(mine.grad))


@needs_fa4
def test_real_fa4_is_the_automatic_choice_for_large_training_calls():
    q, k, v = (torch.randn(4, 4096, 16, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    text = fa.explain(q, k, v, causal=True)
    assert "-> fa4 (auto)" in text and "FA4 installed: fa4 first" in text
    small = [t[:1, :512].detach().requires_grad_() for t in (q, k, v)]
    assert "-> fa4" not in fa.explain(*small, causal=True)
    with torch.no_grad():
        assert "-> fa4" not in fa.explain(*[t[:, :2048] for t in (q, k, v)], causal=True)  # forward only, 2k


@needs_fa4
def test_real_fa4_dense_call_has_no_host_sync():
    q, k, v = (torch.randn(2, 512, 4, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    with fa.use_backend("fa4"):
        fa.flash_attn_func(q, k, v, causal=True).sum().backward()  # compiled and cached first
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            fa.flash_attn_func(q, k, v, causal=True).sum().backward()
        finally:
            torch.cuda.set_sync_debug_mode("default")
