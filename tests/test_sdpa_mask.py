"""The sdpa backend serving a bool attn_bias (a mask; not causal): exact against the float64 reference,
rows the mask hides entirely give 0 (out and gradients), NaN in gives NaN out where a row reads it, and
the per-mask preparation follows in-place changes of the mask."""
from __future__ import annotations

import math

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import core
from flash_attention_amd.backends import sdpa_mask
from flash_attention_amd.reference import attention_ref
from helpers import DEVICE, assert_matches

DTYPE = torch.float32 if DEVICE == "cpu" else torch.bfloat16  # SDPA's fused CUDA kernels: fp16 / bf16
_GPU_ZEROES = sdpa_mask._gpu_zeroes_hidden_rows  # (the fixture below may replace it)


@pytest.fixture(autouse=True, params=[True, False], ids=lambda x: f"native={x}")
def native(request, monkeypatch):
    """Every test twice: with rows that see no key left to SDPA (where this torch's SDPA gives them 0 itself: on the
    CPU ``_cpu_zeroes_hidden_rows``, on a GPU ``_gpu_zeroes_hidden_rows``, asked per kind of call) and made visible,
    then set to 0 (the route for a torch that does not)."""
    if DEVICE == "cpu":
        if request.param and not sdpa_mask._cpu_zeroes_hidden_rows():
            pytest.skip("this torch's CPU SDPA does not give rows without a key 0")
        monkeypatch.setattr(sdpa_mask, "_cpu_zeroes_hidden_rows", lambda: request.param)
    elif not request.param:
        monkeypatch.setattr(sdpa_mask, "_gpu_zeroes_hidden_rows", lambda *a: False)
    core.clear_plans()  # (a GPU plan keeps its answer: mask_native)
    sdpa_mask._LAST_MASK.clear()
    yield request.param
    sdpa_mask._LAST_MASK.clear()
    core.clear_plans()


def _native(native: bool, q, k) -> bool:
    """The route a call on q, k [b, s, h, d] takes under the fixture's parameter (a GPU's answer per kind of call)."""
    if DEVICE == "cpu" or not native:
        return native
    return sdpa_mask._gpu_zeroes_hidden_rows(q.device, q.dtype, q.shape[-1], False, q.shape[2] != k.shape[2])


def _inputs(b, sq, sk, h, hk, d, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, h, d, generator=g)
    k, v = (torch.randn(b, sk, hk, d, generator=g) for _ in range(2))
    return [t.to(DEVICE, DTYPE).requires_grad_() for t in (q, k, v)]


def _masks(b, h, sq, sk, seed):
    """Key-padding masks [b, 1, 1, sk] with a sequence of length 0, and a full [b, h, sq, sk] mask with a
    hidden row, a hidden (head, row) and random holes."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.tensor([sk, max(1, sk // 3), 0])[-b:]
    keys = (torch.arange(sk)[None, :] < lens[:, None])[:, None, None, :]
    full = torch.rand(b, h, sq, sk, generator=g) > 0.4
    full[0, :, 1] = False
    full[-1, h - 1, sq // 2] = False
    return {"keys": keys.to(DEVICE), "full": full.to(DEVICE)}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["keys", "full"])
@pytest.mark.parametrize("shape", [(3, 37, 37, 4, 4, 32), (3, 17, 45, 4, 2, 64), (2, 64, 64, 2, 1, 16)])
def test_sdpa_bool_mask_exact_with_hidden_rows(kind, shape, causal, native):
    """Causal too on the CPU, where the causal band is merged into the mask (bottom-right: sq < sk leaves each
    query more keys)."""
    if causal and DEVICE != "cpu":
        pytest.skip("a causal masked call is merged into one mask on the CPU only")
    b, sq, sk, h, hk, d = shape
    q, k, v = _inputs(b, sq, sk, h, hk, d, seed=sum(shape))
    mask = _masks(b, h, sq, sk, seed=len(kind))[kind]
    if DEVICE == "cpu":  # the default CPU route for such calls
        assert "-> sdpa (auto)" in fa.explain(q, k, v, attn_bias=mask, causal=causal)
    for _ in range(2):  # the second call reuses the first one's preparation of the key mask
        with fa.use_backend("sdpa"):
            out = fa.flash_attn_func(q, k, v, attn_bias=mask, causal=causal)
    with fa.use_backend("sdpa"), torch.no_grad():  # without a gradient (CPU: hidden rows zeroed in place, or by SDPA)
        for _ in range(2):
            assert torch.equal(fa.flash_attn_func(q, k, v, attn_bias=mask, causal=causal), out)
    if kind == "keys":  # (a key mask's preparation is kept: the route it took, the additive mask it read)
        assert list(sdpa_mask._LAST_MASK[0]._additive) == [(DTYPE, _native(native, q, k))]
    dout = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, _ = attention_ref(q64, k64, v64, attn_bias=mask, causal=causal)
    grads = torch.autograd.grad(ref, (q64, k64, v64), dout.double())
    seen = mask.expand(b, h, sq, sk)
    if causal:
        seen = seen & (torch.arange(sk, device=DEVICE)[None, :] <= torch.arange(sq, device=DEVICE)[:, None] + sk - sq)
    hidden = ~seen.any(-1).transpose(1, 2)  # [b, sq, h]
    assert hidden.any()
    assert (out[hidden] == 0).all() and (dq[hidden] == 0).all()
    for name, x, r in (("out", out, ref), ("dq", dq, grads[0]), ("dk", dk, grads[1]), ("dv", dv, grads[2])):
        assert_matches(x, r, name=name, fp32_tol=2e-5, lowp_tol=2e-2)


def test_sdpa_bool_mask_declines_causal_and_float_bias(monkeypatch):
    """A causal masked call: declined on a GPU, and on the CPU past CAUSAL_MASK_ELEMS_CPU elements of the merged
    mask (here 2 x 16 x 16 = 512 against a limit set to 511)."""
    q, k, v = _inputs(2, 16, 16, 2, 2, 16, seed=1)
    mask = _masks(2, 2, 16, 16, seed=2)["keys"]
    monkeypatch.setattr(sdpa_mask, "CAUSAL_MASK_ELEMS_CPU", 511)
    with fa.use_backend("sdpa"), pytest.raises(fa.BackendUnavailable, match="attn_mask or is_causal"):
        fa.flash_attn_func(q, k, v, attn_bias=mask, causal=True)
    monkeypatch.setattr(sdpa_mask, "CAUSAL_MASK_ELEMS_CPU", 512)
    if DEVICE == "cpu":
        assert "-> sdpa (auto)" in fa.explain(q, k, v, attn_bias=mask, causal=True)
    with fa.use_backend("sdpa"), pytest.raises(fa.BackendUnavailable, match="float attn_bias"):
        fa.flash_attn_func(q, k, v, attn_bias=torch.zeros(2, 1, 1, 16, device=DEVICE, dtype=q.dtype))


def test_sdpa_bool_mask_follows_in_place_changes():
    """The prepared mask is kept per mask tensor (a model's layers share it); writing into the mask
    gives a new preparation, not the stale one."""
    q, k, v = (t.detach() for t in _inputs(2, 16, 16, 2, 2, 16, seed=3))
    mask = torch.ones(2, 1, 1, 16, dtype=torch.bool, device=DEVICE)
    with fa.use_backend("sdpa"):
        first = fa.flash_attn_func(q, k, v, attn_bias=mask)
        mask[1, ..., 4:] = False
        second = fa.flash_attn_func(q, k, v, attn_bias=mask)
    ref, _ = attention_ref(*(t.double() for t in (q, k, v)), attn_bias=mask)
    assert_matches(second, ref, fp32_tol=2e-5, lowp_tol=2e-2)
    assert torch.equal(first[0], second[0]) and not torch.equal(first[1], second[1])


@pytest.mark.skipif(DEVICE != "cpu", reason="the CPU route's NaN restoration")
@pytest.mark.parametrize("where", ["q_visible", "q_hidden", "k_seen", "k_unseen"])
def test_sdpa_bool_mask_nan(where):
    """NaN in a query row the mask shows: NaN out there; in a row it hides entirely: 0; in a key some row
    sees: NaN in those rows; in a key no row sees: nothing (SDPA's additive mask alone would spread it)."""
    q, k, v = (t.detach() for t in _inputs(2, 8, 8, 2, 2, 16, seed=4))
    mask = (torch.arange(8)[None, :] < torch.tensor([8, 0])[:, None])[:, None, None, :]
    mask = mask.expand(2, 2, 8, 8).clone()
    mask[0, :, :, 6:] = False  # keys 6, 7 of sequence 0: seen by no row
    mask[0, 1, 5, 2] = False  # row 5 of head 1 does not see key 2
    expect = torch.zeros(2, 8, 2, dtype=torch.bool)  # [b, sq, h] rows that must be NaN
    if where == "q_visible":
        q[0, 3, 1, 0] = math.nan
        expect[0, 3, 1] = True
    elif where == "q_hidden":
        q[1, 3, 1, 0] = math.nan
    elif where == "k_seen":
        k[0, 2, 1, 0] = math.nan
        expect[0, :, 1] = True
        expect[0, 5, 1] = False
    else:
        k[0, 7, 0, 0] = math.nan
    out = fa.flash_attn_func(q, k, v, attn_bias=mask)
    assert torch.isnan(out[expect]).all() and not torch.isnan(out[~expect]).any()
    assert (out[1] == 0).all()  # sequence 1 is hidden entirely
    ref, _ = attention_ref(*(t.double().nan_to_num(0.0) for t in (q, k, v)), attn_bias=mask)
    torch.testing.assert_close(out[~expect].double(), ref[~expect], atol=1e-5, rtol=1e-5)


def test_sdpa_bool_mask_prep_is_kept_per_mask():
    """One preparation for every layer of a forward pass: the same key mask tensor gets the same object; a
    mask per query row is prepared per call (kept, it would hold a tensor the size of the scores)."""
    mask = torch.rand(2, 1, 1, 9, device=DEVICE) > 0.3
    first = sdpa_mask._mask_prep(mask)
    assert sdpa_mask._mask_prep(mask) is first
    assert sdpa_mask._mask_prep(mask.clone()) is not first
    full = torch.rand(2, 3, 5, 9, device=DEVICE) > 0.3  # per query row: not kept (its size is the scores')
    assert sdpa_mask._mask_prep(full) is not sdpa_mask._mask_prep(full)


@pytest.mark.skipif(DEVICE != "cuda", reason="host synchronisation is a GPU matter")
def test_sdpa_bool_mask_no_host_sync():
    """BERT's call (a key mask, dropout) through the sdpa backend, forward and backward, synchronises
    nothing: the mask's preparation is fixed-size GPU ops."""
    q, k, v = _inputs(4, 128, 128, 12, 12, 64, seed=5)
    mask = _masks(3, 12, 128, 128, seed=6)["keys"]
    mask = torch.cat([mask, mask[:1]])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with fa.use_backend("sdpa"):
            out = fa.flash_attn_func(q, k, v, attn_bias=mask, dropout_p=0.1)
        out.backward(torch.ones_like(out))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert q.grad is not None and (out[2] == 0).all()


@pytest.mark.parametrize("fused", [True, False])
def test_sdpa_bool_mask_both_kernel_choices(fused, monkeypatch):
    """Torch's own kernel choice (asked once per call signature) and the restricted one inside sdpa_kernel
    (where torch would pick its math path) give the exact result."""
    from flash_attention_amd import core

    asked = []
    monkeypatch.setattr(sdpa_mask, "_torch_picks_fused", lambda *a: asked.append(1) or fused)
    core.clear_plans()
    q, k, v = (t.detach() for t in _inputs(3, 21, 21, 4, 2, 32, seed=7))
    mask = _masks(3, 4, 21, 21, seed=8)["keys"]
    with fa.use_backend("sdpa"):
        outs = [fa.flash_attn_func(q, k, v, attn_bias=mask) for _ in range(2)]
    assert asked == [1]  # once per signature
    ref, _ = attention_ref(*(t.double() for t in (q, k, v)), attn_bias=mask)
    for out in outs:
        assert_matches(out, ref, fp32_tol=2e-5, lowp_tol=2e-2)
    core.clear_plans()


@pytest.mark.parametrize("shape", [(3, 1, 9, 1), (2, 3, 7, 1), (1, 4, 5, 1), (4, 1, 1, 1), (1, 1, 6, 1)])
@pytest.mark.parametrize("pattern", ["none", "prefix", "scattered", "all"])
def test_hidden_rows_zeroed_in_place_as_masked_fill(shape, pattern):
    """The CPU's in-place zeroing of hidden rows (``_hidden_runs``: basic indices for a few runs of rows, one advanced
    index past HIDDEN_RUNS) leaves what masked_fill gives, for every broadcast shape of ``hidden`` and rows hidden as a
    padded prefill hides them (a prefix per sequence), scattered (more runs than HIDDEN_RUNS) or all of them."""
    g = torch.Generator().manual_seed(sum(shape) + len(pattern))
    hidden = torch.zeros(shape, dtype=torch.bool)
    if pattern == "prefix":
        for b in range(shape[0]):
            hidden[b, ..., : b + 1, :] = True
    elif pattern == "scattered":
        hidden = torch.rand(shape, generator=g) > 0.5
        hidden.view(-1)[::2] = True
    elif pattern == "all":
        hidden[:] = True
    prep = sdpa_mask._MaskPrep.__new__(sdpa_mask._MaskPrep)
    prep.hidden, prep._rows = hidden, None
    out = torch.randn(*(n if n > 1 else n_out for n, n_out in zip(shape[:3], (3, 4, 9))), 8, generator=g)  # b h sq dv
    want = out.masked_fill(hidden, 0.0)
    for _ in range(2):  # the runs are read once, then kept
        assert torch.equal(prep.zero_hidden_rows(out.clone()), want)
    rows = hidden[..., 0]  # [b, h, sq]: a run starts at a hidden row whose row before it is not hidden
    starts = rows & ~torch.nn.functional.pad(rows, (1, 0))[..., :-1]
    indices = sdpa_mask._hidden_runs(hidden)
    assert type(indices) is (list if int(starts.sum()) <= sdpa_mask.HIDDEN_RUNS else tuple)
    if type(indices) is list:
        assert len(indices) == int(starts.sum())


def _made_by(out: torch.Tensor) -> str:
    """The autograd node that made out, past the views after it (the transpose to [b, s, h, d], the guard's views:
    backends/sdpa_layout.py)."""
    node = out.grad_fn
    while node.name() in ("TransposeBackward0", "ViewBackward0"):
        node = node.next_functions[0][0]
    return node.name()


@pytest.mark.skipif(DEVICE == "cpu", reason="SDPA's fused GPU kernels")
def test_gpu_rows_without_a_key_with_dropout(native):
    """BERT's training call (a key mask, dropout) through the sdpa backend: a sequence without a key gives 0 out and 0
    gradients on both routes; where SDPA's kernels give them 0 themselves (the probe, asked with dropout) the route
    reads the mask as it is (no fill: SDPA's own node makes out), and on sm90 such a call at d=64 goes to sdpa."""
    q, k, v = _inputs(3, 40, 40, 4, 4, 64, seed=5)
    keys = _masks(3, 4, 40, 40, seed=6)["keys"]  # sequence 2: length 0
    routed = native and sdpa_mask._gpu_zeroes_hidden_rows(q.device, q.dtype, 64, True, False)
    with fa.use_backend("sdpa"):
        out = fa.flash_attn_func(q, k, v, dropout_p=0.1, attn_bias=keys)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert (out[2] == 0).all() and (dq[2] == 0).all() and (out[:2] != 0).any()
    assert all(torch.isfinite(t).all() for t in (out, dq, dk, dv))
    assert ("MaskedFill" in _made_by(out)) == (not routed), _made_by(out)
    qh, kh, vh = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))  # as Hugging Face holds them
    with fa.use_backend("sdpa"):
        for _ in range(3):  # the third call takes the plan's masked_heads_first function (Plan.masked)
            out = core.attention_heads_first(qh, kh, vh, 0.1, None, False, (-1, -1), 0.0, keys, None)
    assert any(plan.masked for plan in core._PLANS.values())
    dq, dk, dv = torch.autograd.grad(out, (qh, kh, vh), torch.randn_like(out))
    assert (out[2] == 0).all() and (dq[2] == 0).all() and (out[:2] != 0).any()
    assert all(torch.isfinite(t).all() for t in (out, dq, dk, dv))
    assert ("MaskedFill" in _made_by(out)) == (not routed)
    if torch.cuda.get_device_capability() == (9, 0):
        core.clear_plans()
        expect = "-> sdpa (auto)" if routed else "-> triton (auto)"
        assert expect in fa.explain(q, k, v, dropout_p=0.1, attn_bias=keys)


def test_gpu_probe_asked_once_per_plan_and_never_while_capturing(monkeypatch):
    """_native: a GPU call's answer is asked once and kept in its plan's slot, never while a CUDA graph is being
    captured (nothing kept then: the next call asks); the probe is asked per device index and kind of call."""
    asked = []
    monkeypatch.setattr(sdpa_mask, "_gpu_zeroes_hidden_rows", _GPU_ZEROES)
    monkeypatch.setattr(sdpa_mask, "_gpu_probe", lambda *a: asked.append(a) or True)
    capturing = [True]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    qt, kt = torch.empty(2, 8, 16, 64, device="meta"), torch.empty(2, 2, 16, 64, device="meta")
    params = fa.core.validated_params(torch.empty(2, 16, 8, 64), torch.empty(2, 16, 2, 64),
                                      torch.empty(2, 16, 2, 64), dropout_p=0.1)
    slot = {}
    assert sdpa_mask._gpu_zeroes_hidden_rows(torch.device("cuda", 1), torch.float16, 64, True, True) is False
    assert sdpa_mask._native(None, qt, kt, params, slot) is False and slot == {} and asked == []
    capturing[0] = False
    monkeypatch.setattr(torch.Tensor, "device", property(lambda t: torch.device("cuda", 1)))
    assert sdpa_mask._native(None, qt, kt, params, slot) is True and slot == {"mask_native": True}
    assert asked == [(1, torch.float32, 64, True, True)]
    assert sdpa_mask._native(None, qt, kt, params, slot) is True and len(asked) == 1


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("kind", ["keys", "full"])
def test_sdpa_masked_output_keeps_sdpas_layout(kind, grad, native):
    """Both routes give the output laid out in memory as SDPA's own output over the same call: the fill that sets
    rows without a key to 0 keeps SDPA's layout (a fill over the heads-first view laid it out heads first, so a
    gradient reached SDPA's backward laid out otherwise than on the native route: torch 2.11's cuDNN backward then
    replays a graph built for the other layout, sdpa_layout.py)."""
    b, sq, sk, h, d = 3, 17, 21, 4, 16
    q, k, v = _inputs(b, sq, sk, h, h, d, seed=5)
    mask = _masks(b, h, sq, sk, seed=6)[kind]
    with torch.set_grad_enabled(grad), fa.use_backend("sdpa"):
        out = fa.flash_attn_func(q, k, v, attn_bias=mask)
        bias = torch.zeros(mask.shape, dtype=DTYPE, device=DEVICE).masked_fill_(~mask, -1e4)  # no row all -inf
        raw = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                               v.transpose(1, 2), attn_mask=bias).transpose(1, 2)
    assert out.shape == raw.shape and out.stride() == raw.stride()
    hidden = ~mask.expand(b, h, sq, sk).any(-1).transpose(1, 2)
    assert hidden.any() and (out[hidden] == 0).all()
