"""The flash_attn 2.x surface: names, argument names, defaults, return shapes; packed variants;
the FlashAttention module; inputs never modified."""
import inspect

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
from helpers import DEVICE, assert_matches, randn

COMMON = ["dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes",
          "deterministic", "return_attn_probs"]
SIGNATURES = {
    "flash_attn_func": ["q", "k", "v"] + COMMON,
    "flash_attn_qkvpacked_func": ["qkv"] + COMMON,
    "flash_attn_kvpacked_func": ["q", "kv"] + COMMON,
    "flash_attn_varlen_func": ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"]
    + COMMON + ["block_table"],
    "flash_attn_varlen_qkvpacked_func": ["qkv", "cu_seqlens", "max_seqlen"] + COMMON,
    "flash_attn_varlen_kvpacked_func": ["q", "kv", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q",
                                        "max_seqlen_k"] + COMMON,
    "flash_attn_with_kvcache": ["q", "k_cache", "v_cache", "k", "v", "rotary_cos", "rotary_sin", "cache_seqlens",
                                "cache_batch_idx", "cache_leftpad", "block_table", "softmax_scale", "causal",
                                "window_size", "softcap", "rotary_interleaved", "alibi_slopes", "num_splits",
                                "return_softmax_lse"],
}
DEFAULTS = {"dropout_p": 0.0, "softmax_scale": None, "causal": False, "window_size": (-1, -1), "softcap": 0.0,
            "alibi_slopes": None, "deterministic": False, "return_attn_probs": False, "rotary_interleaved": True,
            "num_splits": 0, "return_softmax_lse": False, "block_table": None}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_matches_flash_attn(name):
    params = inspect.signature(getattr(fa, name)).parameters
    assert list(params)[: len(SIGNATURES[name])] == SIGNATURES[name]
    for arg, default in DEFAULTS.items():
        if arg in params:
            assert params[arg].default == default, (name, arg)


def _inputs(b=2, sq=37, sk=45, h=4, hk=2, d=40, dtype=torch.float32, grad=True):
    return (randn(b, sq, h, d, dtype=dtype, requires_grad=grad), randn(b, sk, hk, d, dtype=dtype, requires_grad=grad),
            randn(b, sk, hk, d, dtype=dtype, requires_grad=grad))


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_func_forward_backward_and_lse(backend):
    q, k, v = _inputs()
    with fa.use_backend(backend):
        out, lse, probs = fa.flash_attn_func(q, k, v, causal=True, softcap=3.0, return_attn_probs=True)
    assert probs is None and lse.shape == (2, 4, 37) and lse.dtype == torch.float32
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, ref_lse = attention_ref(q64, k64, v64, causal=True, softcap=3.0)
    assert_matches(out, ref)
    assert_matches(lse, ref_lse, name="lse")
    dout = torch.randn_like(out)
    out.backward(dout)
    ref.backward(dout.double())
    for name, g, g64 in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)):
        assert_matches(g, g64, name=name)


def test_packed_variants_equal_unpacked():
    qkv = randn(2, 33, 3, 4, 32)
    out = fa.flash_attn_qkvpacked_func(qkv, causal=True)
    q, k, v = qkv.unbind(2)
    assert_matches(out, attention_ref(q.double(), k.double(), v.double(), causal=True)[0])
    q = randn(2, 20, 4, 32)
    kv = randn(2, 33, 2, 2, 32)
    out = fa.flash_attn_kvpacked_func(q, kv, window_size=(8, 2))
    ref = attention_ref(q.double(), kv[:, :, 0].double(), kv[:, :, 1].double(), window_size=(8, 2))[0]
    assert_matches(out, ref)


def test_varlen_and_packed_varlen():
    lens = [5, 1, 17, 9]
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=DEVICE)
    total = sum(lens)
    qkv = randn(total, 3, 4, 24, requires_grad=True)
    out = fa.flash_attn_varlen_qkvpacked_func(qkv, cu, max(lens), causal=True)
    qkv64 = qkv.detach().double().requires_grad_()
    ref = attention_ref_varlen(*qkv64.unbind(1), cu, cu, causal=True)[0]
    assert_matches(out, ref)
    g = torch.randn_like(out)
    out.backward(g)
    ref.backward(g.double())
    for i, name in enumerate(("dq", "dk", "dv")):
        assert_matches(qkv.grad[:, i], qkv64.grad[:, i], name=name)
    q = randn(total, 4, 24)
    kv = randn(total, 2, 2, 24)
    out, lse, _ = fa.flash_attn_varlen_kvpacked_func(q, kv, cu, cu, max(lens), max(lens), softcap=2.0,
                                                     return_attn_probs=True)
    ref, ref_lse = attention_ref_varlen(q.double(), kv[:, 0].double(), kv[:, 1].double(), cu, cu, softcap=2.0)
    assert lse.shape == (4, total)
    assert_matches(out, ref)
    assert_matches(lse, ref_lse, name="lse")


def test_module_dropout_only_in_training():
    attn = fa.FlashAttention(attention_dropout=0.5)
    q, k, v = _inputs(grad=False)
    attn.eval()
    assert torch.equal(attn(q, k, v, causal=True), attn(q, k, v, causal=True))
    attn.train()
    torch.manual_seed(3)
    a = attn(q, k, v)
    torch.manual_seed(3)
    b = attn(q, k, v)
    torch.manual_seed(4)
    c = attn(q, k, v)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_inputs_never_modified():
    q, k, v = _inputs(grad=False)
    copies = [t.clone() for t in (q, k, v)]
    slopes = torch.rand(4, device=DEVICE)
    slopes_copy = slopes.clone()
    fa.flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes, dropout_p=0.2)
    for t, c in zip((q, k, v, slopes), copies + [slopes_copy]):
        assert torch.equal(t, c)


def test_non_contiguous_inputs():
    base = randn(2, 4, 37, 40)  # [b, h, s, d] memory, viewed as [b, s, h, d]
    q = base.transpose(1, 2)
    k = randn(2, 45, 8, 40)[:, :, ::4]  # strided heads
    v = randn(2, 45, 2, 80)[..., ::2]  # last dim not contiguous -> copied
    out = fa.flash_attn_func(q, k, v, causal=True)
    ref = attention_ref(q.double(), k.double(), v.double(), causal=True)[0]
    assert_matches(out, ref)


def test_fully_masked_rows_zero_out_inf_lse_zero_grad():
    q, k, v = _inputs(sq=50, sk=20)  # causal, bottom-right: the first 30 rows see nothing
    out, lse, _ = fa.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert torch.all(out[:, :30] == 0) and torch.all(torch.isinf(lse[:, :, :30]) & (lse[:, :, :30] > 0))
    out.sum().backward()
    assert torch.all(q.grad[:, :30] == 0) and torch.isfinite(q.grad).all()


@pytest.mark.parametrize("hk,seqlen", [(4, 64), (2, 64), (4, 1)])
def test_sdpa_backend_forward_backward_repeated(hk, seqlen):
    """The sdpa backend's direct fused op (picked on a signature's first call, reused after): forward
    and gradients match the float64 oracle on the first and the repeated call (seqlen 1: cuDNN's
    backward rejects it, flash_attn's own test suite found it)."""
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    for _ in range(2):
        q, k, v = (randn(2, seqlen, h, 64, dtype=dtype, requires_grad=True) for h in (4, hk, hk))
        with fa.use_backend("sdpa"):
            out = fa.flash_attn_func(q, k, v, causal=True)
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        ref, _ = attention_ref(q64, k64, v64, causal=True)
        low, _ = attention_ref(*(t.detach() for t in (q, k, v)), causal=True)
        assert_matches(out, ref, low)
        dout = torch.randn_like(out)
        out.backward(dout)
        ref.backward(dout.double())
        for name, g, g64 in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)):
            assert_matches(g, g64, name=name)
