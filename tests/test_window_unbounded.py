"""A window side that hides no key of any row is dropped (core._unbounded): the call is then the plain (causal) one,
which every backend serves as such. Exact: against the float64 oracle with the window as asked, at the bound and one
key inside it, queries and keys of different lengths, dense and varlen; kernel-only calls (ring attention's shards)
keep the window; explain() says what was dropped."""
import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.reference import attention_ref, attention_ref_varlen


def _qkv(b, sq, sk, seed, total=False):
    g = torch.Generator().manual_seed(seed)
    shape_q, shape_k = ((sq, 4, 16), (sk, 2, 16)) if total else ((b, sq, 4, 16), (b, sk, 2, 16))
    return (torch.randn(shape_q, generator=g, requires_grad=True),
            torch.randn(shape_k, generator=g, requires_grad=True),
            torch.randn(shape_k, generator=g, requires_grad=True))


def _matches_the_oracle(q, k, v, out, lse, grads, kw):
    """out, lse and the gradients of out.sum() against the float64 oracle of the call as asked (kw)."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, ref_lse = attention_ref(q64, k64, v64, **kw)
    ref_grads = torch.autograd.grad(ref, (q64, k64, v64), torch.ones_like(ref))
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(lse.double(), ref_lse, atol=2e-5, rtol=2e-5)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g.double(), r, atol=2e-5, rtol=2e-5)


def _windows(sq, sk):
    """(window_size, causal, whether a side is dropped): each side at its exact bound and one key inside it."""
    left, right = sk - 1, sq - 1  # the bounds: left >= sk - 1 binds no row, right >= sq - 1 neither
    return [((left, 0), False, True), ((left - 1, 0), False, False), ((left + 7, -1), False, True),
            ((left, -1), True, True), ((left - 1, -1), True, False), ((3, right), False, True),
            ((3, right - 1), False, False), ((left, right), False, True), ((-1, right + 5), False, True)]


@pytest.mark.parametrize("backend", ["auto", "torch"])
@pytest.mark.parametrize("sq,sk", [(37, 37), (20, 45), (45, 20)])
def test_dropped_sides_give_the_asked_window(backend, sq, sk):
    for i, (window, causal, dropped) in enumerate(_windows(sq, sk)):
        if causal and sq > sk:
            continue  # rows without keys: covered elsewhere (CONTRACT), not this rule's business
        q, k, v = _qkv(2, sq, sk, seed=100 * sq + i)
        kw = dict(causal=causal, window_size=window)
        with fa.use_backend(None if backend == "auto" else backend):
            text = fa.explain(q, k, v, **kw)
            out, lse, _ = fa.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
            grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
        assert ("hides no key" in text) == dropped, (window, causal, text)
        _matches_the_oracle(q, k, v, out, lse, grads, kw)


def test_a_whole_window_takes_the_plain_calls_backend():
    """On the CPU SDPA serves plain calls and declines windows: a window as long as the keys is served by SDPA."""
    q, k, v = _qkv(1, 64, 64, seed=1)
    assert core.serving_backend(q, k, v, window_size=(63, 0)) == "sdpa"
    assert core.serving_backend(q, k, v, window_size=(62, 0)) != "sdpa"


def test_varlen_uses_the_longest_sequences():
    lens_q, lens_k = [5, 30, 17], [9, 30, 40]
    cu_q = torch.tensor([0, 5, 35, 52], dtype=torch.int32)
    cu_k = torch.tensor([0, 9, 39, 79], dtype=torch.int32)
    q, k, v = _qkv(0, sum(lens_q), sum(lens_k), seed=7, total=True)
    for window, dropped in (((39, 0), True), ((38, 0), False), ((39, 29), True), ((39, 28), True), ((38, 28), False)):
        kw = dict(window_size=window)
        text = fa.explain(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=30, max_seqlen_k=40, **kw)
        assert ("hides no key" in text) == dropped, (window, text)
        assert ("window=" in text) == (window in ((38, 0), (39, 28), (38, 28))), text  # what remains of it
        out = fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 30, 40, **kw)
        ref, _ = attention_ref_varlen(q.detach().double(), k.detach().double(), v.detach().double(), cu_q, cu_k, **kw)
        torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=2e-5)


def test_kernel_only_calls_keep_the_window():
    """Ring attention validates a rank's shard: a window of the whole sequence may bind there though it is longer
    than the shard, so validated_params and forward_pass keep it as asked."""
    q, k, v = _qkv(1, 16, 16, seed=3)
    assert core.validated_params(q, k, v, window_size=(100, 0)).window_left == 100
    out, lse, _, _ = core.forward_pass(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                                       window_size=(100, 0), softcap=0.0, alibi_slopes=None, return_softmax=False)
    plans = [p for p in core._PLANS.values() if p.problem.seqlen_q == 16 and p.params.window_left == 100]
    assert plans and not plans[0].problem.window_dropped


@pytest.mark.parametrize("backend", ["auto", "torch"])
@pytest.mark.parametrize("sq,sk,window", [(1, 1, (-1, -1)), (1, 37, (-1, -1)), (1, 37, (5, -1)), (2, 37, (-1, -1))])
def test_a_diagonal_that_hides_no_key_is_dropped(backend, sq, sk, window):
    """causal with one query row (a decoding step through flash_attn_func): the bottom-right diagonal hides no key,
    so the call is the plain one; two rows keep it. Against the float64 oracle of the call as asked."""
    q, k, v = _qkv(3, sq, sk, seed=sq * 100 + sk)
    kw = dict(causal=True, window_size=window)
    with fa.use_backend(None if backend == "auto" else backend):
        text = fa.explain(q, k, v, **kw)
        out, lse, _ = fa.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
        grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    assert ("hides no key" in text) == (sq == 1), text
    assert (" causal " in text.split("(")[0] + " ") == (sq > 1), text
    _matches_the_oracle(q, k, v, out, lse, grads, kw)
