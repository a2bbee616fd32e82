"""The Gluon dK/dV kernel of the backward (kernels/bwd_gluon.py via launch/bwd_gluon.py).

Triton's interpreter has no Gluon, so on the CPU these tests check which calls the kernel takes
(``dkdv_gluon_reason``), the plan and the sm90 build (compiled here: the asynchronous waits that let the
exponentials and dS^T overlap the products). On an sm90 GPU the public call's gradients are compared with the
float64 oracle's, dk / dv preallocated NaN, and a spy on the launch proves the kernel served.
"""
from __future__ import annotations

import json

import pytest
import torch

from helpers import DEVICE, ON_SM90, attn_params, rel_err, run_fresh, spied

pytest.importorskip("triton")

from flash_attention_amd.launch import bwd as launch  # noqa: E402
from flash_attention_amd.launch import bwd_gluon  # noqa: E402
from flash_attention_amd.reference import attention_ref  # noqa: E402

pytestmark = pytest.mark.triton
GRAD = ((1, 4096, 4 * 128), (4096 * 4 * 128, 4 * 128, 128))  # dk / dv strides of a [1, 4096, 4, 128] call


params = attn_params


def qkv(b, sq, sk, h, hk, dtype=torch.bfloat16, d=128, device=DEVICE):
    return (torch.randn(b, sq, h, d, dtype=dtype, device=device),
            torch.randn(b, sk, hk, d, dtype=dtype, device=device),
            torch.randn(b, sk, hk, d, dtype=dtype, device=device))


def grad_str(k):
    st = k.contiguous().stride()[:3]
    return (st, st)


# --- which calls it takes (CPU) -------------------------------------------------------------------

def test_serves_the_measured_calls():
    """The tables' rows: with dQ (BWD_GLUON_DQ) d=128 from 4096 queries and keys, d=64 from 4096 (128 query rows a
    step, the LSE / delta through TMA; causal calls whose seqlen_q is not a multiple of 4 take the next row, 64 rows
    a step with the loads; GQA calls 64 rows a step); dK/dV only (BWD_GLUON) d=128 causal from 2048; the rest
    measured no faster."""
    causal = params(causal=True)
    for h, hk in ((4, 4), (8, 2)):
        q, k, v = qkv(2, 4096, 4096, h, hk, device="cpu")
        for p in (causal, params()):
            assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, p, grad_str(k)) is None
            assert bwd_gluon.gluon_pick("sm90", q, k, p) == (bwd_gluon.gluon_dq_row("sm90", q, k, p), True)
    q, k, v = qkv(2, 2048, 2048, 4, 4, device="cpu")  # causal 2k: the dK/dV-only row
    assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, causal, grad_str(k)) is None
    assert bwd_gluon.gluon_pick("sm90", q, k, causal)[1] is False
    assert "none from these lengths" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(), grad_str(k))
    q, k, v = qkv(1, 2048, 4096, 4, 2, device="cpu")  # bottom-right causal: every row sees a key
    assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, causal, grad_str(k)) is None
    q, k, v = qkv(2, 1000, 1000, 4, 4, device="cpu")
    assert "below 2048" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, causal, grad_str(k))
    q, k, v = qkv(1, 4096, 4096, 4, 4, d=64, device="cpu")
    for p in (params(64, causal=True), params(64)):
        assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, p, grad_str(k)) is None
        row, with_dq = bwd_gluon.gluon_pick("sm90", q, k, p)
        assert with_dq and (row.config.block_m, row.config.use_tma) == (128, True)
    # d=64 GQA: 64 query rows a step from 2048 keys, causal or not, the LSE / delta through TMA where seqlen_q allows
    for s, tma in ((2048, True), (4096, True), (4097, False)):
        q, k, v = qkv(1, s, s, 8, 2, d=64, device="cpu")
        for p in (params(64, causal=True), params(64)):
            assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, p, grad_str(k)) is None
            row, with_dq = bwd_gluon.gluon_pick("sm90", q, k, p)
            assert with_dq and (row.config.block_m, row.config.use_tma, row.gqa) == (64, True, True)
            assert bwd_gluon._rows_tma(row.config, s) is tma
    q, k, v = qkv(1, 2047, 2047, 8, 2, d=64, device="cpu")
    assert "none from these lengths" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(64), grad_str(k))
    q, k, v = qkv(1, 2048, 2048, 4, 4, d=64, device="cpu")  # d=64 below 4096: the other kernels
    assert "none from these lengths" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(64), grad_str(k))
    # 128 query rows a step only with the LSE / delta through TMA (the loads' build measured 0.88-0.90x)
    q, k, v = qkv(1, 4097, 4097, 4, 4, d=64, device="cpu")
    assert "not a multiple of 4" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(64), grad_str(k))
    assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(64, causal=True), grad_str(k)) is None
    row, with_dq = bwd_gluon.gluon_pick("sm90", q, k, params(64, causal=True))
    assert with_dq and (row.config.block_m, row.config.use_tma) == (64, False)


def test_dq_rules():
    """The kernel's dQ: not for deterministic calls (its reduce-adds' order varies), not when turned off; a call it
    declines keeps the dK/dV-only row where one serves."""
    q, k, v = qkv(1, 4096, 4096, 4, 4, device="cpu")
    causal = params(causal=True)
    assert bwd_gluon.gluon_dq_row("sm90", q, k, causal) is not None
    det = params(causal=True, deterministic=True)
    assert bwd_gluon.gluon_dq_row("sm90", q, k, det) is None
    assert bwd_gluon.gluon_pick("sm90", q, k, det)[1] is False  # the dK/dV-only row (causal d=128)
    assert "deterministic" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(deterministic=True), grad_str(k))
    assert bwd_gluon.gluon_dq_row(None, q, k, causal) is None
    q2, k2, _ = qkv(1, 4095, 4095, 4, 4, device="cpu")
    assert bwd_gluon.gluon_dq_row("sm90", q2, k2, causal) is None


def test_dq_plan():
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    q, k, v = qkv(2, 256, 384, 4, 2, device="cpu")
    cfg = bwd_gluon.gluon_dq_row("sm90", *qkv(1, 4096, 4096, 4, 4, device="cpu")[:2], params()).config
    plan = bwd_gluon.plan_dkdv_gluon(q, k, v, params(), cfg, (4 * 256, 256), k.stride()[:3], True)
    assert plan.dq_template.base is None
    assert plan.dq_template.shape == [2 * 256, 4 * 128] and plan.dq_template.block_shape == [cfg.block_m, 64]
    assert plan.slot.constexprs["DQ"] is True
    assert bwd_gluon.plan_dkdv_gluon(q, k, v, params(), cfg, (4 * 256, 256), k.stride()[:3]).dq_template is None


@pytest.mark.parametrize("change,why", [
    (dict(dropout_p=0.1), "dropout"),
    (dict(softcap=30.0, alibi_slopes=torch.ones(4)), "ALiBi"),
    (dict(alibi_slopes=torch.ones(4), causal=False), "ALiBi"),
    (dict(alibi_slopes=torch.ones(4), softmax_scale=-0.1), "ALiBi"),
    (dict(sinks=torch.zeros(4)), "sinks"),
])
def test_declines_options(change, why):
    q, k, v = qkv(1, 4096, 4096, 4, 4, device="cpu")
    assert why in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(**{"causal": True, **change}), grad_str(k))


def test_causal_alibi(monkeypatch):
    """Causal ALiBi alone (ALIBI: the bias from the tensor cores) takes the kernel where the call without it does,
    with the window rules as they are; the switch turns it off; the plan passes the slopes' batch stride (0 for
    slopes [h]) and gives the launch the slopes."""
    q, k, v = qkv(2, 4096, 4096, 4, 4, device="cpu")
    for slopes in (torch.rand(4), torch.rand(2, 4)):
        assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(causal=True, alibi_slopes=slopes), grad_str(k)) \
            is None
        assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(window_left=4095, window_right=0,
                                                                   alibi_slopes=slopes), grad_str(k)) is None
    assert "a window of 300 keys" in bwd_gluon.dkdv_gluon_reason(
        "sm90", q, k, v, params(causal=True, alibi_slopes=torch.rand(4), window_left=300), grad_str(k))
    q64, k64, v64 = qkv(2, 4096, 4096, 4, 4, d=64, device="cpu")
    assert bwd_gluon.dkdv_gluon_reason("sm90", q64, k64, v64, params(64, causal=True), grad_str(k64)) is None
    assert "ALiBi at d=64" in bwd_gluon.dkdv_gluon_reason("sm90", q64, k64, v64, params(
        64, causal=True, alibi_slopes=torch.rand(4)), grad_str(k64))  # measured slower there
    monkeypatch.setattr(bwd_gluon, "ALIBI", False)
    assert "ALiBi" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(causal=True, alibi_slopes=torch.rand(4)),
                                                  grad_str(k))
    monkeypatch.setattr(bwd_gluon, "ALIBI", True)
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    cfg = bwd_gluon.gluon_dq_row("sm90", q, k, params(causal=True)).config
    for slopes, stride in ((torch.rand(4), 0), (torch.rand(2, 4), 4)):
        plan = bwd_gluon.plan_dkdv_gluon(q, k, v, params(causal=True, alibi_slopes=slopes), cfg, (4 * 4096, 4096),
                                         k.stride()[:3], True)
        assert plan.tail[1][-2] == stride
    assert "Alibi" not in plan.slot.constexprs  # a tensor argument (None for calls without ALiBi)


def test_softcap(monkeypatch):
    """Softcap calls take the kernel (SOFTCAP) on the rows that take them without it, with the window rules as they
    are; the switch turns it off; the plan passes sm_scale / softcap and softcap * log2(e)."""
    q, k, v = qkv(2, 4096, 4096, 4, 4, device="cpu")
    for p in (params(softcap=30.0), params(causal=True, softcap=50.0)):
        assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, p, grad_str(k)) is None
    assert "a window of 300 keys" in bwd_gluon.dkdv_gluon_reason(
        "sm90", q, k, v, params(causal=True, softcap=50.0, window_left=300), grad_str(k))
    monkeypatch.setattr(bwd_gluon, "SOFTCAP", False)
    assert "softcap" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(softcap=30.0), grad_str(k))
    assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(), grad_str(k)) is None
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    cfg = bwd_gluon.gluon_dq_row("sm90", q, k, params()).config
    for cap, on in ((30.0, True), (0.0, False)):
        plan = bwd_gluon.plan_dkdv_gluon(q, k, v, params(softcap=cap), cfg, (4 * 4096, 4096), k.stride()[:3], True)
        assert plan.slot.constexprs["SOFTCAP"] is on
        scale = 128 ** -0.5
        assert plan.tail[-1] == pytest.approx((scale / cap if cap else 0.0, cap * 1.4426950408889634))


def test_causal_windows(monkeypatch):
    """A left window bound on causal calls (or a right bound of 0) takes the causal rows with WINDOW, where measured
    faster (WINDOW_MIN: d=128 from 1024 keys, 512 in groups of 4 query heads); a window whose right bound is not the
    diagonal is declined, and so is a chunk whose last row's window lies past the keys."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    q, k, v = qkv(1, 4096, 4096, 4, 4, device="cpu")
    for p in (params(causal=True, window_left=1024), params(window_left=1024, window_right=0)):
        assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, p, grad_str(k)) is None
        row, with_dq = bwd_gluon.gluon_pick("sm90", q, k, p)
        assert with_dq and row is bwd_gluon.gluon_dq_row("sm90", q, k, params(causal=True))
        plan = bwd_gluon.plan_dkdv_gluon(q, k, v, p, row.config, (4 * 4096, 4096), k.stride()[:3], True)
        assert plan.slot.constexprs["CAUSAL"] is True and plan.slot.constexprs["WINDOW"] is True
        assert plan.tail[1][-3] == 1024  # window_left (then the slopes' batch stride and the order's width)
    causal = bwd_gluon.plan_dkdv_gluon(q, k, v, params(causal=True), row.config, (4 * 4096, 4096), k.stride()[:3])
    assert causal.slot.constexprs["WINDOW"] is False
    assert "right bound" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(window_left=64, window_right=64),
                                                        grad_str(k))
    assert "past the last key" in bwd_gluon.dkdv_gluon_reason(
        "sm90", q, k, v, params(causal=True, window_left=1024, diag_offset=1025), grad_str(k))
    assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(causal=True, window_left=1024, diag_offset=1024),
                                       grad_str(k)) is None
    assert "from 1024 keys" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(causal=True, window_left=1023),
                                                           grad_str(k))
    qg, kg, vg = qkv(1, 4096, 4096, 8, 2, device="cpu")  # groups of 4 query heads: from 512 keys
    assert bwd_gluon.dkdv_gluon_reason("sm90", qg, kg, vg, params(causal=True, window_left=512), grad_str(kg)) is None
    assert "from 512 keys" in bwd_gluon.dkdv_gluon_reason("sm90", qg, kg, vg, params(causal=True, window_left=511),
                                                          grad_str(kg))
    q2, k2, v2 = qkv(1, 4096, 4096, 4, 2, device="cpu")  # groups of 2: as MHA
    assert "from 1024 keys" in bwd_gluon.dkdv_gluon_reason("sm90", q2, k2, v2, params(causal=True, window_left=512),
                                                           grad_str(k2))
    q64, k64, v64 = qkv(1, 4096, 4096, 4, 4, d=64, device="cpu")
    assert "no window" in bwd_gluon.dkdv_gluon_reason("sm90", q64, k64, v64, params(64, causal=True, window_left=2048),
                                                      grad_str(k64))
    monkeypatch.setattr(bwd_gluon, "WINDOW_MIN", {64: (128, 128)})
    assert bwd_gluon.dkdv_gluon_reason("sm90", q64, k64, v64, params(64, causal=True, window_left=128),
                                       grad_str(k64)) is None


def test_explain_names_the_window_rule():
    """The triton backend's plan description (explain()) says where a window takes the Gluon backward and, where it
    does not, why: the same rule as dkdv_gluon_reason (window_reason)."""
    from flash_attention_amd.backends import registry
    from flash_attention_amd.params import Problem

    base = dict(device_type="cuda", is_rocm=False, dtype=torch.bfloat16, batch=4, seqlen_q=4096, seqlen_k=4096,
                nheads=32, headdim=128, headdim_v=128, needs_grad=True, arch="sm90", causal=True, window_right=0)

    def backward_lines(nheads_k, window_left):
        lines = registry()["triton"].describe_plan(Problem(nheads_k=nheads_k, window_left=window_left, **base))
        return [line for line in lines if line.startswith("triton backward:")]

    assert any("Gluon backward kernel" in x and "a window of 1024 keys (WINDOW)" in x for x in backward_lines(32, 1024))
    served = backward_lines(8, 512)  # groups of 4: from 512
    assert any("Gluon backward kernel" in x and "a window of 512 keys (WINDOW)" in x for x in served)
    for nheads_k, left, least in ((32, 512, 1024), (8, 256, 512)):
        lines = backward_lines(nheads_k, left)
        assert any(f"not the Gluon backward kernel: a window of {left} keys" in x and f"from {least} keys" in x
                   for x in lines), lines
        assert not any("instead" in x and "Gluon" in x for x in lines)
    assert not any("WINDOW" in x for x in backward_lines(32, -1))  # a causal call without a window


def test_explain_names_alibi(monkeypatch):
    """explain() says that a causal ALiBi call's backward takes the Gluon kernel (ALIBI) at d=128, and not at d=64,
    not without the causal mask, not with softcap and not when it is off (dkdv_gluon_reason's rule)."""
    from flash_attention_amd.backends import registry
    from flash_attention_amd.params import Problem

    base = dict(device_type="cuda", is_rocm=False, dtype=torch.bfloat16, batch=4, seqlen_q=4096, seqlen_k=4096,
                nheads=32, nheads_k=32, needs_grad=True, arch="sm90", has_alibi=True)

    def gluon_lines(d=128, **kw):
        problem = Problem(**{**base, "headdim": d, "headdim_v": d, "causal": True, "window_right": 0, **kw})
        return [x for x in registry()["triton"].describe_plan(problem) if "Gluon backward kernel" in x]

    assert any("instead" in x and "ALiBi (ALIBI" in x for x in gluon_lines())
    for kw in (dict(d=64), dict(causal=False, window_right=-1), dict(softcap=30.0)):
        assert gluon_lines(**kw) == [], kw
    monkeypatch.setattr(bwd_gluon, "ALIBI", False)
    assert gluon_lines() == []


def test_explain_names_softcap(monkeypatch):
    """explain() says that a softcap call's backward takes the Gluon kernel (SOFTCAP), and not when it is off."""
    from flash_attention_amd.backends import registry
    from flash_attention_amd.params import Problem

    problem = Problem(device_type="cuda", is_rocm=False, dtype=torch.bfloat16, batch=4, seqlen_q=4096, seqlen_k=4096,
                      nheads=32, nheads_k=32, headdim=128, headdim_v=128, needs_grad=True, arch="sm90", softcap=30.0)

    def gluon_lines():
        return [x for x in registry()["triton"].describe_plan(problem) if "Gluon backward kernel" in x]

    assert any("instead" in x and "softcap (SOFTCAP)" in x for x in gluon_lines())
    monkeypatch.setattr(bwd_gluon, "SOFTCAP", False)
    assert gluon_lines() == []


def test_explain_names_the_d64_tile():
    """explain() names the tile the kernel with dQ takes at d=64 causal: 128 query rows a step, or where seqlen_q is
    not a multiple of 4, the 64-row row after it (pick_dq_row, as the launcher); below 4096 keys none."""
    from flash_attention_amd.backends import registry
    from flash_attention_amd.params import Problem

    def backward_lines(seqlen):
        problem = Problem(device_type="cuda", is_rocm=False, dtype=torch.bfloat16, batch=1, seqlen_q=seqlen,
                          seqlen_k=seqlen, nheads=32, nheads_k=32, headdim=64, headdim_v=64, needs_grad=True,
                          arch="sm90", causal=True, window_right=0)
        return [x for x in registry()["triton"].describe_plan(problem) if "Gluon backward kernel computing" in x]

    assert len(backward_lines(4096)) == 1 and "128x128," in backward_lines(4096)[0]
    assert len(backward_lines(4097)) == 1 and "128x64," in backward_lines(4097)[0]
    assert backward_lines(2048) == []


def test_declines_other_calls():
    causal = params(causal=True)
    q, k, v = qkv(1, 2048, 2048, 4, 4, device="cpu")
    assert "no BWD_GLUON / BWD_GLUON_DQ row" in bwd_gluon.dkdv_gluon_reason("sm80", q, k, v, causal, grad_str(k))
    assert "no BWD_GLUON / BWD_GLUON_DQ row" in bwd_gluon.dkdv_gluon_reason(None, q, k, v, causal, grad_str(k))
    q2, k2, v2 = qkv(1, 2048, 2048, 4, 4, d=96, device="cpu")
    assert "no BWD_GLUON / BWD_GLUON_DQ row" in bwd_gluon.dkdv_gluon_reason("sm90", q2, k2, v2, params(96, causal=True),
                                                              grad_str(k2))
    assert "dtype" in bwd_gluon.dkdv_gluon_reason("sm90", q.float(), k.float(), v.float(), causal, grad_str(k))
    q3, k3, v3 = qkv(1, 2048, 2048, 4, 4, device="cpu")  # a chunk whose offset leaves rows without keys
    assert "rows without keys" in bwd_gluon.dkdv_gluon_reason("sm90", q3, k3, v3, params(causal=True, diag_offset=-1),
                                                              grad_str(k3))
    qb = torch.randn(2, 4, 2048, 128, dtype=torch.bfloat16).transpose(1, 2)  # [b, s, h, d] view of [b, h, s, d]
    assert "rows view" in bwd_gluon.dkdv_gluon_reason("sm90", qb, qb, qb, causal, grad_str(k))
    assert "laid out differently" in bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, causal, GRAD)


def test_switches_turn_it_off(monkeypatch):
    q, k, v = qkv(1, 2048, 2048, 4, 4, device="cpu")
    assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(causal=True), grad_str(k)) is None
    monkeypatch.setenv("FLASH_ATTENTION_GLUON", "0")
    assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(causal=True), grad_str(k)) == "FLASH_ATTENTION_GLUON=0"
    monkeypatch.delenv("FLASH_ATTENTION_GLUON")
    monkeypatch.setattr(bwd_gluon, "ENABLED", False)
    assert bwd_gluon.dkdv_gluon_reason("sm90", q, k, v, params(causal=True), grad_str(k)) is not None


def test_plan_keeps_no_tensor():
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    q, k, v = qkv(2, 256, 384, 4, 2, device="cpu")
    cfg = bwd_gluon.dkdv_gluon_row("sm90", 128, True, True).config
    plan = bwd_gluon.plan_dkdv_gluon(q, k, v, params(causal=True), cfg, (4 * 256, 256), k.stride()[:3])
    assert plan.grid == (3, 2 * 2, 1)
    assert all(t.base is None for t in plan.templates)
    assert [t.block_shape for t in plan.templates] == [[cfg.block_m, 128], [64, 128], [64, 128], [cfg.block_m, 128]]
    assert plan.tail[1] == (4, 2, 256, 384, 0, -1, 0, 1)  # (..., the slopes' stride, the order's width: none)
    assert plan.slot.constexprs["ORDER"] is False  # launch order off the GPU
    # the LSE / delta through TMA: a flat [b * h * sq] template, block block_m (its base set per call)
    assert plan.slot.constexprs["ROWS_TMA"] is True and plan.rows_template.base is None
    assert plan.rows_template.shape == [2 * 4 * 256] and plan.rows_template.block_shape == [cfg.block_m]


@pytest.mark.parametrize("seqlen_q,use_tma,rows_tma", [(256, True, True), (300, True, True), (777, True, False),
                                                       (130, True, False), (256, False, False)])
def test_rows_through_tma_only_when_aligned(seqlen_q, use_tma, rows_tma):
    """ROWS_TMA for a tile with use_tma where every head's LSE / delta starts 16-byte aligned (seqlen_q a multiple of
    4: at 777 an H100 raised an illegal instruction); the loads otherwise, and for tiles without it (d=64 causal)."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    from dataclasses import replace

    q, k, v = qkv(2, seqlen_q, 384, 4, 2, device="cpu")
    cfg = replace(bwd_gluon.dkdv_gluon_row("sm90", 128, True, True).config, use_tma=use_tma)
    plan = bwd_gluon.plan_dkdv_gluon(q, k, v, params(causal=True), cfg, (4 * seqlen_q, seqlen_q), k.stride()[:3])
    assert plan.slot.constexprs["ROWS_TMA"] is rows_tma
    assert (plan.rows_template is not None) is rows_tma


def test_sm90_build_overlaps_the_softmax_with_the_products():
    """The compiled sm90 kernel waits for one product while the next runs (wgmma.wait_group 1) and ptxas keeps the
    products asynchronous (it serialises them when registers run short, which the kernel's waits at each step's
    end avoid); the build with dQ has its TMA reduce-adds. Compiled in a fresh process without TRITON_INTERPRET:
    once the interpreter has run a kernel in a process, Triton's patched language makes a Gluon compile there fail
    (``'block_argument' object has no attribute 'dtype'``), so an in-process compile depended on test order."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    code = (
        "import json, triton\n"
        "from triton.backends.compiler import GPUTarget\n"
        "from triton.experimental.gluon._runtime import GluonASTSource\n"
        "from flash_attention_amd.launch import bwd_gluon\n"
        "from flash_attention_amd.tools.check_kernels.compile import attrs_for\n"
        "out = []\n"
        "for s in bwd_gluon.compile_specs('sm90'):\n"
        "    if 'd=128 causal' not in s.label or 'bf16' not in s.label or 'window' in s.label \\\n"
        "            or 'softcap' in s.label or 'alibi' in s.label or 'heavy-first' in s.label:\n"
        "        continue\n"
        "    src = GluonASTSource(fn=s.fn, signature=dict(s.signature), constexprs=dict(s.constexprs),\n"
        "                         attrs=attrs_for(s.fn, s.signature, 'cuda', True, ()))\n"
        "    ptx = triton.compile(src, target=GPUTarget('cuda', 90, 32), options=dict(s.options)).asm['ptx']\n"
        "    out.append((' + dQ' in s.label, 'rows-tma' in s.label, 'wgmma.wait_group.sync.aligned 1;' in ptx,\n"
        "                ptx.count('wgmma.mma_async'),\n"
        "                ptx.count('cp.reduce.async.bulk.tensor.2d.global.shared::cta.add'),\n"
        "                ptx.count('cp.async.bulk.tensor.1d.shared::cluster.global'), ptx.count('ld.global')))\n"
        "print(json.dumps(out))\n")
    builds = json.loads(run_fresh(code).strip().splitlines()[-1])
    # each row twice: LSE / delta through TMA (ROWS_TMA) and through loads (lengths not a multiple of 4)
    assert [b[:2] for b in builds] == [[False, True], [False, False], [True, True], [True, False]]
    for dq, rows_tma, waits_one, products, reduces, row_copies, loads in builds:
        assert waits_one
        assert products >= 8
        # with dQ: the TMA reduce-adds (the kernel's own wrapper of the builder's op), one per loop of each consumer
        assert reduces == (6 if dq else 0)
        # ROWS_TMA: the producer's two 1-D copies (LSE, delta) and no global load left in the consumers
        assert (row_copies, loads == 0) == ((2, True) if rows_tma else (0, False))


# --- against the float64 oracle (sm90 GPU) ------------------------------------------------------

@pytest.fixture(params=["64:2", "32:3"], ids=["m64s2", "m32s3"])
def any_tile(request, monkeypatch):
    """Every Gluon dK/dV build under test serves d=64 and d=128, causal or not, with block_m:stages as the param
    (d=64 takes block_m 64), whatever the committed table holds."""
    from flash_attention_amd.launch import tiles_bwd
    from flash_attention_amd.launch.tiles import Row, Tile

    m, st = (int(x) for x in request.param.split(":"))
    monkeypatch.setitem(tiles_bwd.BWD_GLUON, "sm90", [Row(128, Tile(m, 128, 4, st, use_tma=True)),
                                                      Row(64, Tile(64, 128, 4, st))])
    monkeypatch.setitem(tiles_bwd.BWD_GLUON_DQ, "sm90", [])
    return request.param


@pytest.fixture(params=["64:2", "64:2:tma", "d64m128"], ids=["m64s2", "m64s2tma", "d64m128"])
def dq_tile(request, monkeypatch):
    """The kernel with dQ (BWD_GLUON_DQ) serving d=64 and d=128, causal or not, from any length; no dK/dV-only row.
    m64s2: 64 query rows a step, the LSE / delta loaded; m64s2tma: through TMA (where seqlen_q allows); d64m128:
    d=128 as m64s2tma, d=64 with 128 rows a step through TMA (the committed not-causal d=64 row)."""
    from flash_attention_amd.launch import tiles_bwd
    from flash_attention_amd.launch.tiles import Row, Tile

    tma = request.param != "64:2"
    d64 = Tile(128, 128, 4, 2, use_tma=True) if request.param == "d64m128" else Tile(64, 128, 4, 2, use_tma=tma)
    monkeypatch.setitem(tiles_bwd.BWD_GLUON, "sm90", [])
    monkeypatch.setitem(tiles_bwd.BWD_GLUON_DQ, "sm90", [Row(128, Tile(64, 128, 4, 2, use_tma=tma)), Row(64, d64)])
    return request.param


def _dq_spy(monkeypatch) -> list:
    """Record, for each launch of the Gluon kernel, whether it computed dQ (its plan's dQ descriptor)."""
    seen = []
    real = launch.launch_dkdv_gluon

    def spy(plan, *args, **kwargs):
        seen.append(plan.dq_template is not None)
        return real(plan, *args, **kwargs)

    monkeypatch.setattr(launch, "launch_dkdv_gluon", spy)
    return seen


def _poison(monkeypatch):
    """dq / dk / dv and the fp32 dQ accumulator allocated NaN (the preprocess kernel must zero the accumulator)."""
    monkeypatch.setattr(launch, "_empty_like", lambda t, dtype=None: torch.full_like(
        t, float("nan"), dtype=dtype, memory_format=torch.contiguous_format))
    monkeypatch.setattr(launch, "_empty", lambda shape, dtype, device: torch.full(shape, float("nan"), dtype=dtype,
                                                                                  device=device))


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal", [
    (2, 1000, 1000, 4, 4, 128, False),
    (2, 1000, 1000, 4, 4, 128, True),
    (1, 300, 700, 4, 2, 128, True),   # GQA, bottom-right causal, partial blocks
    (1, 777, 513, 6, 2, 128, False),
    (2, 777, 513, 6, 2, 64, False),
    (1, 513, 513, 2, 1, 64, True),    # MQA
    (1, 130, 130, 2, 2, 64, True),
])
def test_gradients_match_reference(any_tile, monkeypatch, b, sq, sk, h, hk, d, causal):
    import flash_attention_amd as fa
    from flash_attention_amd import core

    core.clear_plans()
    monkeypatch.setattr(launch, "_empty_like", lambda t, dtype=None: torch.full_like(
        t, float("nan"), dtype=dtype, memory_format=torch.contiguous_format))
    q, k, v = (t.requires_grad_() for t in qkv(b, sq, sk, h, hk, d=d))
    dout = torch.randn_like(q)
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v, causal=causal)
    grads, served = spied(launch, "launch_dkdv_gluon", lambda: torch.autograd.grad(out, (q, k, v), dout))
    assert served is True
    _as_exact_as_the_others(grads, q, k, v, dout, causal, monkeypatch)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
@pytest.mark.parametrize("width", [3, 8, 1], ids=["w3", "w8", "w1"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d", [
    (2, 1000, 1000, 8, 4, 128),   # 8 (sequence, KV head)s: groups of 3, 3 and 2 at width 3
    (3, 513, 700, 6, 3, 128),     # bottom-right causal, partial blocks, 9 heads
    (1, 1100, 1100, 4, 1, 64),    # MQA
])
def test_heavy_first_order_covers_every_program(dq_tile, monkeypatch, width, b, sq, sk, h, hk, d):
    """The kernel's ORDER (launch/bwd_gluon.py HEAVY_FIRST) renumbers the programs of a causal call: every (key
    block, sequence x KV head) still runs once, a last group narrower than the width included (dK / dV poisoned with
    NaN before the kernel runs: a program left out leaves NaN, one run twice writes the same values)."""
    grads, q, k, v, dout = _heavy_first_grads(monkeypatch, width, (b, sq, sk, h, hk, d))
    _as_exact_as_the_others(grads, q, k, v, dout, True, monkeypatch)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
@pytest.mark.parametrize("option", ["softcap", "alibi"])
def test_heavy_first_order_with_options(dq_tile, monkeypatch, option):
    """Softcap's and ALiBi's causal builds in heavy-first order (HEAVY_OPTIONS): every program runs once (dK / dV
    poisoned with NaN), the gradients as exact as the same call's with the kernel off; ALiBi's slopes per head, so a
    program given the wrong head's slope fails too."""
    monkeypatch.setattr(bwd_gluon, "HEAVY_OPTIONS", (option,))
    opts = dict(softcap=30.0) if option == "softcap" else dict(
        alibi_slopes=torch.rand(2, 8, device="cuda", dtype=torch.float32))
    grads, q, k, v, dout = _heavy_first_grads(monkeypatch, 3, (2, 1000, 1000, 8, 4, 128), **opts)
    _as_exact_as_the_others(grads, q, k, v, dout, True, monkeypatch, softcap=opts.get("softcap", 0.0),
                            alibi=opts.get("alibi_slopes"))


def _heavy_first_grads(monkeypatch, width: int, shape: tuple, **opts):
    """(dq, dk, dv), q, k, v, dout of a causal call (b, sq, sk, h, hk, d) through the Gluon kernel in heavy-first
    order over ``width`` heads (HEAVY_WIDTH), dK / dV allocated NaN; asserts that the plan took the order."""
    import flash_attention_amd as fa
    from flash_attention_amd import core

    monkeypatch.setattr(bwd_gluon, "HEAVY_WIDTH", width)
    core.clear_plans()
    monkeypatch.setattr(launch, "_empty_like", lambda t, dtype=None: torch.full_like(
        t, float("nan"), dtype=dtype, memory_format=torch.contiguous_format))
    b, sq, sk, h, hk, d = shape
    q, k, v = (t.requires_grad_() for t in qkv(b, sq, sk, h, hk, d=d))
    dout = torch.randn_like(q)
    seen = []
    real = launch.plan_dkdv_gluon

    def plan(*args, **kwargs):
        p = real(*args, **kwargs)
        seen.append((p.slot.constexprs["ORDER"], p.tail[1][-1]))
        return p

    monkeypatch.setattr(launch, "plan_dkdv_gluon", plan)
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v, causal=True, **opts)
    grads, served = spied(launch, "launch_dkdv_gluon", lambda: torch.autograd.grad(out, (q, k, v), dout))
    assert served is True
    assert seen == [(True, width)]
    return grads, q, k, v, dout


def test_heavy_first_rule(monkeypatch):
    """HEAVY_FIRST's rule: causal calls on a GPU of at most HEAVY_WAVES * group * SMs programs, SMs // key blocks heads
    a group, launch order (0) where that is 1 or less, for more programs, calls that are not causal and off the GPU;
    HEAVY_FIRST the least query heads a KV head it takes."""
    monkeypatch.setattr(bwd_gluon, "sm_count", lambda device: 132)
    cuda = torch.device("cuda", 0)
    assert bwd_gluon._order_width(True, 4, 4096, 32 * 32, cuda) == 4  # GQA 32/8 b=4 4k
    assert bwd_gluon._order_width(True, 4, 2048, 16 * 64, cuda) == 8
    assert bwd_gluon._order_width(True, 2, 8192, 64 * 32, cuda) == 2
    assert bwd_gluon._order_width(True, 4, 16384, 128 * 8, cuda) == 0  # width 1
    assert bwd_gluon._order_width(True, 1, 4096, 32 * 16, cuda) == 4  # MHA b=1 h=16
    assert bwd_gluon._order_width(True, 1, 4096, 32 * 64, cuda) == 0  # MHA b=4 h=16: 2048 > 8 * 132 programs
    assert bwd_gluon._order_width(True, 1, 1000, 8, cuda) == 16
    assert bwd_gluon._order_width(False, 4, 4096, 32, cuda) == 0
    assert bwd_gluon._order_width(True, 4, 4096, 32, torch.device("cpu")) == 0
    monkeypatch.setattr(bwd_gluon, "HEAVY_FIRST", 2)
    assert bwd_gluon._order_width(True, 1, 4096, 32, cuda) == 0
    assert bwd_gluon._order_width(True, 2, 4096, 32, cuda) == 4
    monkeypatch.setattr(bwd_gluon, "HEAVY_WIDTH", 3)
    assert bwd_gluon._order_width(True, 1, 4096, 10 ** 6, cuda) == 3
    assert bwd_gluon._order_width(False, 4, 4096, 32, cuda) == 0


def test_heavy_first_only_for_causal_calls_without_a_window(monkeypatch):
    """The order's rule takes causal calls without a window (which bounds every program's length alike): softcap and
    ALiBi calls as HEAVY_OPTIONS names them, else launch order (ORDER off, width 1), even with a width forced."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    monkeypatch.setattr(bwd_gluon, "HEAVY_WIDTH", 4)
    q, k, v = qkv(1, 4096, 4096, 8, 2, device="cpu")
    cfg = bwd_gluon.gluon_dq_row("sm90", q, k, params(causal=True)).config
    calls = {"plain": params(causal=True), "not causal": params(), "window": params(causal=True, window_left=1024),
             "softcap": params(causal=True, softcap=30.0), "alibi": params(causal=True, alibi_slopes=torch.rand(8))}
    for options in (("softcap", "alibi"), ("softcap",), ("alibi",), ()):
        monkeypatch.setattr(bwd_gluon, "HEAVY_OPTIONS", options)
        for name, p in calls.items():
            order = name == "plain" or name in options
            plan = bwd_gluon.plan_dkdv_gluon(q, k, v, p, cfg, (8 * 4096, 4096), k.stride()[:3], True)
            assert plan.slot.constexprs["ORDER"] is order, (options, name)
            assert plan.tail[1][-1] == (4 if order else 1), (options, name)


def _as_exact_as_the_others(grads, q, k, v, dout, causal, monkeypatch, window=(-1, -1), softcap=0.0, alibi=None):
    """grads (dq, dk, dv of the call through the Gluon kernel) finite, and as close to the float64 oracle as the
    same call with the kernel off (the dQ kernel and the other dK/dV kernels), or within 2e-2."""
    import flash_attention_amd as fa
    from flash_attention_amd import core

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ro, _ = attention_ref(q64, k64, v64, causal=causal, window_size=window, softcap=softcap, alibi_slopes=alibi)
    ref = torch.autograd.grad(ro, (q64, k64, v64), dout.double())
    monkeypatch.setattr(bwd_gluon, "ENABLED", False)
    core.clear_plans()
    with fa.use_backend("triton"):
        out_off = fa.flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap, alibi_slopes=alibi)
    off = torch.autograd.grad(out_off, (q, k, v), dout)
    for g, o, r, name in zip(grads, off, ref, "qkv"):
        assert torch.isfinite(g).all(), name
        assert rel_err(g, r) < max(2e-2, 1.5 * rel_err(o, r)), (name, rel_err(g, r), rel_err(o, r))
    core.clear_plans()


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
def test_chunk_diagonal_offset(any_tile):
    """Causal with a chunk's diagonal offset (ring attention's pieces), through forward_pass / backward_pass: row i
    sees keys j <= i + sk - sq + offset."""
    import flash_attention_amd as fa
    from flash_attention_amd import core

    q, k, v = qkv(2, 200, 600, 4, 2)
    dout = torch.randn_like(q)
    for offset in (-400, -150, 0, 77):
        core.clear_plans()
        kw = dict(dropout_p=0.0, softmax_scale=128 ** -0.5, causal=True, window_size=(-1, -1), softcap=0.0,
                  alibi_slopes=None, diag_offset=offset)
        with fa.use_backend("triton"):
            out, lse, _, rng = core.forward_pass(q, k, v, return_softmax=False, **kw)
            grads, served = spied(launch, "launch_dkdv_gluon", lambda out=out, lse=lse, rng=rng, kw=kw:
                                  core.backward_pass(dout, q, k, v, out, lse, deterministic=False, rng_state=rng, **kw))
        assert served is True, offset
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        ro, _ = attention_ref(q64, k64, v64, causal=True, diag_offset=offset)
        ref = torch.autograd.grad(ro, (q64, k64, v64), dout.double())
        for g, r, name in zip(grads, ref, "qkv"):
            assert rel_err(g, r) < 2e-2, (name, offset, rel_err(g, r))
    core.clear_plans()


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal", [
    (2, 1000, 1000, 4, 4, 128, False),  # 1000 keys: the last program's second consumer holds 40 of 64 rows
    (2, 1000, 1000, 4, 4, 128, True),
    (1, 300, 700, 4, 2, 128, True),   # GQA, bottom-right causal, partial blocks
    (2, 777, 513, 6, 2, 128, False),  # 513 keys: the last program's second consumer holds none
    (2, 777, 513, 6, 2, 64, False),
    (2, 1000, 1000, 4, 4, 64, False),  # 1000 queries: a partial last block of 64 and of 128 rows
    (1, 300, 700, 4, 2, 64, False),   # GQA, more keys than queries
    (1, 513, 513, 2, 1, 64, True),    # MQA
    (3, 130, 130, 2, 2, 64, True),
    (2, 64, 64, 2, 2, 128, False),    # one query block, one program, its second consumer empty
    # whole query blocks, not causal, several programs a head (session 42's rotated order had to pass these)
    (2, 1024, 1024, 2, 2, 128, False),
    (2, 256, 1024, 4, 4, 128, False),  # more programs than query blocks
    (1, 512, 640, 4, 2, 64, False),    # GQA; the last program's second consumer past seqlen_k (masked)
])
def test_dq_gradients_match_reference(dq_tile, monkeypatch, b, sq, sk, h, hk, d, causal):
    """The kernel with dQ: dq / dk / dv against the float64 oracle, every output (and the fp32 dQ accumulator)
    allocated NaN, no less exact than the other kernels (the dQ kernel and the dK/dV kernels) on the same call."""
    import flash_attention_amd as fa
    from flash_attention_amd import core

    core.clear_plans()
    _poison(monkeypatch)
    seen = _dq_spy(monkeypatch)
    q, k, v = (t.requires_grad_() for t in qkv(b, sq, sk, h, hk, d=d))
    dout = torch.randn_like(q)
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v, causal=causal)
    tma = []
    real = launch.launch_dkdv_gluon  # _dq_spy's

    def spy(plan, *args, **kwargs):
        tma.append(plan.rows_template is not None)
        return real(plan, *args, **kwargs)

    monkeypatch.setattr(launch, "launch_dkdv_gluon", spy)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    if dq_tile == "d64m128" and d == 64 and sq % 4:  # 128 rows a step need the LSE / delta through TMA: declined
        assert seen == [] and tma == []
    else:
        assert seen == [True]
        # the LSE / delta through TMA where the tile asks for it and seqlen_q allows
        assert tma == [dq_tile != "64:2" and sq % 4 == 0]
    _as_exact_as_the_others(grads, q, k, v, dout, causal, monkeypatch)


_WINDOWS = [
    (2, 1000, 1000, 4, 4, 128, 100, True),  # windows shorter than a query block, partial blocks
    (1, 777, 777, 4, 2, 128, 300, True),    # GQA
    (1, 300, 700, 4, 2, 128, 200, True),    # bottom-right: the first keys outside every window (zero dk / dv)
    (2, 513, 513, 2, 1, 64, 64, True),      # MQA, a window of one key block
    (1, 1024, 1024, 2, 2, 64, 700, False),  # causal=False with a right bound of 0
    (1, 130, 130, 2, 2, 128, 0, True),      # each query sees its own key alone
]


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
@pytest.mark.parametrize("b,sq,sk,h,hk,d,left,causal", _WINDOWS)
@pytest.mark.parametrize("with_dq", [True, False], ids=["dq", "dkdv"])
def test_window_gradients_match_reference(monkeypatch, with_dq, b, sq, sk, h, hk, d, left, causal):
    """Sliding windows (a left bound on causal calls, WINDOW): dq / dk / dv against the float64 oracle, every output
    allocated NaN, the kernel with and without its dQ serving (a spy proves which)."""
    _option_gradients(monkeypatch, with_dq, qkv(b, sq, sk, h, hk, d=d), causal, (left, 0))


_SOFTCAPS = [
    (2, 1000, 1000, 4, 4, 128, False, -1, 30.0),
    (1, 300, 700, 4, 2, 128, True, -1, 50.0),   # GQA, bottom-right causal, partial blocks
    (2, 777, 513, 6, 2, 64, False, -1, 5.0),    # a small cap: most scores where tanh flattens
    (1, 513, 513, 2, 1, 64, True, -1, 30.0),    # MQA
    (1, 777, 777, 4, 2, 128, True, 300, 50.0),  # Gemma 2's layers: softcap with a sliding window
]


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,left,softcap", _SOFTCAPS)
@pytest.mark.parametrize("with_dq", [True, False], ids=["dq", "dkdv"])
def test_softcap_gradients_match_reference(monkeypatch, with_dq, b, sq, sk, h, hk, d, causal, left, softcap):
    """Softcap (SOFTCAP): as the windows' test, inputs scaled up so that many scores reach tanh's flat part."""
    inputs = tuple(t * 3 for t in qkv(b, sq, sk, h, hk, d=d))
    _option_gradients(monkeypatch, with_dq, inputs, causal, (left, 0) if left >= 0 else (-1, -1), softcap)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
@pytest.mark.parametrize("b,sq,sk,h,hk,d,left,slopes,dtype", [
    (2, 1000, 1000, 4, 4, 128, -1, "1d", torch.bfloat16),
    (1, 300, 700, 4, 2, 128, -1, "2d", torch.bfloat16),   # GQA (a slope per query head), bottom-right, partial blocks
    (2, 777, 777, 6, 2, 64, -1, "1d", torch.float16),     # d=64, fp16 parts, seqlen_q not a multiple of 4
    (1, 777, 777, 4, 2, 128, 300, "1d", torch.bfloat16),  # with a sliding window
])
@pytest.mark.parametrize("with_dq", [True, False], ids=["dq", "dkdv"])
def test_alibi_gradients_match_reference(monkeypatch, with_dq, b, sq, sk, h, hk, d, left, slopes, dtype):
    """Causal ALiBi (ALIBI): as the windows' test, with steep slopes (up to 2 a key: the bias spans hundreds within a
    block pair, so a wrong ramp or scalar shows)."""
    monkeypatch.setattr(bwd_gluon, "ALIBI_HEADDIMS", (64, 128))  # d=64: a speed rule; the kernel is exact there too
    inputs = qkv(b, sq, sk, h, hk, dtype, d=d)
    alibi = 2 * (torch.rand(h, device=DEVICE) if slopes == "1d" else torch.rand(b, h, device=DEVICE))
    _option_gradients(monkeypatch, with_dq, inputs, True, (left, 0) if left >= 0 else (-1, -1), alibi=alibi)


def _option_gradients(monkeypatch, with_dq, inputs, causal, window, softcap=0.0, alibi=None):
    """The public call with a window and / or softcap through the kernel (rows for d=64 and d=128 at any length, with
    or without its dQ, every window served), every output allocated NaN, a spy proving which kernel served; its
    gradients against the float64 oracle's and the other kernels'."""
    import flash_attention_amd as fa
    from flash_attention_amd import core
    from flash_attention_amd.launch import tiles_bwd
    from flash_attention_amd.launch.tiles import Row, Tile

    rows = [Row(128, Tile(64, 128, 4, 2, use_tma=True)), Row(64, Tile(64, 128, 4, 2))]
    monkeypatch.setitem(tiles_bwd.BWD_GLUON, "sm90", [] if with_dq else rows)
    monkeypatch.setitem(tiles_bwd.BWD_GLUON_DQ, "sm90", rows if with_dq else [])
    monkeypatch.setattr(bwd_gluon, "WINDOW_MIN", {64: (0, 0), 128: (0, 0)})  # every window (a speed rule)
    core.clear_plans()
    _poison(monkeypatch)
    seen = _dq_spy(monkeypatch)
    q, k, v = (t.requires_grad_() for t in inputs)
    dout = torch.randn_like(q)
    with fa.use_backend("triton"):
        out = fa.flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap, alibi_slopes=alibi)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert seen == [with_dq]
    _as_exact_as_the_others(grads, q, k, v, dout, causal, monkeypatch, window, softcap, alibi)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
def test_dq_chunk_diagonal_offset_and_dlse(dq_tile, monkeypatch):
    """With dQ: causal chunks with a diagonal offset through forward_pass / backward_pass, and a gradient reaching
    the LSE (delta - dlse comes from the preprocess kernel on this path)."""
    import flash_attention_amd as fa
    from flash_attention_amd import core

    q, k, v = qkv(2, 200, 600, 4, 2)
    dout = torch.randn_like(q)
    dlse = torch.randn(2, 4, 200, device=q.device)
    seen = _dq_spy(monkeypatch)
    for offset, lse_grad in ((-400, False), (0, False), (77, False), (0, True)):
        core.clear_plans()
        kw = dict(dropout_p=0.0, softmax_scale=128 ** -0.5, causal=True, window_size=(-1, -1), softcap=0.0,
                  alibi_slopes=None, diag_offset=offset)
        with fa.use_backend("triton"):
            out, lse, _, rng = core.forward_pass(q, k, v, return_softmax=False, **kw)
            grads = core.backward_pass(dout, q, k, v, out, lse, deterministic=False, rng_state=rng,
                                       dlse=dlse if lse_grad else None, **kw)
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        ro, rl = attention_ref(q64, k64, v64, causal=True, diag_offset=offset)
        ref = torch.autograd.grad((ro, rl) if lse_grad else ro, (q64, k64, v64),
                                  (dout.double(), dlse.double()) if lse_grad else dout.double())
        for g, r, name in zip(grads, ref, "qkv"):
            assert rel_err(g, r) < 2e-2, (name, offset, lse_grad, rel_err(g, r))
    assert seen == [True] * 4
    core.clear_plans()


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon dK/dV kernel runs on sm90 only")
def test_dq_not_for_deterministic_calls(dq_tile, monkeypatch):
    """deterministic=True: the reduce-adds' order varies, so the kernel runs without dQ (no dK/dV-only row here:
    the other kernels serve) and dq is bitwise the same on a second run."""
    import flash_attention_amd as fa
    from flash_attention_amd import core

    core.clear_plans()
    seen = _dq_spy(monkeypatch)
    q, k, v = (t.requires_grad_() for t in qkv(1, 1024, 1024, 4, 4))
    dout = torch.randn_like(q)
    runs = []
    for _ in range(2):
        with fa.use_backend("triton"):
            out = fa.flash_attn_func(q, k, v, causal=True, deterministic=True)
        runs.append(torch.autograd.grad(out, (q, k, v), dout))
    assert True not in seen
    assert all(torch.equal(a, c) for a, c in zip(*runs))
    core.clear_plans()
