"""core.attention_heads_first: q, k, v heads first ([b, h, s, d], as Hugging Face holds them) give what attention()
gives on the [b, s, h, d] views, against the float64 oracle, with one autograd node where a kernel-style backend
serves a call that needs gradients for q, k, v only (the torch backend here, on the CPU)."""
import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.reference import attention_ref


def _heads_first(b, sq, sk, h, hk, d, dtype=torch.float32):
    g = torch.Generator().manual_seed(sq * 7 + sk)
    q = torch.randn(b, h, sq, d, generator=g, dtype=dtype).requires_grad_()
    k = torch.randn(b, hk, sk, d, generator=g, dtype=dtype).requires_grad_()
    v = torch.randn(b, hk, sk, d, generator=g, dtype=dtype).requires_grad_()
    return q, k, v


def _reference(q, k, v, dout, **kw):
    q64, k64, v64 = (t.detach().double().transpose(1, 2).requires_grad_() for t in (q, k, v))
    out, _ = attention_ref(q64, k64, v64, **kw)
    return out, torch.autograd.grad(out, (q64, k64, v64), dout.double())


@pytest.mark.parametrize("backend", ["torch", "sdpa"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,masked", [
    (2, 37, 37, 4, 4, 16, False, True),   # a key mask with a row of no keys (sequence 1 all padding)
    (1, 19, 45, 6, 2, 32, True, False),   # GQA, bottom-right causal
    (2, 8, 8, 2, 1, 8, False, False),     # MQA
])
def test_matches_the_oracle(backend, b, sq, sk, h, hk, d, causal, masked):
    q, k, v = _heads_first(b, sq, sk, h, hk, d)
    inputs = [t.detach().clone() for t in (q, k, v)]
    mask = None
    if masked:
        mask = torch.ones(b, sk, dtype=torch.bool)
        mask[0, 30:] = False
        mask[1, :] = False
        mask = mask[:, None, None, :]
    dout = torch.randn(b, sq, h, d)
    core.clear_plans()
    with fa.use_backend(backend):
        out = core.attention_heads_first(q, k, v, 0.0, None, causal, (-1, -1), 0.0, mask, None)
        assert out.shape == (b, sq, h, d)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    ref, ref_grads = _reference(q, k, v, dout, causal=causal, attn_bias=mask)
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=2e-5)
    for g, r, t in zip(grads, ref_grads, (q, k, v)):
        assert g.shape == t.shape
        torch.testing.assert_close(g.double(), r.transpose(1, 2), atol=2e-5, rtol=2e-5)
    for t, before in zip((q, k, v), inputs):
        assert torch.equal(t.detach(), before)  # inputs are not modified


def test_one_node_where_a_kernel_style_backend_serves():
    """The torch backend (forward and backward of our own): the output's node is the heads-first one and leads to
    the inputs' gradient accumulators directly; the same call through attention() records three transposes."""
    q, k, v = _heads_first(1, 16, 16, 2, 2, 8)
    with fa.use_backend("torch"):
        out = core.attention_heads_first(q, k, v, 0.0, None, True, (-1, -1), 0.0, None, None)
        plain = core.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    assert type(out.grad_fn).__name__ == "_HeadsFirstFnBackward"
    assert [type(f).__name__ for f, _ in out.grad_fn.next_functions[:3]] == ["AccumulateGrad"] * 3
    assert [type(f).__name__ for f, _ in plain.grad_fn.next_functions[:3]] == ["TransposeBackward0"] * 3
    torch.testing.assert_close(out, plain, atol=0, rtol=0)


def test_other_calls_take_attention():
    """Sinks that take a gradient (not the lean node), no gradient at all, and a run-style backend: attention() on
    the views, the same values."""
    q, k, v = _heads_first(1, 12, 12, 2, 2, 8)
    sinks = torch.zeros(2, requires_grad=True)
    with fa.use_backend("torch"):
        out = core.attention_heads_first(q, k, v, 0.0, None, False, (-1, -1), 0.0, None, sinks)
        assert type(out.grad_fn).__name__ != "_HeadsFirstFnBackward"
        dq, dsinks = torch.autograd.grad(out.sum(), (q, sinks))
        assert dq.shape == q.shape and dsinks.shape == sinks.shape
        with torch.no_grad():
            assert core.attention_heads_first(q, k, v).grad_fn is None
    with fa.use_backend("sdpa"):
        out = core.attention_heads_first(q, k, v)
        assert type(out.grad_fn).__name__ != "_HeadsFirstFnBackward"


def _same_seed_twice(backend, device, dtype, dropout_p):
    """(out, grads) of attention_heads_first and of attention() on the transposed views, each after the same
    torch.manual_seed: a key mask and dropout, so that the two paths must draw the same seed and mask."""
    b, s, h, d = 2, 67, 4, 64
    results = []
    for heads_first in (True, False):
        torch.manual_seed(5)
        q, k, v = (torch.randn(b, h, s, d, device=device, dtype=dtype).requires_grad_() for _ in range(3))
        keys = torch.ones(b, 1, 1, s, dtype=torch.bool, device=device)
        keys[0, ..., 50:] = False
        dout = torch.randn(b, s, h, d, device=device, dtype=dtype)
        core.clear_plans()
        with fa.use_backend(backend):
            if heads_first:
                out = core.attention_heads_first(q, k, v, dropout_p, None, False, (-1, -1), 0.0, keys, None)
            else:
                out = core.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p,
                                     attn_bias=keys)
            results.append((out, torch.autograd.grad(out, (q, k, v), dout)))
    return results


def test_dropout_draws_what_attention_draws():
    """The torch backend on the CPU, dropout 0.3 with a key mask: the same output and gradients, bitwise."""
    (out, grads), (ref, ref_grads) = _same_seed_twice("torch", "cpu", torch.float32, 0.3)
    assert torch.equal(out, ref)
    for g, r in zip(grads, ref_grads):
        assert torch.equal(g, r)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dropout_p", [0.0, 0.1])
def test_triton_backend_equals_attention(dropout_p):
    """The triton backend on a GPU (bf16, BERT's call: key mask, dropout): the same output and gradients as
    attention() on the views, bitwise; without dropout also against the float64 oracle."""
    (out, grads), (ref, ref_grads) = _same_seed_twice("triton", "cuda", torch.bfloat16, dropout_p)
    assert torch.equal(out, ref)
    for g, r in zip(grads, ref_grads):
        assert torch.equal(g, r)
    if dropout_p == 0:
        torch.manual_seed(5)
        q, k, v = (torch.randn(2, 4, 67, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        keys = torch.ones(2, 1, 1, 67, dtype=torch.bool, device="cuda")
        keys[0, ..., 50:] = False
        ref64, _ = attention_ref(*(t.double().transpose(1, 2) for t in (q, k, v)), attn_bias=keys)
        assert ((out.double() - ref64).norm() / ref64.norm()).item() < 1e-2


@pytest.mark.parametrize("bad", ["q", "sinks"])
def test_bad_input_is_named(bad):
    """A non-tensor argument raises attention()'s error naming it (no AttributeError from the layout change)."""
    q, k, v = _heads_first(1, 8, 8, 2, 2, 8)
    args = dict(q=q, sinks=None)
    args[bad] = [1.0, 2.0]
    with pytest.raises((TypeError, ValueError), match=bad):
        core.attention_heads_first(args["q"], k, v, sinks=args["sinks"])


@pytest.mark.parametrize("causal,scale", [(True, None), (False, 0.3)])
def test_sdpa_takes_heads_first_tensors_as_they_are(causal, scale):
    """From a plan's second call on, an SDPA-served call (the CPU flash op here) passes q, k, v to the op as they are:
    no transposes in (the op's node leads to the inputs' accumulators), one out; each call's values and gradients
    against the float64 oracle, on fresh inputs every call."""
    core.clear_plans()
    with fa.use_backend("sdpa"):
        for i in range(3):
            q, k, v = _heads_first(2, 21, 21, 4, 2, 16)
            q, k, v = (t.detach().add(i).requires_grad_() for t in (q, k, v))  # fresh values, the same signature
            dout = torch.randn(2, 21, 4, 16)
            out = core.attention_heads_first(q, k, v, 0.0, scale, causal)
            grads = torch.autograd.grad(out, (q, k, v), dout)
            ref, ref_grads = _reference(q, k, v, dout, causal=causal, softmax_scale=scale)
            torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=2e-5)
            for g, r in zip(grads, ref_grads):
                torch.testing.assert_close(g.double(), r.transpose(1, 2), atol=2e-5, rtol=2e-5)
            plans = list({id(p): p for p in core._PLANS.values() if p.problem.seqlen_q == 21}.values())
            assert len(plans) == 1  # (filed under two keys: the views' and the heads-first tensors')
            if i == 0:
                assert plans[0].heads is not None  # asked after the first call
            op = out.grad_fn.next_functions[0][0]  # out = op(...)[0].transpose(1, 2)
            names = [type(f).__name__ for f, _ in op.next_functions[:3]]
            assert names == (["AccumulateGrad"] * 3 if i else ["TransposeBackward0"] * 3), names
        assert callable(plans[0].heads)


@pytest.mark.parametrize("grad", [True, False])
def test_repeated_heads_first_call_makes_no_views(grad, monkeypatch):
    """A plan that has served q, k, v heads first is found from their own shapes and strides (``core._key`` with
    heads_first: a key of its own, filed on the first call beside the views' key): the call then makes no view in (one
    out, the runner's), gives the first call's values, and the same signature through attention() on the views takes
    that one plan. A 3-D or 5-D q still gets the validation's message, every call."""
    calls = []
    transpose = torch.Tensor.transpose

    def counted(self, *args):
        calls.append(args)
        return transpose(self, *args)

    core.clear_plans()
    q, k, v = (t.detach().requires_grad_(grad) for t in _heads_first(2, 11, 11, 4, 2, 16))
    with fa.use_backend("sdpa"):
        first = core.attention_heads_first(q, k, v, 0.0, None, True)
        monkeypatch.setattr(torch.Tensor, "transpose", counted)
        for _ in range(2):
            calls.clear()
            out = core.attention_heads_first(q, k, v, 0.0, None, True)
            assert len(calls) == 1 and torch.equal(out, first)
        monkeypatch.undo()
        flat = core.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
        assert torch.equal(flat, first) and len(core._PLANS) == 2 and len(set(map(id, core._PLANS.values()))) == 1
        for bad in (q[0], q[None], q[0], q[None]):
            with pytest.raises(ValueError, match="q"):
                core.attention_heads_first(bad, k, v, 0.0, None, True)
        assert len(core._PLANS) == 2
    core.clear_plans()


def test_saved_views_catch_an_in_place_change_of_q():
    """The kernel-style node saves q, k, v's [b, s, h, d] views (made below autograd, ``core._BELOW_AUTOGRAD``): they
    share q's version counter, so changing q in place between the forward and the backward raises at the backward,
    as it would for q itself, instead of giving gradients of the changed values."""
    q, k, v = _heads_first(1, 9, 9, 2, 2, 8)
    with fa.use_backend("torch"):
        out = core.attention_heads_first(q, k, v, 0.0, None, True)
        assert type(out.grad_fn).__name__ == "_HeadsFirstFnBackward"
        with torch.no_grad():
            q.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


def test_sdpa_heads_first_keeps_nan_in_nan_out():
    """The heads-first runner keeps the CPU op's NaN screen (CONTRACT.md): a NaN in one query row gives NaN in that
    output row alone; the others match the oracle."""
    core.clear_plans()
    with fa.use_backend("sdpa"), torch.no_grad():
        for _ in range(2):
            q, k, v = (t.detach() for t in _heads_first(1, 9, 9, 2, 2, 8))
            q[0, 1, 4, 3] = float("nan")
            out = core.attention_heads_first(q, k, v)
            assert torch.isnan(out[0, 4, 1]).all()
            rest = torch.ones(9, 2, dtype=torch.bool)
            rest[4, 1] = False
            ref, _ = attention_ref(*(t.double().transpose(1, 2) for t in (q, k, v)))
            assert not torch.isnan(out[0][rest]).any()
            torch.testing.assert_close(out[0][rest].double(), ref[0][rest], atol=2e-5, rtol=2e-5)
        assert callable(next(iter(core._PLANS.values())).heads)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_sdpa_masked_repeat_takes_heads_first_tensors(grad, causal, monkeypatch):
    """A masked call SDPA serves (Hugging Face's padded batches), repeated: on its second call the plan's backend
    takes q, k, v heads first as they are (``run_heads_first``, not ``run`` on views), from the third on the function
    it then handed over (``Plan.masked``: neither), with each call's own mask (a new one on the third call). Each call
    matches the oracle:
    a sequence whose keys are all hidden gives 0 (and gradient 0), a NaN in a key the mask hides changes nothing, a
    NaN in a query row gives NaN in that row alone (CONTRACT.md)."""
    from flash_attention_amd.backends.sdpa_backend import SdpaBackend

    seen = []
    for name in ("run", "run_heads_first"):
        real = getattr(SdpaBackend, name)
        monkeypatch.setattr(SdpaBackend, name,
                            lambda self, *a, real=real, name=name: seen.append(name) or real(self, *a))
    b, sq, sk, h, hk, d = 3, 5, 11, 4, 2, 16
    mask = torch.ones(b, 1, 1, sk, dtype=torch.bool)
    mask[0, ..., 7:] = False
    mask[1] = False  # sequence 1: every key hidden
    core.clear_plans()
    with fa.use_backend("sdpa"):
        for call in range(4):
            q, k, v = _heads_first(b, sq, sk, h, hk, d)
            if not grad:
                q, k, v = (t.detach() for t in (q, k, v))
            if call == 2:
                with torch.no_grad():
                    k[0, 1, 9] = float("nan")  # a hidden key of sequence 0
                    q[2, 3, 4] = float("nan")  # query row 4, head 3 of sequence 2
                mask = mask.clone()  # a new mask of the same shape (the next batch's): this one, not the plan's
                mask[2, ..., 8:] = False
            seen.clear()
            scale = 0.3 if causal else None  # (a scale of its own in one of the two)
            out = core.attention_heads_first(q, k, v, softmax_scale=scale, causal=causal, attn_bias=mask)
            assert seen == (["run"] if call == 0 else ["run_heads_first"] if call == 1 else [])
            if call > 0:
                assert callable(next(iter(core._PLANS.values())).masked)
            ref, _ = attention_ref(*(t.detach().double().transpose(1, 2) for t in (q, k, v)), softmax_scale=scale,
                                   causal=causal, attn_bias=mask)
            bad = torch.zeros(b, sq, h, dtype=torch.bool)
            if call == 2:
                bad[2, 4, 3] = True
            assert torch.isnan(out[bad]).all() and not torch.isnan(out[~bad]).any()
            torch.testing.assert_close(out[~bad].detach().double(), ref[~bad], atol=2e-5, rtol=2e-5)
            assert (out[1] == 0).all()
            if grad and call != 2:
                dq, dk, dv = torch.autograd.grad(out.sum(), (q, k, v))
                assert (dq[1] == 0).all() and (dk[1] == 0).all() and (dv[1] == 0).all()
    core.clear_plans()


@pytest.mark.parametrize("sq, opts", [
    (13, dict(causal=True)),
    (1, dict(softcap=5.0, mask=True)),
    (1, dict(sinks=True, window_size=(6, 0), mask=True)),
    (300, dict(causal=True)),  # more than one tile: the views' forward
], ids=["causal", "decode_softcap_mask", "decode_sinks_window_mask", "tiles"])
def test_torch_backend_without_grad_heads_first(sq, opts, monkeypatch):
    """The torch backend without gradients, repeated: where a call fits one tile its plan's forward of heads-first
    tensors serves it from the first repeat (``Plan.heads_kernel``: no views), else the forward on the views; every
    call gives the values of attention() on the transposed tensors, bitwise, and the float64 oracle's."""
    from flash_attention_amd.backends.torch_backend import TorchBackend

    served = []
    real = TorchBackend.forward_heads_first
    monkeypatch.setattr(TorchBackend, "forward_heads_first",
                        lambda self, *a: served.append(real(self, *a) is not None) or real(self, *a))
    b, sk, h, hk, d = 2, 17 if sq < 300 else 300, 4, 2, 8
    core.clear_plans()
    for call in range(3):
        q, k, v = (t.detach() + 0.1 * call for t in _heads_first(b, sq, sk, h, hk, d))  # each call's own values
        kw = dict(causal=opts.get("causal", False), softcap=opts.get("softcap", 0.0),
                  window_size=opts.get("window_size", (-1, -1)))
        if opts.get("mask"):
            kw["attn_bias"] = torch.ones(b, 1, 1, sk, dtype=torch.bool)
            kw["attn_bias"][0, ..., : 4 + call] = False
        if opts.get("sinks"):
            kw["sinks"] = torch.randn(h)
        served.clear()
        with fa.use_backend("torch"), torch.no_grad():
            out = core.attention_heads_first(q, k, v, **kw)
            ref = core.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), **kw)
        assert out.grad_fn is None and out.shape == (b, sq, h, d)
        assert served == ([] if call == 0 else [sq < 300])
        torch.testing.assert_close(out, ref, atol=0, rtol=0)
        oracle, _ = attention_ref(*(t.double().transpose(1, 2) for t in (q, k, v)), **{
            n: (t.double() if torch.is_tensor(t) and t.is_floating_point() else t) for n, t in kw.items()})
        assert (out.double() - oracle).abs().max().item() < 1e-5
        kept = list({id(p): p.slot["tile"] for p in core._PLANS.values() if "tile" in p.slot}.values())
        if sq < 300 and call > 0:  # the plan keeps its tile constants, none of a call's tensors (a KV cache, a mask)
            assert len(kept) == 1 and all(getattr(kept[0][0], n) is None for n in kept[0][0]._CALL)
    core.clear_plans()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_heads_first_on_a_gpu(grad, causal):
    """SDPA's fused GPU op (cuDNN or flash) on heads-first tensors from a plan's second call: the output of attention()
    on the transposed views, bitwise (the op reads the same memory), and its gradients within bf16 rounding (SDPA's
    backward is not bitwise deterministic), on fresh inputs every call."""
    core.clear_plans()
    with fa.use_backend("sdpa"):
        for i in range(3):
            torch.manual_seed(i)
            q, k, v = (torch.randn(2, 8, 200, 64, device="cuda", dtype=torch.bfloat16).requires_grad_(grad)
                       for _ in range(3))
            out = core.attention_heads_first(q, k, v, 0.0, None, causal)
            ref = core.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)
            assert torch.equal(out, ref)
            if grad:  # SDPA's GPU backward is not bitwise deterministic (dQ by atomics): within bf16 rounding
                dout = torch.randn_like(out)
                for g, r in zip(torch.autograd.grad(out, (q, k, v), dout), torch.autograd.grad(ref, (q, k, v), dout)):
                    assert ((g.float() - r.float()).norm() / r.float().norm()).item() < 1e-2
        plan = next(p for p in core._PLANS.values() if p.heads is not None)
        assert callable(plan.heads), "an SDPA-served GPU plan takes heads-first tensors after its first call"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("grad", [True, False])
def test_sdpa_masked_heads_first_on_a_gpu(grad):
    """A masked heads-first call SDPA serves on a GPU, repeated with fresh inputs and each call's own mask: from the
    third call the plan's masked function (``Plan.masked``); every call within bf16 rounding of the float64 oracle, a
    sequence whose keys are all hidden 0 (gradients too), and no host synchronisation from the second call on."""
    core.clear_plans()
    b, sq, sk, h, hk, d = 3, 7, 40, 4, 2, 64
    with fa.use_backend("sdpa"):
        for call in range(4):
            torch.manual_seed(call)
            q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16).requires_grad_(grad)
            k, v = (torch.randn(b, hk, sk, d, device="cuda", dtype=torch.bfloat16).requires_grad_(grad)
                    for _ in range(2))
            mask = torch.ones(b, 1, 1, sk, dtype=torch.bool, device="cuda")
            mask[0, ..., 30 - call:] = False
            mask[1] = False  # every key of sequence 1 hidden
            torch.cuda.set_sync_debug_mode("error" if call else "default")
            try:
                out = core.attention_heads_first(q, k, v, attn_bias=mask)
                grads = torch.autograd.grad(out.float().square().sum(), (q, k, v)) if grad else ()
            finally:
                torch.cuda.set_sync_debug_mode("default")
            plan = next(iter(core._PLANS.values()))
            assert callable(plan.masked) == (call > 0)
            ref, _ = attention_ref(*(t.detach().double().transpose(1, 2) for t in (q, k, v)), attn_bias=mask)
            assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-2
            assert (out[1] == 0).all()
            for g in grads:
                assert torch.isfinite(g).all() and (g[1] == 0).all()
    core.clear_plans()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_gpu_direct_path_equals_the_first_call(grad, causal):
    """flash_attn_func served by SDPA's fused GPU op: from a plan's second call on, its direct function (the op with
    the options bound) gives the first call's output bitwise and its gradients within bf16 rounding (SDPA's backward is
    not bitwise deterministic), and the output is within bf16 rounding of the float64 oracle."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 300, 4, 128, device="cuda", dtype=torch.bfloat16).requires_grad_(grad)
               for _ in range(3))
    dout = torch.randn_like(q)
    core.clear_plans()
    results = []
    with fa.use_backend("sdpa"):
        for _ in range(3):
            out = fa.flash_attn_func(q, k, v, causal=causal)
            results.append((out, torch.autograd.grad(out, (q, k, v), dout) if grad else ()))
    plans = [p for p in core._PLANS.values() if p.problem.headdim == 128]
    assert len(plans) == 1 and callable(plans[0].direct)
    for out, grads in results[1:]:
        assert torch.equal(out, results[0][0])
        for a, b in zip(grads, results[0][1]):  # SDPA's GPU backward is not bitwise deterministic (dQ by atomics)
            assert ((a.float() - b.float()).norm() / b.float().norm()).item() < 1e-2
    ref, _ = attention_ref(q.double(), k.double(), v.double(), causal=causal)
    assert ((results[0][0].double() - ref).norm() / ref.norm()).item() < 1e-2
