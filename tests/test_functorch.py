"""torch.func transforms over the attention functions served by a kernel-style backend (torch; triton on a GPU or in
its interpreter): ``torch.func.grad`` gives eager autograd's gradients (``core._FuncAttentionFn``), against the float64
oracle; vmap (and jacrev, which vmaps the backward) raises a NotImplementedError that names it and says what to do."""
import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd.reference import attention_ref
from helpers import DEVICE, HAS_TRITON, assert_matches


def _inputs(dtype, b=2, sq=19, sk=23, h=4, hk=2, d=16):
    g = torch.Generator().manual_seed(sq * 31 + sk)
    q = torch.randn(b, sq, h, d, generator=g, dtype=dtype).to(DEVICE)
    k, v = (torch.randn(b, sk, hk, d, generator=g, dtype=dtype).to(DEVICE) for _ in range(2))
    bias = torch.randn(1, h, sq, sk, generator=g, dtype=torch.float32).to(DEVICE)
    sinks = torch.randn(h, generator=g, dtype=torch.float32).to(DEVICE)
    return q, k, v, bias, sinks


def _loss(q, k, v, bias, sinks, backend):
    with fa.use_backend(backend):
        out, lse, _ = fa.flash_attn_func(q, k, v, causal=True, softcap=3.0, attn_bias=bias, sinks=sinks,
                                         return_attn_probs=True)
    w = torch.linspace(-1, 1, out.shape[-1], device=out.device, dtype=torch.float64)
    return (out.double() * w).sum() + 0.1 * lse.double().sum()  # the LSE's gradient too


def _oracle(q, k, v, bias, sinks):
    q64, k64, v64, b64, s64 = (t.detach().double().requires_grad_() for t in (q, k, v, bias, sinks))
    out, lse = attention_ref(q64, k64, v64, causal=True, softcap=3.0, attn_bias=b64, sinks=s64)
    w = torch.linspace(-1, 1, out.shape[-1], device=out.device, dtype=torch.float64)
    ((out * w).sum() + 0.1 * lse.sum()).backward()
    return q64.grad, b64.grad, s64.grad


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_grad_transform_equals_autograd(backend):
    """torch.func.grad over q, the float bias and the sinks of a causal softcap call that returns the LSE: the
    gradients of eager autograd in the same process and the float64 oracle's (on the CPU the torch backend in float64,
    triton in its interpreter in float32; on a GPU bf16); a bias the transform does not differentiate gets no
    gradient computed (the backends read its requires_grad)."""
    if backend == "triton" and not HAS_TRITON:
        pytest.skip("needs triton")
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float64 if backend == "torch" else torch.float32
    q, k, v, bias, sinks = _inputs(dtype)
    bias = bias.double() if dtype == torch.float64 else bias
    grads = torch.func.grad(lambda a, bb, ss: _loss(a, k, v, bb, ss, backend), argnums=(0, 1, 2))(q, bias, sinks)
    eager = [t.clone().requires_grad_() for t in (q, bias, sinks)]
    _loss(eager[0], k, v, *eager[1:], backend).backward()
    low = dict(lowp_tol=2e-2) if dtype == torch.bfloat16 else {}
    for g, t, name in zip(grads, eager, ("dq", "dbias", "dsinks")):
        if low:  # (dQ / dbias by atomics on a GPU: equal up to their order)
            assert_matches(g, t.grad.double(), name=name, **low)
        else:
            torch.testing.assert_close(g, t.grad, rtol=1e-12, atol=1e-12)
    # dbias and dsinks are float32 but come from bf16 products on a GPU: bf16's bound for them too
    oracle_tol = dict(low, fp32_tol=2e-2) if low else {}
    for g, r, name in zip(grads, _oracle(q, k, v, bias, sinks), ("dq", "dbias", "dsinks")):
        assert_matches(g, r, name=name, **oracle_tol)
    gq = torch.func.grad(lambda a: _loss(a, k, v, bias, sinks, backend))(q)  # bias and sinks held constant
    torch.testing.assert_close(gq, grads[0], rtol=1e-2 if low else 1e-12, atol=1e-2 if low else 1e-12)
    assert not bias.requires_grad


@pytest.mark.parametrize("transform", ["vmap of grad", "jacrev", "vmap without grads"])
def test_vmap_is_refused_with_what_to_do(transform):
    backend = "triton" if DEVICE == "cuda" or HAS_TRITON else "torch"
    q, k, v, _, _ = _inputs(torch.float32 if DEVICE == "cpu" else torch.bfloat16)

    def one(a):  # a: one sequence's q [sq, h, d]
        with fa.use_backend(backend):
            return fa.flash_attn_func(a[None], k[:1], v[:1], causal=True).float().sum()

    with pytest.raises(NotImplementedError, match="torch.func.vmap .* Fold the mapped dimension"):
        if transform == "jacrev":
            with fa.use_backend(backend):
                torch.func.jacrev(lambda a: fa.flash_attn_func(a, k, v)[0, 0, 0, :3])(q)
        elif transform == "vmap without grads":  # the automatic choice (sdpa on the CPU)
            torch.func.vmap(lambda a: fa.flash_attn_func(a[None], k[:1], v[:1]))(q)
        else:
            torch.func.vmap(torch.func.grad(one))(q)


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_values_without_grads_inside_grad(backend):
    """Inside torch.func.grad, a call on a detached value or under torch.no_grad (q wrapped by the transform, no
    gradient through the call): its output is a constant, so d/dq sum(out * q) is out itself, on triton (its
    kernels on the plain tensors the wrappers hold: ``core._storage_forward``) and on the torch backend."""
    if backend == "triton" and not HAS_TRITON:
        pytest.skip("needs triton")
    q, k, v, _, _ = _inputs(torch.float32 if DEVICE == "cpu" else torch.bfloat16)

    def call(a):
        with fa.use_backend(backend):
            return fa.flash_attn_func(a, k, v, causal=True)

    def under_no_grad(a):
        with torch.no_grad():
            out = call(a)
        return (out.float() * a.float()).sum()

    expected = call(q).float()
    torch.testing.assert_close(torch.func.grad(under_no_grad)(q).float(), expected, rtol=0, atol=0)
    detached = torch.func.grad(lambda a: (call(a.detach()).float() * a.float()).sum())(q)
    torch.testing.assert_close(detached.float(), expected, rtol=0, atol=0)


def test_forward_mode():
    """torch.func.jvp: the torch backend's PyTorch ops carry the tangent (against central differences, float64 on the
    CPU); triton refuses it with what to do instead (its kernels have no tangent rule)."""
    if DEVICE == "cpu":
        q, k, v, _, _ = _inputs(torch.float64)
        t = torch.randn_like(q)
        with fa.use_backend("torch"):
            out, tangent = torch.func.jvp(lambda a: fa.flash_attn_func(a, k, v, causal=True), (q,), (t,))
            eps = 1e-6
            fd = (fa.flash_attn_func(q + eps * t, k, v, causal=True)
                  - fa.flash_attn_func(q - eps * t, k, v, causal=True)) / (2 * eps)
        torch.testing.assert_close(tangent, fd, rtol=1e-6, atol=1e-6)
    if HAS_TRITON:
        q, k, v, _, _ = _inputs(torch.float32 if DEVICE == "cpu" else torch.bfloat16)
        with fa.use_backend("triton"), pytest.raises(NotImplementedError, match="forward-mode AD .* triton backend"):
            torch.func.jvp(lambda a: fa.flash_attn_func(a, k, v, causal=True), (q,), (torch.randn_like(q),))


def test_grad_transform_through_sdpa():
    """A plain call that SDPA serves: torch.func.grad through SDPA's own autograd (its fused op, directly from the
    plan's second call on) equals eager autograd's gradients."""
    q, k, v, _, _ = _inputs(torch.float32 if DEVICE == "cpu" else torch.bfloat16, h=2, hk=2)

    def loss(a):
        with fa.use_backend("sdpa"):
            return fa.flash_attn_func(a, k, v).float().pow(2).sum()

    for _ in range(2):  # the plan's first call, then its direct function
        got = torch.func.grad(loss)(q)
        eager = q.clone().requires_grad_()
        loss(eager).backward()
        torch.testing.assert_close(got, eager.grad, rtol=1e-6, atol=1e-6)
