"""CONTRACT.md's Errors list for the attention functions: ValueError/TypeError naming the argument.
(flash_attn_with_kvcache's own list is walked in test_kvcache.py.)"""
import pytest
import torch

import flash_attention_amd as fa
from helpers import DEVICE, randn


def qkv(b=2, sq=16, sk=16, h=4, hk=2, d=32, dtype=torch.float32):
    return randn(b, sq, h, d, dtype=dtype), randn(b, sk, hk, d, dtype=dtype), randn(b, sk, hk, d, dtype=dtype)


def _cu(lens):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=DEVICE)


CASES = [
    # (label, callable, exception, message fragment)
    ("q not a tensor", lambda q, k, v: fa.flash_attn_func(q.tolist(), k, v), TypeError, "q must be a torch.Tensor"),
    ("rank", lambda q, k, v: fa.flash_attn_func(q[0], k, v), ValueError, "q must have 4 dims"),
    ("int dtype", lambda q, k, v: fa.flash_attn_func(q.long(), k, v), TypeError, "q has dtype torch.int64"),
    ("dtype mismatch", lambda q, k, v: fa.flash_attn_func(q, k.half(), v), TypeError, "k has dtype torch.float16"),
    ("batch mismatch", lambda q, k, v: fa.flash_attn_func(q, k[:1], v[:1]), ValueError, "k has batch 1"),
    ("k/v mismatch", lambda q, k, v: fa.flash_attn_func(q, k, v[:, :8]), ValueError, "k has shape"),
    ("headdim q/k", lambda q, k, v: fa.flash_attn_func(q, k[..., :16], v), ValueError, "k has headdim 16"),
    ("headdim too big", lambda q, k, v: fa.flash_attn_func(randn(1, 4, 1, 600), randn(1, 4, 1, 600),
                                                           randn(1, 4, 1, 600)), ValueError, "headdim is 600"),
    ("heads not divisible", lambda q, k, v: fa.flash_attn_func(q[:, :, :3], k, v), ValueError,
     "nheads (3) must be divisible by nheads_k (2)"),
    ("window type", lambda q, k, v: fa.flash_attn_func(q, k, v, window_size=5), ValueError, "window_size is 5"),
    ("window value", lambda q, k, v: fa.flash_attn_func(q, k, v, window_size=(-2, 0)), ValueError,
     "window_size is (-2, 0)"),
    ("dropout 1", lambda q, k, v: fa.flash_attn_func(q, k, v, dropout_p=1.0), ValueError, "dropout_p is 1.0"),
    ("dropout < 0", lambda q, k, v: fa.flash_attn_func(q, k, v, dropout_p=-0.1), ValueError, "dropout_p"),
    ("softcap < 0", lambda q, k, v: fa.flash_attn_func(q, k, v, softcap=-1.0), ValueError, "softcap is -1.0"),
    ("softcap nan", lambda q, k, v: fa.flash_attn_func(q, k, v, softcap=float("nan")), ValueError, "softcap"),
    ("scale nan", lambda q, k, v: fa.flash_attn_func(q, k, v, softmax_scale=float("nan")), ValueError,
     "softmax_scale"),
    ("alibi dtype", lambda q, k, v: fa.flash_attn_func(q, k, v, alibi_slopes=torch.ones(4, dtype=torch.float64)),
     TypeError, "alibi_slopes has dtype"),
    ("alibi shape", lambda q, k, v: fa.flash_attn_func(q, k, v, alibi_slopes=torch.ones(3)), ValueError,
     "alibi_slopes has shape (3,)"),
    ("bias shape", lambda q, k, v: fa.flash_attn_func(q, k, v, attn_bias=torch.zeros(2, 4, 16, 15)), ValueError,
     "attn_bias has shape (2, 4, 16, 15): its seqlen_k dim is 15, not 16 or 1"),
    ("bias rank", lambda q, k, v: fa.flash_attn_func(q, k, v, attn_bias=torch.zeros(1, 2, 4, 16, 16)), ValueError,
     "attn_bias has shape (1, 2, 4, 16, 16)"),
    ("bias dtype", lambda q, k, v: fa.flash_attn_func(q, k, v, attn_bias=torch.zeros(16, 16, dtype=torch.int32)),
     TypeError, "attn_bias has dtype torch.int32"),
    ("bias device", lambda q, k, v: fa.flash_attn_func(q, k, v, attn_bias=torch.zeros(16, 16, device="meta")),
     ValueError, "attn_bias is on meta"),
    ("sinks length", lambda q, k, v: fa.flash_attn_func(q, k, v, sinks=torch.zeros(3)), ValueError,
     "sinks has shape (3,); allowed: (4,)"),
    ("sinks dtype", lambda q, k, v: fa.flash_attn_func(q, k, v, sinks=torch.zeros(4, dtype=torch.float16)),
     TypeError, "sinks has dtype torch.float16"),
    ("qkv packed dim", lambda q, k, v: fa.flash_attn_qkvpacked_func(randn(1, 4, 2, 2, 8)), ValueError, "qkv"),
    ("kv packed dim", lambda q, k, v: fa.flash_attn_kvpacked_func(q, randn(2, 4, 3, 2, 32)), ValueError, "kv"),
]


@pytest.mark.parametrize("label,call,exc,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_naming_argument(label, call, exc, fragment):
    q, k, v = qkv()
    with pytest.raises(exc, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        call(q, k, v)


VARLEN = [
    ("cu dtype", dict(cu_seqlens_q=_cu([4, 4]).long()), TypeError, "cu_seqlens_q has dtype torch.int64"),
    ("cu not monotone", dict(cu_seqlens_q=torch.tensor([0, 6, 5, 8], dtype=torch.int32, device=DEVICE)),
     ValueError, "not monotone"),
    ("cu first", dict(cu_seqlens_k=torch.tensor([1, 4, 8], dtype=torch.int32, device=DEVICE)), ValueError,
     r"cu_seqlens_k\[0\] is 1"),
    ("cu total", dict(cu_seqlens_q=_cu([4, 3])), ValueError, r"cu_seqlens_q\[-1\] is 7"),
    ("cu batch", dict(cu_seqlens_q=_cu([2, 2, 4])), ValueError, "holds 3 sequences"),
    ("max_seqlen", dict(max_seqlen_q=2), ValueError, "max_seqlen_q is 2"),
    ("block_table", dict(block_table=torch.zeros(2, 1, dtype=torch.int32)), ValueError, "block_table"),
    ("sinks varlen", dict(sinks=torch.zeros(2)), ValueError, r"sinks has shape \(2,\); allowed: \(4,\)"),
]


@pytest.mark.parametrize("label,override,exc,fragment", VARLEN, ids=[c[0] for c in VARLEN])
def test_varlen_bad_input(label, override, exc, fragment, monkeypatch):
    # value checks read cu_seqlens: always on CPU tensors, on GPU tensors only in debug mode
    monkeypatch.setenv("FLASH_ATTENTION_DEBUG", "1")
    q, k, v = randn(8, 4, 32), randn(8, 2, 32), randn(8, 2, 32)
    args = dict(cu_seqlens_q=_cu([4, 4]), cu_seqlens_k=_cu([4, 4]), max_seqlen_q=4, max_seqlen_k=4)
    args.update(override)
    with pytest.raises(exc, match=fragment):
        fa.flash_attn_varlen_func(q, k, v, **args)


def test_gpu_value_checks_only_in_debug_mode(monkeypatch):
    """On a GPU, reading cu_seqlens would add a host sync: skipped unless FLASH_ATTENTION_DEBUG=1."""
    if DEVICE != "cuda":
        pytest.skip("CPU tensors are always checked")
    q, k, v = randn(8, 4, 32), randn(8, 2, 32), randn(8, 2, 32)
    bad = torch.tensor([0, 6, 5, 8], dtype=torch.int32, device=DEVICE)
    ok = _cu([4, 4])
    out = fa.flash_attn_varlen_func(q, k, v, bad, ok[[0, 1, 1, 2]], 8, 8)  # not read: runs
    assert out.shape == q.shape
    monkeypatch.setenv("FLASH_ATTENTION_DEBUG", "1")
    with pytest.raises(ValueError, match="not monotone"):
        fa.flash_attn_varlen_func(q, k, v, bad, ok[[0, 1, 1, 2]], 8, 8)


def test_devices_must_match():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="k is on meta but q is on"):
        fa.flash_attn_func(q, k.to("meta"), v)
    with pytest.raises(ValueError, match="alibi_slopes is on meta"):
        fa.flash_attn_func(q, k, v, alibi_slopes=torch.ones(4, device="meta"))
