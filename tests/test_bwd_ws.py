"""The warp-specialised dK/dV kernel (kernels/bwd_ws.py via launch/bwd_ws.py) against the float64 oracle.

In the interpreter (CPU) the kernel runs as a plain loop at its real tile (64 query rows x 128 KV rows,
head dim 128); on an sm90 GPU the same tests run the specialised build. dk / dv start NaN (the
backward's allocations are poisoned), which kernel served is recorded by a spy on the launch, so a test
of this path cannot pass on the main kernel. The shapes put query rows and keys past the sequences
(partial blocks: the unmasked loop relies on the descriptors' bounds there), several sequences and
heads (the [seqlen, heads * d] addressing), GQA / MQA groups and a packed qkv layout.
"""
from __future__ import annotations

import math

import pytest
import torch

from helpers import DEVICE, assert_matches, ws_any_length
from helpers import WS_SERVED as SERVED

pytest.importorskip("triton")

import flash_attention_amd as fa  # noqa: E402
from flash_attention_amd.launch import bwd as launch  # noqa: E402
from flash_attention_amd.launch import bwd_ws  # noqa: E402
from flash_attention_amd.params import AttnParams  # noqa: E402
from flash_attention_amd.reference import attention_ref  # noqa: E402

pytestmark = pytest.mark.triton


@pytest.fixture(autouse=True)
def _any_length(monkeypatch):
    ws_any_length(monkeypatch)


@pytest.fixture
def spy(monkeypatch):
    """Poisoned backward allocations, and a count of the warp-specialised launches."""
    monkeypatch.setattr(launch, "_empty", lambda shape, dtype, device: torch.full(shape, math.nan, dtype=dtype,
                                                                                  device=device))
    launched = []
    real = launch.launch_dkdv_ws

    def counting(*a, **kw):
        launched.append(real(*a, **kw))
        return launched[-1]

    monkeypatch.setattr(launch, "launch_dkdv_ws", counting)
    return launched


def _grads(q, k, v, dout, **kw):
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v, **kw)
    return torch.autograd.grad(out, (q, k, v), dout)


def _check(q, k, v, dout, **kw):
    got = _grads(q, k, v, dout, **kw)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    out64, _ = attention_ref(q64, k64, v64, **kw)
    ref = torch.autograd.grad(out64, (q64, k64, v64), dout.double())
    qd, kd, vd = (t.detach().requires_grad_() for t in (q, k, v))
    outd, _ = attention_ref(qd, kd, vd, **kw)
    lowp = torch.autograd.grad(outd, (qd, kd, vd), dout)
    for name, g, r, lp in zip(("dq", "dk", "dv"), got, ref, lowp):
        assert not g.isnan().any(), name
        assert_matches(g, r, lp, name=name, lowp_tol=3e-2)


@pytest.mark.skipif(not SERVED, reason="the warp-specialised dK/dV kernel has an sm90 row only")
@pytest.mark.parametrize("b,sq,sk,h,hk,dtype", [
    (1, 64, 128, 1, 1, torch.bfloat16),    # one block each way
    (2, 76, 200, 4, 2, torch.bfloat16),    # rows and keys past the sequences, GQA, two sequences
    (1, 132, 64, 3, 1, torch.float16),     # MQA, sq > sk, a partial third query block
    (3, 128, 260, 2, 2, torch.float16),    # three sequences, a partial third KV block
])
def test_matches_reference(spy, b, sq, sk, h, hk, dtype):
    q, dout = (torch.randn(b, sq, h, 128, dtype=dtype, device=DEVICE) for _ in range(2))
    k, v = (torch.randn(b, sk, hk, 128, dtype=dtype, device=DEVICE) for _ in range(2))
    _check(q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), dout)
    assert spy and all(spy), "the main dK/dV kernel served the call"


@pytest.mark.skipif(not SERVED, reason="the warp-specialised dK/dV kernel has an sm90 row only")
def test_packed_qkv_and_scale(spy):
    """q / k / v as views of one packed [b, s, 3, h, d] tensor (row stride 3 h d, heads side by side),
    and a softmax scale other than the default."""
    qkv = torch.randn(2, 72, 3, 2, 128, dtype=torch.bfloat16, device=DEVICE, requires_grad=True)
    q, k, v = qkv.unbind(2)
    dout = torch.randn(2, 72, 2, 128, dtype=torch.bfloat16, device=DEVICE)
    _check(q, k, v, dout, softmax_scale=0.3)
    assert spy and all(spy)


@pytest.mark.skipif(not SERVED, reason="the warp-specialised dK/dV kernel has an sm90 row only")
def test_other_dout_layout_keeps_the_main_kernel(spy):
    """dout whose heads are not side by side in a row (a [b, h, s, d] tensor transposed): the launch
    declines per call and the main kernel serves, with the same results."""
    q, k, v = (torch.randn(1, 64, 2, 128, dtype=torch.bfloat16, device=DEVICE, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(1, 2, 64, 128, dtype=torch.bfloat16, device=DEVICE).transpose(1, 2)
    _check(q, k, v, dout)
    assert spy == [False]


def _params(**kw):
    opts = dict(softmax_scale=128 ** -0.5, causal=False, window_left=-1, window_right=-1)
    opts.update(kw)
    return AttnParams(**opts)


@pytest.mark.parametrize("change,why", [
    (dict(causal=True, window_right=0), "mask"),
    (dict(window_left=16), "mask"),
    (dict(dropout_p=0.1), "dropout"),
    (dict(softcap=30.0), "softcap"),
])
def test_declines_options(change, why):
    q, k, v = (torch.randn(1, 64, 2, 128, dtype=torch.bfloat16) for _ in range(3))
    reason = bwd_ws.dkdv_ws_reason("sm90", q, k, v, _params(**change))
    assert reason is not None and why in reason


@pytest.mark.parametrize("shape,why", [
    ((1, 64, 2, 64), "no BWD_WS row"),  # d=64: no row
    ((1, 66, 2, 128), "seqlen_q 66"),  # the LSE rows' stride would not be 16-byte aligned
])
def test_declines_shapes(shape, why):
    q, k, v = (torch.randn(*shape, dtype=torch.bfloat16) for _ in range(3))
    reason = bwd_ws.dkdv_ws_reason("sm90", q, k, v, _params(softmax_scale=shape[-1] ** -0.5))
    assert reason is not None and why in reason
    q, k, v = (torch.randn(1, 64, 2, 128, dtype=torch.bfloat16) for _ in range(3))
    assert bwd_ws.dkdv_ws_reason("gfx942", q, k, v, _params()) is not None
    assert "dtype" in bwd_ws.dkdv_ws_reason("sm90", q.float(), k.float(), v.float(), _params())
    qt = torch.randn(1, 2, 64, 128, dtype=torch.bfloat16).transpose(1, 2)  # heads not side by side
    assert "side by side" in bwd_ws.dkdv_ws_reason("sm90", qt, k, v, _params())


def test_chunk_offsets_without_mask_are_served():
    """Ring attention's off-diagonal pieces: a chunk's offsets mean nothing without a mask or dropout."""
    q, k, v = (torch.randn(1, 64, 2, 128, dtype=torch.bfloat16) for _ in range(3))
    assert bwd_ws.dkdv_ws_reason("sm90", q, k, v, _params(diag_offset=64, dropout_offset_q=64)) is None


def test_env_turns_it_off(monkeypatch):
    q, k, v = (torch.randn(1, 64, 2, 128, dtype=torch.bfloat16) for _ in range(3))
    assert bwd_ws.dkdv_ws_reason("sm90", q, k, v, _params()) is None
    monkeypatch.setenv("FLASH_ATTENTION_WARP_SPEC", "0")
    assert "FLASH_ATTENTION_WARP_SPEC" in bwd_ws.dkdv_ws_reason("sm90", q, k, v, _params())
