"""The sdpa backend's guard against torch's cuDNN attention backward replaying a graph built for another layout of dO
(backends/sdpa_layout.py): the views' backward makes the gradient contiguous, and on a GPU gradients stay exact when
the layout of dO changes between backwards of one call signature."""
from __future__ import annotations

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd.backends import sdpa_layout
from flash_attention_amd.reference import attention_ref
from helpers import DEVICE, assert_matches


@pytest.mark.parametrize("layout", ["bshd", "bhsd", "expanded"])
def test_fixed_grad_layout_hands_a_contiguous_gradient_on(layout):
    """out [b, s, h, d] contiguous: the same values and storage, and the producer receives the gradient given for it
    with the same values, contiguous whatever its layout; a broadcast one (innermost stride 0, as ``.sum().backward()``
    gives) as it is: torch's cuDNN backward lays such a dO out as the output itself."""
    x = torch.randn(2, 5, 3, 4, dtype=torch.float64, requires_grad=True)
    base = x * 2.0  # the producer: its gradient is recorded below
    seen = []
    base.register_hook(lambda g: seen.append(g))
    out = sdpa_layout.fixed_grad_layout(base)
    assert torch.equal(out, base) and out.data_ptr() == base.data_ptr()
    g = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    grad = {"bshd": g.transpose(1, 2).contiguous(), "bhsd": g.transpose(1, 2),
            "expanded": torch.ones((), dtype=torch.float64).expand(2, 5, 3, 4)}[layout]
    out.backward(grad)
    assert torch.equal(seen[0], grad)
    assert seen[0].is_contiguous() if layout != "expanded" else seen[0].stride() == (0, 0, 0, 0)
    assert torch.equal(x.grad, 2.0 * grad)


def test_fixed_grad_layout_leaves_other_layouts():
    """An output that is not contiguous (q, k, v given heads first and contiguous) is returned as it is."""
    out = torch.randn(2, 3, 5, 4).transpose(1, 2)
    assert sdpa_layout.fixed_grad_layout(out) is out


def test_guard_is_off_on_the_cpu():
    assert not sdpa_layout.grad_layout_guarded(torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="cuDNN's backward")
@pytest.mark.parametrize("masked", [False, True])
def test_gpu_gradients_exact_when_the_layout_of_dout_changes(masked):
    """Backwards of one call signature on the sdpa backend (cuDNN where this torch picks it) with dO laid out
    [b, s, h, d], then heads first, then [b, s, h, d] again: every gradient exact against float64. A shape no other
    test uses, so the first backward of that shape in the process is this test's. Without the guard, torch 2.11's
    cuDNN backward gives the second one wrong gradients (benchmarks/cudnn_grad_layout.py)."""
    b, s, h, d = 2, 83 + 2 * masked, 4, 64
    g = torch.Generator().manual_seed(11 + masked)
    q, k, v = (torch.randn(b, s, h, d, generator=g).to(DEVICE, torch.bfloat16).requires_grad_() for _ in range(3))
    mask = None
    if masked:
        mask = (torch.arange(s)[None, :] < torch.tensor([s, s // 2])[:, None])[:, None, None, :].to(DEVICE)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, _ = attention_ref(q64, k64, v64, attn_bias=mask)
    for layout in ("bshd", "bhsd", "bshd"):
        dout = torch.randn(b, h, s, d, generator=g).to(DEVICE, torch.bfloat16).transpose(1, 2)  # heads first
        if layout == "bshd":
            dout = dout.contiguous()
        with fa.use_backend("sdpa"):
            out = fa.flash_attn_func(q, k, v, attn_bias=mask)
        grads = torch.autograd.grad(out, (q, k, v), dout)
        refs = torch.autograd.grad(ref, (q64, k64, v64), dout.double(), retain_graph=True)
        for name, x, r in zip(("dq", "dk", "dv"), grads, refs):
            assert_matches(x, r, name=f"{name} ({layout})")


@pytest.mark.gpu
@pytest.mark.skipif(DEVICE != "cuda", reason="the GPU probes")
def test_gpu_probes_let_out_no_warning_and_restore_the_sync_debug_mode():
    """Both probes of the sdpa backend (the dO-layout one, the rows-without-a-key one: SDPA's kernels declining a
    probe call each warn once per process) run with no warning reaching the caller, and leave the sync-debug mode
    as they found it, off or on."""
    import warnings

    from flash_attention_amd.backends import sdpa_mask

    for mode in (0, 2):
        torch.cuda.set_sync_debug_mode(mode)
        try:
            sdpa_layout._replays_dout_layout.cache_clear()
            sdpa_mask._gpu_probe.cache_clear()
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                sdpa_layout._replays_dout_layout(torch.cuda.current_device())
                sdpa_mask._gpu_probe(torch.cuda.current_device(), torch.bfloat16, 64, True, False)
            assert torch.cuda.get_sync_debug_mode() == mode
        finally:
            torch.cuda.set_sync_debug_mode(0)
        assert not seen, [str(w.message) for w in seen]
