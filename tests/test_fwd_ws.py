"""The warp-specialised forward (kernels/fwd_ws.py via launch/fwd_ws.py) against the float64 oracle.

In the interpreter (CPU) the kernel runs as a plain loop (no warp specialisation), at its real
tile (128 x 128, head dim 128): the tests check its addressing (batch / head / GQA offsets, the
descriptors' bounds on query rows past the sequence), its softmax and the LSE; on an sm90 GPU the
same tests run the specialised build (whose LSE store once wrote only half the rows: the NaN
poison catches that). Outputs are
preallocated NaN, and which kernel served is read from the plan, so a test of this path cannot
pass on the main kernel.
"""
from __future__ import annotations

import math

import pytest
import torch

from helpers import DEVICE, assert_matches, rel_err, spied, ws_any_length
from helpers import WS_SERVED as SERVED

pytest.importorskip("triton")

from flash_attention_amd.launch import fwd as launch  # noqa: E402
from flash_attention_amd.launch import fwd_ws  # noqa: E402
from flash_attention_amd.params import AttnParams  # noqa: E402
from flash_attention_amd.reference import attention_ref  # noqa: E402

pytestmark = pytest.mark.triton


@pytest.fixture(autouse=True)
def _any_length(monkeypatch):
    ws_any_length(monkeypatch)


def params(d=128, **kw):
    opts = dict(softmax_scale=d ** -0.5, causal=False, window_left=-1, window_right=-1)
    opts.update(kw)
    return AttnParams(**opts)


def qkv(b, sq, sk, h, hk, dtype, d=128):
    return (torch.randn(b, sq, h, d, dtype=dtype, device=DEVICE),
            torch.randn(b, sk, hk, d, dtype=dtype, device=DEVICE),
            torch.randn(b, sk, hk, d, dtype=dtype, device=DEVICE))


def run_ws(q, k, v, p):
    """The planned call with NaN out / lse; asserts the warp-specialised kernel served it."""
    plan = launch.plan_forward(q, k, v, p)
    assert plan.ws is not None, fwd_ws.ws_reason(launch._arch_of(q.device.type, q.device.index)[1], q, k, v, p, False)
    b, sq, h, d = q.shape
    out = torch.full((b, sq, h, d), math.nan, dtype=q.dtype, device=q.device)
    lse = torch.full((b, h, sq), math.nan, dtype=torch.float32, device=q.device)
    (o, _), launched = spied(launch, "launch_ws", lambda: launch.run_forward(plan, q, k, v, p, out=out, lse=lse))
    assert launched is True, "the main kernel served the call"
    assert o is out and not out.isnan().any() and not lse.isnan().any()
    return out, lse


@pytest.mark.skipif(not SERVED, reason="the warp-specialised forward has an sm90 row only")
@pytest.mark.parametrize("b,sq,sk,h,hk,dtype", [
    (1, 128, 128, 1, 1, torch.bfloat16),   # one block each way
    (2, 76, 256, 4, 2, torch.bfloat16),    # query rows past the sequence (clipped), GQA, two key blocks
    (1, 200, 128, 2, 1, torch.float16),    # sq > sk, MQA, a partial second query block
    (3, 132, 384, 2, 2, torch.float16),    # three sequences, three key blocks, 4 rows in the second block
])
def test_matches_reference(b, sq, sk, h, hk, dtype):
    q, k, v = qkv(b, sq, sk, h, hk, dtype)
    p = params()
    out, lse = run_ws(q, k, v, p)
    ro, rl = attention_ref(q.double(), k.double(), v.double(), softmax_scale=p.softmax_scale)
    lo, _ = attention_ref(q, k, v, softmax_scale=p.softmax_scale)  # the same plain math in the input dtype
    assert_matches(out, ro, lo)
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.skipif(not SERVED, reason="the warp-specialised forward has an sm90 row only")
def test_scale_and_large_scores():
    """A custom softmax_scale, scores far from 0 (the running max moves by hundreds), strided q."""
    q, k, v = qkv(1, 96, 256, 2, 2, torch.bfloat16)
    q = (q * 8).transpose(1, 2).contiguous().transpose(1, 2)  # [b, sq, h, d] view of a [b, h, sq, d] tensor
    p = params(softmax_scale=0.3)
    out, lse = run_ws(q, k, v, p)
    ro, rl = attention_ref(q.double(), k.double(), v.double(), softmax_scale=0.3)
    assert_matches(out, ro, attention_ref(q, k, v, softmax_scale=0.3)[0])
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.skipif(not SERVED, reason="the warp-specialised forward has an sm90 row only")
def test_packed_and_plain_kv():
    """K contiguous, V a view of a packed [b, sk, 3, hk, d] tensor (flash_attn_qkvpacked_func's layout):
    V's row and batch strides differ from K's (each tensor is addressed with its own); GQA."""
    q = torch.randn(2, 64, 4, 128, dtype=torch.float16, device=DEVICE)
    k = torch.randn(2, 256, 2, 128, dtype=torch.float16, device=DEVICE)
    v = torch.randn(2, 256, 3, 2, 128, dtype=torch.float16, device=DEVICE)[:, :, 2]
    out, lse = run_ws(q, k, v, params())
    ro, rl = attention_ref(q.double(), k.double(), v.double())
    assert_matches(out, ro, attention_ref(q, k, v)[0])
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.skipif(not SERVED, reason="the warp-specialised forward has an sm90 row only")
def test_chunk_offsets_without_mask():
    """A ring piece off the diagonal: not causal, with diagonal / dropout offsets that mean nothing
    without a mask or dropout; served, and equal to the plain call."""
    q, k, v = qkv(2, 64, 128, 2, 1, torch.bfloat16)
    out, lse = run_ws(q, k, v, params(diag_offset=-192, dropout_offset_q=64, dropout_offset_k=128))
    ref_out, ref_lse = run_ws(q, k, v, params())
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
    assert_matches(out, attention_ref(q.double(), k.double(), v.double())[0], attention_ref(q, k, v)[0])


@pytest.mark.parametrize("change,why", [
    (dict(causal=True, window_right=0), "mask"),
    (dict(window_left=16), "mask"),
    (dict(dropout_p=0.1), "dropout"),
    (dict(softmax_scale=-0.1), "softmax_scale"),
    (dict(softcap=30.0), "softcap"),
])
def test_declines_options(change, why):
    q, k, v = qkv(1, 64, 128, 2, 2, torch.bfloat16)
    p = params(**change)
    reason = fwd_ws.ws_reason("sm90", q, k, v, p, False)
    assert reason is not None and why in reason


@pytest.mark.parametrize("shape,why", [
    ((1, 64, 100, 2, 2, torch.bfloat16, 128), "seqlen_k 100"),  # a partial key block would need a mask
    ((1, 64, 128, 2, 2, torch.bfloat16, 64), "no FWD_WS row"),  # d=64: slower than the main kernel
    ((1, 64, 128, 2, 2, torch.float32, 128), "dtype"),
    ((1, 77, 128, 2, 2, torch.bfloat16, 128), "seqlen_q 77"),  # the LSE descriptor's base would be unaligned
])
def test_declines_shapes(shape, why):
    *dims, dtype, d = shape
    q, k, v = qkv(*dims, dtype, d=d)
    reason = fwd_ws.ws_reason("sm90", q, k, v, params(d), False)
    assert reason is not None and why in reason
    assert fwd_ws.ws_reason("gfx942", *qkv(1, 64, 128, 2, 2, torch.bfloat16), params(), False) is not None


def test_env_turns_it_off(monkeypatch):
    q, k, v = qkv(1, 64, 128, 2, 2, torch.bfloat16)
    assert fwd_ws.ws_reason("sm90", q, k, v, params(), False) is None
    monkeypatch.setenv("FLASH_ATTENTION_WARP_SPEC", "0")
    assert "FLASH_ATTENTION_WARP_SPEC" in fwd_ws.ws_reason("sm90", q, k, v, params(), False)


def test_rows_serve_their_own_head_dim_only():
    """A FWD_WS row serves exactly its head dim (the descriptors' block is the whole head dim, nothing
    is padded): d=128's row does not serve d=96 or d=112, and a d=256 row would serve d=256 only."""
    assert fwd_ws.ws_tile("sm90", 128) is not None
    for d in (64, 96, 112, 120, 256):
        assert fwd_ws.ws_tile("sm90", d) is None, d
    assert fwd_ws.ws_tile("sm80", 128) is None and fwd_ws.ws_tile("gfx942", 128) is None
    q, k, v = qkv(1, 64, 128, 2, 2, torch.bfloat16, d=96)
    assert "no FWD_WS row" in fwd_ws.ws_reason("sm90", q, k, v, params(96), False)


def test_min_seqlen_rule(monkeypatch):
    """On a GPU arch both warp-specialised kernels decline calls shorter than WS_MIN_SEQLEN (in queries or
    keys: measured slower there); the interpreter (arch None) serves them, for the tests."""
    monkeypatch.setattr(fwd_ws, "WS_MIN_SEQLEN", 2048)
    from flash_attention_amd.launch import bwd_ws

    for sq, sk in ((1024, 4096), (4096, 1024)):
        q, k, v = qkv(1, sq, sk, 2, 2, torch.bfloat16)
        assert "below 2048" in fwd_ws.ws_reason("sm90", q, k, v, params(), False)
        assert "below 2048" in bwd_ws.dkdv_ws_reason("sm90", q, k, v, params())
        assert fwd_ws.ws_reason(None, q, k, v, params(), False) is None
    q, k, v = qkv(1, 2048, 2048, 2, 2, torch.bfloat16)
    assert fwd_ws.ws_reason("sm90", q, k, v, params(), False) is None
    assert bwd_ws.dkdv_ws_reason("sm90", q, k, v, params()) is None


def test_other_triton_versions_take_the_main_kernels(monkeypatch):
    """Both warp-specialised kernels were checked on a GPU under Triton 3.6 only: under another Triton a GPU
    call takes the main kernels (with the reason); the interpreter (arch None) still runs them, for the tests."""
    from flash_attention_amd.launch import bwd_ws

    q, k, v = qkv(1, 2048, 2048, 2, 2, torch.bfloat16)
    monkeypatch.setattr(fwd_ws, "_ws_triton", [])
    monkeypatch.setattr(fwd_ws, "WS_TRITON", ("0.1",))
    reason = fwd_ws.ws_reason("sm90", q, k, v, params(), False)
    assert reason is not None and "checked under Triton 0.1 only" in reason
    assert bwd_ws.dkdv_ws_reason("sm90", q, k, v, params()) == reason
    assert fwd_ws.ws_reason(None, q, k, v, params(), False) is None
