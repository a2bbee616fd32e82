"""Defects of issue 11: NaN in, NaN out on every backend (the CPU sdpa route returned 0 for a
NaN query row), and ``use_backend`` forcing per thread, robust to exits out of order."""
from __future__ import annotations

import math
import threading

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import config, dispatch
from flash_attention_amd.reference import attention_ref
from helpers import DEVICE, HAS_TRITON

BACKENDS = ["sdpa", "torch"] + (["triton"] if HAS_TRITON and (DEVICE == "cuda" or config.triton_interpret()) else [])


def _nan_case(where, causal):
    """q, k, v [1, 8, 4, 16] (GQA 4/2) with NaN placed so that some rows read it -> (q, k, v, nan, exact):
    ``nan`` [b, sq, h, d] the elements that must be NaN (rows whose query has NaN or that see a key
    with NaN: the whole row; a NaN in v: its dim, in the rows that see it), ``exact`` those that must
    equal the finite result (the rows that read no NaN; a hidden v row's NaN may reach the rows that
    do not see it through 0 * NaN in P @ V on every backend, so those rows are not checked)."""
    g = torch.Generator().manual_seed(7)
    b, s, h, hk, d = 1, 8, 4, 2, 16
    q, k, v = (torch.randn(b, s, n, d, generator=g) for n in (h, hk, hk))
    nan = torch.zeros(b, s, h, d, dtype=torch.bool)
    exact = torch.ones(b, s, h, d, dtype=torch.bool)
    if where == "q":
        q[0, 3, 1, 5] = math.nan
        nan[0, 3, 1] = True
    elif where == "k_first":  # key 0 of KV head 1: under causal it is all that row 0 sees
        k[0, 0, 1, 2] = math.nan
        nan[0, :, 2:] = True  # query heads 2, 3 read KV head 1; every row sees key 0
    elif where == "k_all":  # every key of KV head 0: every score of heads 0, 1 is NaN
        k[0, :, 0, 0] = math.nan
        nan[0, :, :2] = True
    elif where == "v":
        v[0, 5, 0, 3] = math.nan
        sees = torch.arange(s) >= 5 if causal else torch.ones(s, dtype=torch.bool)
        nan[0, sees, :2, 3] = True
        exact[0, ~sees, :2] = False
    exact &= ~nan
    return q, k, v, nan, exact


@pytest.fixture(params=["lse", "sums"])
def nan_screen(request, monkeypatch):
    """The CPU sdpa route's screen for swallowed NaN rows both ways: the kernel's lse where this CPU's
    flash op marks such rows with lse 0 (asked once per process), and the sums of q and k."""
    from flash_attention_amd.backends import sdpa_backend

    if request.param == "lse" and DEVICE == "cpu" and not sdpa_backend._lse_marks_nan_rows():
        pytest.skip("this CPU's flash op does not mark swallowed NaN rows with lse 0")
    if request.param == "sums":
        monkeypatch.setattr(sdpa_backend, "_LSE_SCREEN", [False])
    return request.param


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["q", "k_first", "k_all", "v"])
@pytest.mark.parametrize("causal", [False, True])
def test_nan_in_gives_nan_out(backend, where, causal, nan_screen):
    """A NaN that a row reads gives NaN in that row; the rows that read none are the finite result."""
    if nan_screen == "sums" and (backend != "sdpa" or DEVICE != "cpu"):
        pytest.skip("the screen is the CPU sdpa route's")
    q, k, v, nan, exact = _nan_case(where, causal)
    dtype = torch.float16 if DEVICE == "cuda" else torch.float32  # SDPA's fused CUDA kernels: fp16/bf16
    q, k, v = (t.to(DEVICE, dtype) for t in (q, k, v))
    if backend == "sdpa" and DEVICE == "cpu":
        assert "-> sdpa (auto)" in fa.explain(q, k, v, causal=causal)  # the default CPU route
    with fa.use_backend(backend):
        out = fa.flash_attn_func(q, k, v, causal=causal).cpu()
    missing = nan & ~torch.isnan(out)
    assert not missing.any(), f"not NaN at (b, row, head, dim) {missing.nonzero().tolist()[:8]}"
    ref, _ = attention_ref(*(t.double().cpu().nan_to_num(0.0) for t in (q, k, v)), causal=causal)
    tol = 1e-5 if dtype == torch.float32 else 4e-3
    torch.testing.assert_close(out[exact].double(), ref[exact], atol=tol, rtol=tol)


def test_use_backend_is_per_thread():
    """use_backend("sdpa") in one thread does not force the backend of a call in another thread."""
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def other():
        with fa.use_backend("sdpa"):
            seen["other"] = dispatch.forced()
            inside.set()
            release.wait(30)
        seen["other_after"] = dispatch.forced()

    t = threading.Thread(target=other)
    t.start()
    try:
        assert inside.wait(30)
        assert dispatch.forced() is None
        q = torch.randn(1, 16, 2, 16)
        out = fa.flash_attn_func(q, q, q, window_size=(4, 0))  # sdpa cannot serve a window: would raise
        assert out.shape == q.shape
        with fa.use_backend("torch"):
            assert dispatch.forced() == "torch"
    finally:
        release.set()
        t.join(30)
    assert seen == {"other": "sdpa", "other_after": None}
    assert dispatch.forced() is None


def test_use_backend_out_of_order_exits():
    """A generator holding a use_backend block open and closing it inside another block: each exit
    removes only its own forcing; nothing stays forced once every block has exited."""
    def gen():
        with fa.use_backend("sdpa"):
            yield dispatch.forced()
        yield dispatch.forced()

    g = gen()
    assert next(g) == "sdpa"
    with fa.use_backend("torch"):
        assert dispatch.forced() == "torch"
        assert next(g) == "torch"  # the generator's sdpa block exited; the torch block is still open
        assert dispatch.forced() == "torch"
    assert dispatch.forced() is None  # not "sdpa" (the stale value a token reset would bring back)
    a, b = fa.use_backend("torch"), fa.use_backend("sdpa")
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert dispatch.forced() == "sdpa"  # b is still open
    b.__exit__(None, None, None)
    assert dispatch.forced() is None


@pytest.mark.parametrize("where", ["q", "k_all"])
def test_sdpa_cpu_nan_rows_restored_from_a_kernel_that_swallows_them(where):
    """The CPU flash kernel returns 0 for a row whose visible scores are all NaN (with a finite lse, 0,
    on some CPUs): _nan_rows_cpu puts NaN back there, and leaves a NaN-free call alone."""
    from flash_attention_amd.backends.sdpa_backend import _nan_rows_cpu

    q, k, v, nan, _ = _nan_case(where, causal=False)
    rows = nan.any(-1)  # [b, s, h]
    swallowed = torch.randn(q.shape).masked_fill(rows[..., None], 0.0)  # such a kernel's output
    fixed = _nan_rows_cpu(q, k, swallowed, False)
    assert torch.isnan(fixed[rows]).all() and not torch.isnan(fixed[~rows]).any()
    clean_q, clean_k = q.nan_to_num(0.0), k.nan_to_num(0.0)
    out = torch.randn(q.shape)
    assert _nan_rows_cpu(clean_q, clean_k, out, False) is out


@pytest.mark.parametrize("where", ["q", "k_all"])
def test_sdpa_cpu_nan_screen_by_lse(where, monkeypatch):
    """Where the kernel marks swallowed rows with lse 0, the screen reads the lse alone: a zero sends the
    call through the exact check (NaN restored); an lse without zeros returns the output untouched,
    even for inputs holding NaN (the screen trusts the mark; the exact check is not run)."""
    from flash_attention_amd.backends import sdpa_backend

    monkeypatch.setattr(sdpa_backend, "_LSE_SCREEN", [True])
    q, k, v, nan, _ = _nan_case(where, causal=False)
    rows = nan.any(-1)  # [b, s, h]
    swallowed = torch.randn(q.shape).masked_fill(rows[..., None], 0.0)
    lse = torch.rand(q.shape[0], q.shape[2], q.shape[1]) + 1.0  # [b, h, s], no zero
    marked = lse.masked_fill(rows.transpose(1, 2), 0.0)
    fixed = sdpa_backend._nan_rows_cpu(q, k, swallowed, False, marked)
    assert torch.isnan(fixed[rows]).all() and not torch.isnan(fixed[~rows]).any()
    assert sdpa_backend._nan_rows_cpu(q, k, swallowed, False, lse) is swallowed
    monkeypatch.setattr(sdpa_backend, "_LSE_SCREEN", [False])  # the sums screen ignores the lse
    assert torch.isnan(sdpa_backend._nan_rows_cpu(q, k, swallowed, False, lse)[rows]).all()


@pytest.mark.parametrize("shape", [(2, 37, 3, 24, 37), (2, 37, 3, 24, 3), (1, 300, 1, 64, 300), (1, 5, 2, 16, 9)])
def test_sdpa_cpu_nan_query_rows_across_sizes(shape, nan_screen):
    """The CPU flash op swallows a NaN query row at some sizes (out 0, lse 0) and propagates it at
    others (out NaN, lse NaN): either way the row comes out NaN through the default route, with
    either screen, and the other rows are untouched."""
    if DEVICE != "cpu":
        pytest.skip("the CPU sdpa route")
    b, sq, h, d, sk = shape
    g = torch.Generator().manual_seed(sum(shape))
    q, k, v = torch.randn(b, sq, h, d, generator=g), *(torch.randn(b, sk, h, d, generator=g) for _ in range(2))
    q[-1, sq // 3, -1, 1] = math.nan
    assert "-> sdpa (auto)" in fa.explain(q, k, v)
    out = fa.flash_attn_func(q, k, v)
    rows = torch.zeros(b, sq, h, dtype=torch.bool)
    rows[-1, sq // 3, -1] = True
    assert torch.isnan(out[rows]).all() and not torch.isnan(out[~rows]).any()
    ref, _ = attention_ref(*(t.double() for t in (q.nan_to_num(0.0), k, v)))
    torch.testing.assert_close(out[~rows].double(), ref[~rows], atol=1e-5, rtol=1e-5)


def test_lse_mark_probe_ignores_a_default_device(monkeypatch):
    """The once-per-process probe of the CPU flash op builds its inputs on the CPU itself: a default device
    the caller set (here "meta") does not move them, and the answer is the same."""
    from flash_attention_amd.backends import sdpa_backend

    monkeypatch.setattr(sdpa_backend, "_LSE_SCREEN", [])
    plain = sdpa_backend._lse_marks_nan_rows()
    monkeypatch.setattr(sdpa_backend, "_LSE_SCREEN", [])
    with torch.device("meta"):
        assert sdpa_backend._lse_marks_nan_rows() == plain


@pytest.mark.parametrize("where", ["q", "k_all", "k_first"])
def test_sdpa_cpu_repeated_signature_keeps_nan_rows(where, nan_screen, monkeypatch):
    """A call signature seen before takes the CPU flash op's short path (the plan's direct function,
    sdpa_backend._cpu_runner, with the screen inlined): a NaN-free call first, then the same signature with NaN must
    still give NaN rows exactly where the first path gives them, and the finite rows equal to the float64 oracle."""
    from flash_attention_amd import core
    from flash_attention_amd.backends import sdpa_backend

    q, k, v, nan, exact = _nan_case(where, causal=False)
    clean = [t.nan_to_num(0.0) for t in (q, k, v)]
    seen = []
    real = sdpa_backend._cpu_runner

    def recording(*a):
        run = real(*a)
        return lambda *t: seen.append(1) or run(*t)

    monkeypatch.setattr(sdpa_backend, "_cpu_runner", recording)
    core.clear_plans()  # the signature is planned here, with the recording runner
    with fa.use_backend("sdpa"):
        fa.flash_attn_func(*clean)  # plans the signature; the op is found
        assert seen == []
        out = fa.flash_attn_func(q, k, v)
    core.clear_plans()
    assert seen == [1]
    assert torch.isnan(out[nan]).all()
    ref, _ = attention_ref(q.double(), k.double(), v.double())
    torch.testing.assert_close(out[exact & ~nan], ref.float()[exact & ~nan], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("d", [16, 24, 32, 64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdpa_cpu_direct_path_equals_the_first_call_bitwise(d, causal, scale, dtype):
    """The plan's direct function (later calls of a signature the CPU flash op took) gives the first call's result bit
    for bit, with gradients, and so does SDPA given the same scale: the scale is left to the op only where the op
    computes the same value from its own 1 / sqrt(d) (d=24 and 32: d ** -0.5, our default, differs from it in the
    last bit of the double, so an fp64 call passes it, and in no bit as a float, so an fp32 call does not),
    is_causal only when set."""
    from flash_attention_amd import core

    if DEVICE != "cpu":
        pytest.skip("the CPU sdpa route")
    g = torch.Generator().manual_seed(d)
    q, k, v = (torch.randn(2, 8, 2, d, generator=g, dtype=dtype, requires_grad=True) for _ in range(3))
    core.clear_plans()
    outs, grads = [], []
    for _ in range(3):  # the first call plans and runs the backend; the next ones take the direct function
        out = fa.flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)
        outs.append(out.detach())
        grads.append(torch.autograd.grad(out.sum(), (q, k, v)))
    plans = [p for p in core._PLANS.values() if p.problem.headdim == d]
    core.clear_plans()
    assert len(plans) == 1 and callable(plans[0].direct)
    for out, grad in zip(outs[1:], grads[1:]):
        assert torch.equal(out, outs[0])
        assert all(torch.equal(a, b) for a, b in zip(grad, grads[0]))
    qt, kt, vt = (t.detach().transpose(1, 2) for t in (q, k, v))
    expected = torch.nn.functional.scaled_dot_product_attention(
        qt, kt, vt, is_causal=causal, scale=d ** -0.5 if scale is None else scale).transpose(1, 2)
    assert torch.equal(outs[1], expected)


@pytest.mark.parametrize("mode", ["no input requires grad", "torch.no_grad", "inference_mode"])
def test_sdpa_cpu_direct_path_without_grad_records_nothing(mode):
    """A plan that records no gradient runs its direct function below autograd's dispatch keys
    (``sdpa_backend._below_autograd``: host time): the result equals the first call's and SDPA's bit for bit, carries
    no autograd history and is an ordinary tensor (not a view: what the guard skips), and grad mode is as it was after
    the call: the next call with grads, a plan of its own, records its node and its gradients flow."""
    from flash_attention_amd import core

    if DEVICE != "cpu":
        pytest.skip("the CPU sdpa route")
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 8, 2, 16, generator=g, requires_grad=mode != "no input requires grad")
               for _ in range(3))
    ctx = {"torch.no_grad": torch.no_grad, "inference_mode": torch.inference_mode}.get(mode)
    core.clear_plans()
    outs = []
    for _ in range(3):  # the first call plans; the next ones take the direct function
        if ctx is None:
            outs.append(fa.flash_attn_func(q, k, v, causal=True))
        else:
            with ctx():
                outs.append(fa.flash_attn_func(q, k, v, causal=True))
    plans = list(core._PLANS.values())
    assert len(plans) == 1 and not plans[0].problem.needs_grad and callable(plans[0].direct)
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(t.detach().transpose(1, 2) for t in (q, k, v)), is_causal=True).transpose(1, 2)
    for out in outs:
        assert torch.equal(out, expected) and out.grad_fn is None and not out.requires_grad
    if mode != "inference_mode":  # (inference mode tracks no views and takes no in-place update outside it)
        assert outs[0]._is_view() and not outs[2]._is_view()  # the first call's view chain; the guarded call's none
        outs[2].mul_(2)  # an ordinary tensor: in place works and touches nothing else
        assert torch.equal(outs[2], 2 * outs[1]) and torch.equal(outs[1], expected)
    assert torch.is_grad_enabled()
    q2, k2, v2 = (t.detach().requires_grad_() for t in (q, k, v))
    for _ in range(2):
        out = fa.flash_attn_func(q2, k2, v2, causal=True)
        assert out.grad_fn is not None
        assert torch.equal(out.detach(), expected)
        out.sum().backward()
        assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q2, k2, v2))
    core.clear_plans()


def test_plan_key_follows_forcing_and_environment(monkeypatch):
    """One call signature across changes of FLASH_ATTENTION_BACKEND and use_backend(): the plan cache's key holds
    their raw values (dispatch.forcing_key), so each call is served as forced() says at that moment, a bad value
    raises on every call, and before the validation's errors."""
    q = torch.randn(1, 8, 2, 16)

    def call(**kw):
        return fa.flash_attn_func(q, q, q, softcap=1.0, **kw)  # sdpa declines softcap: forcing it raises

    call()
    monkeypatch.setenv("FLASH_ATTENTION_BACKEND", "sdpa")
    with pytest.raises(fa.BackendUnavailable, match="softcap"):
        call()
    with fa.use_backend(None):
        call()
    with fa.use_backend("torch"):
        call()
    monkeypatch.setenv("FLASH_ATTENTION_BACKEND", " SDPA ")  # the same meaning, another raw value
    with pytest.raises(fa.BackendUnavailable, match="softcap"):
        call()
    monkeypatch.delenv("FLASH_ATTENTION_BACKEND")
    call()
    with fa.use_backend("sdpa"):
        with pytest.raises(fa.BackendUnavailable, match="softcap"):
            call()
        with fa.use_backend("auto"):
            call()
    monkeypatch.setenv("FLASH_ATTENTION_BACKEND", "nope")
    for _ in range(2):
        with pytest.raises(ValueError, match="FLASH_ATTENTION_BACKEND"):
            call()
    with pytest.raises(ValueError, match="FLASH_ATTENTION_BACKEND"):  # before the validation's error
        fa.flash_attn_func(q, q, q, softcap=-1.0)
    monkeypatch.setenv("FLASH_ATTENTION_BACKEND", "torch")
    with fa.use_backend("sdpa"):  # the innermost forcing wins over the environment
        with pytest.raises(fa.BackendUnavailable, match="softcap"):
            call()
    call()
