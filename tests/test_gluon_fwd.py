"""The Gluon forward (kernels/fwd_gluon.py via launch/fwd_gluon.py).

Triton's interpreter has no Gluon, so on the CPU these tests check which calls the kernel takes
(``gluon_reason``), the table, the switch and the sm90 build itself (compiled here with ptxas: no
local memory, and the asynchronous wait that lets the softmax overlap the P V product). On an sm90 GPU
the kernel runs against the float64 oracle: outputs preallocated NaN, and which kernel served is read
from a spy on its launch, so a test of this path cannot pass on another kernel.
"""
from __future__ import annotations

import math

import pytest
import torch

from helpers import DEVICE, ON_SM90, assert_matches, attn_params, rel_err, run_fresh, spied

pytest.importorskip("triton")

from flash_attention_amd.launch import fwd as launch  # noqa: E402
from flash_attention_amd.launch import fwd_gluon, tiles  # noqa: E402
from flash_attention_amd.reference import attention_ref  # noqa: E402

pytestmark = pytest.mark.triton


params = attn_params


def qkv(b, sq, sk, h, hk, dtype, d=128, device=DEVICE):
    return (torch.randn(b, sq, h, d, dtype=dtype, device=device),
            torch.randn(b, sk, hk, d, dtype=dtype, device=device),
            torch.randn(b, sk, hk, d, dtype=dtype, device=device))


# --- which calls it takes (CPU) -------------------------------------------------------------------

def test_serves_plain_and_causal_calls():
    for d in (128, 256):
        q, k, v = qkv(2, 2048, 4096, 4, 2, torch.bfloat16, d=d, device="cpu")
        assert fwd_gluon.gluon_reason("sm90", q, k, v, params(d), False) is None
        assert fwd_gluon.gluon_reason("sm90", q, k, v, params(d, causal=True), False) is None


def test_serves_windows_softcap_alibi():
    """The options table's rows (causal calls, as measured): a window, softcap and ALiBi, alone or together, within
    each head dim's limits (GLUON_OPTION_LIMITS: at d=128 softcap from 16384 keys, windows of 1024 keys or more)."""
    slopes = torch.rand(4)
    served = (dict(window_left=1024, causal=True), dict(alibi_slopes=slopes, causal=True),
              dict(window_left=2048, causal=True, alibi_slopes=slopes))
    for d in (128, 256):
        q, k, v = qkv(2, 4096, 4096, 4, 2, torch.bfloat16, d=d, device="cpu")
        for change in served:
            assert fwd_gluon.gluon_reason("sm90", q, k, v, params(d, **change), False) is None, (d, change)
            assert fwd_gluon.options_of(params(d, **change))
    q, k, v = qkv(2, 4096, 4096, 4, 2, torch.bfloat16, d=256, device="cpu")
    for change in (dict(softcap=30.0, causal=True), dict(window_left=128, causal=True),
                   dict(softcap=50.0, window_left=512, causal=True, alibi_slopes=slopes)):
        assert fwd_gluon.gluon_reason("sm90", q, k, v, params(256, **change), False) is None, change
    q, k, v = qkv(2, 4096, 4096, 4, 2, torch.bfloat16, device="cpu")
    assert "softcap at head dim 128 below 16384" in fwd_gluon.gluon_reason("sm90", q, k, v,
                                                                           params(softcap=30.0, causal=True), False)
    q16, k16, v16 = qkv(1, 16384, 16384, 1, 1, torch.bfloat16, device="cpu")
    assert fwd_gluon.gluon_reason("sm90", q16, k16, v16, params(softcap=30.0, causal=True), False) is None
    assert "window_left 128 < 1024" in fwd_gluon.gluon_reason("sm90", q, k, v, params(window_left=128, causal=True),
                                                             False)
    assert "no FWD_GLUON_OPTIONS row" in fwd_gluon.gluon_reason("sm90", q, k, v, params(window_left=2048), False)
    q, k, v = qkv(2, 2048, 2048, 4, 2, torch.bfloat16, device="cpu")
    assert fwd_gluon.gluon_reason("sm90", q, k, v, params(alibi_slopes=slopes, causal=True), False) is None
    q, k, v = qkv(2, 2040, 2040, 4, 2, torch.bfloat16, device="cpu")
    assert "below 2048" in fwd_gluon.gluon_reason("sm90", q, k, v, params(alibi_slopes=slopes, causal=True), False)
    assert fwd_gluon.flags_of(params(window_left=8, causal=True)) == (True, True, False, False)
    assert fwd_gluon.flags_of(params(softcap=5.0, alibi_slopes=slopes)) == (False, False, True, 1)


@pytest.mark.parametrize("change,why", [
    (dict(dropout_p=0.1), "dropout"),
    (dict(sinks=torch.zeros(2)), "sinks"),
    (dict(attn_bias=torch.zeros(1, 2, 2048, 2048)), "bias"),
    (dict(softmax_scale=-0.1), "softmax_scale"),
    (dict(window_left=1024, causal=True, diag_offset=-3100), "rows without keys"),  # the diagonal misses every key
    (dict(window_left=1024, causal=True, diag_offset=3100), "rows without keys"),  # the window misses them
    (dict(causal=True, diag_offset=-128), "rows without keys"),  # a ring chunk whose first rows see no key
])
def test_declines_options(change, why):
    q, k, v = qkv(1, 2048, 2048, 2, 2, torch.bfloat16, device="cpu")
    reason = fwd_gluon.gluon_reason("sm90", q, k, v, params(**change), False)
    assert reason is not None and why in reason


@pytest.mark.parametrize("shape,causal,why", [
    ((1, 4096, 2048, 2, 2, torch.bfloat16, 128), True, "rows without keys"),  # causal, seqlen_q > seqlen_k
    ((1, 512, 4096, 2, 2, torch.bfloat16, 128), True, "below 1024"),  # measured slower there
    ((1, 4096, 512, 2, 2, torch.bfloat16, 128), False, "below 1024"),
    ((1, 2048, 2048, 2, 2, torch.bfloat16, 64), True, "no FWD_GLUON row"),  # measured slower at d=64 causal
    ((1, 1024, 1024, 2, 2, torch.bfloat16, 64), False, "below 2048"),
    ((1, 2048, 2048, 2, 2, torch.float32, 128), False, "dtype"),
    ((1, 2048, 2048, 2, 2, torch.bfloat16, 96), False, "no FWD_GLUON row"),  # no padding: exact head dims only
    ((1, 2048, 2048, 2, 2, torch.bfloat16, 80), False, "no FWD_GLUON row"),
])
def test_declines_shapes(shape, causal, why):
    *dims, dtype, d = shape
    q, k, v = qkv(*dims, dtype, d=d, device="cpu")
    reason = fwd_gluon.gluon_reason("sm90", q, k, v, params(d, causal=causal), False)
    assert reason is not None and why in reason


def test_serves_ring_chunks():
    """A ring attention piece: not causal with offsets (they mean nothing without a mask or dropout), or causal
    with a diagonal offset that leaves every row a key."""
    q, k, v = qkv(1, 2048, 4096, 2, 2, torch.bfloat16, device="cpu")
    assert fwd_gluon.gluon_reason("sm90", q, k, v, params(diag_offset=-4096, dropout_offset_q=2048), False) is None
    assert fwd_gluon.gluon_reason("sm90", q, k, v, params(causal=True, diag_offset=-2048), False) is None
    assert fwd_gluon.gluon_reason("sm90", q, k, v, params(causal=True, diag_offset=-2049), False) is not None


def test_declines_other_archs_and_strides():
    q, k, v = qkv(1, 2048, 2048, 2, 2, torch.bfloat16, device="cpu")
    for arch in (None, "sm80", "gfx942", "gfx1100"):
        assert "no FWD_GLUON row" in fwd_gluon.gluon_reason(arch, q, k, v, params(), False)
    odd = torch.randn(1, 2048, 2, 256, dtype=torch.bfloat16)[..., ::2]  # last dim strided
    assert "strides" in fwd_gluon.gluon_reason("sm90", odd, k, v, params(), False)
    odd = torch.randn(1, 2048, 2, 132, dtype=torch.bfloat16)[..., :128]  # head stride 132: not 16-byte multiples
    assert "strides" in fwd_gluon.gluon_reason("sm90", odd, k, v, params(), False)


def test_varlen_rule(monkeypatch):
    """Packed varlen calls are served with one cu_seqlens for queries and keys (self-attention: no row without
    a key), the longest sequence past the row's length rule, and the host-made descriptors ([total, cols])."""
    q, k, v = (torch.randn(8192, 4, 128, dtype=torch.bfloat16) for _ in range(3))
    cu = torch.tensor([0, 3000, 8192], dtype=torch.int32)
    same = params(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5192, max_seqlen_k=5192, causal=True)
    assert fwd_gluon.gluon_reason("sm90", q, k, v, same, True) is None
    assert fwd_gluon.gluon_reason("sm90", q, k, v, params(cu_seqlens_q=cu, cu_seqlens_k=cu), True, 5192) is None
    other = params(cu_seqlens_q=cu, cu_seqlens_k=cu.clone(), max_seqlen_q=5192, max_seqlen_k=5192)
    assert "packed differently" in fwd_gluon.gluon_reason("sm90", q, k, v, other, True)
    short = params(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=1000, max_seqlen_k=1000, causal=True)
    assert "below 1024" in fwd_gluon.gluon_reason("sm90", q, k, v, short, True)
    late = params(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5192, causal=True, diag_offset=-1)
    assert "rows without keys" in fwd_gluon.gluon_reason("sm90", q, k, v, late, True)
    assert fwd_gluon.rows_view(q) == (8192, 4 * 128)
    monkeypatch.setattr(fwd_gluon, "HOST_DESCRIPTORS", False)
    assert "host-made" in fwd_gluon.gluon_reason("sm90", q, k, v, same, True)


def test_rows_view():
    """The 2-D view [b * seqlen, cols] the host-made descriptors address: rows of one sequence after another."""
    q = torch.empty(2, 64, 4, 128)
    assert fwd_gluon.rows_view(q) == (128, 4 * 128)
    packed = torch.empty(2, 64, 3, 4, 128)[:, :, 1]  # qkv-packed: row stride 3 h d, head stride d
    assert fwd_gluon.rows_view(packed) == (128, 3 * 128 + 128)
    assert fwd_gluon.rows_view(torch.empty(2, 80, 4, 128)[:, :64]) is None  # sequences apart
    assert fwd_gluon.rows_view(torch.empty(1, 80, 4, 128)[:, :64]) == (64, 4 * 128)  # one sequence: any stride


def test_plan_keeps_no_tensor_and_rebases(monkeypatch):
    """A plan (cached per call signature) keeps descriptor templates without the tensors that made them; a
    call's descriptors are copies over its own tensors, with the template's shape, strides and block."""
    monkeypatch.setattr(fwd_gluon, "HOST_DESCRIPTORS", True)
    q, k, v = qkv(2, 2048, 2048, 4, 2, torch.bfloat16, device="cpu")
    row = fwd_gluon.gluon_row("sm90", 128, False)
    plan = fwd_gluon.plan_gluon(q, k, v, params(), row.config, (0, 0, 0), (0, 0))
    assert plan.host and len(plan.templates) == 3 and all(t.base is None for t in plan.templates)
    q2 = torch.randn_like(q)
    desc = fwd_gluon._rebase(plan.templates[0], q2)
    assert desc.base is q2 and plan.templates[0].base is None
    assert list(desc.shape) == [2 * 2048, 4 * 128] and list(desc.block_shape) == [64, 128]
    assert list(plan.templates[1].block_shape) == [row.config.block_n, 128]
    monkeypatch.setattr(fwd_gluon, "HOST_DESCRIPTORS", False)
    assert not fwd_gluon.plan_gluon(q, k, v, params(), row.config, (0, 0, 0), (0, 0)).host


def test_persistent_rule(monkeypatch):
    """Dense calls run persistent programs (the host-made descriptors): a grid of at most one program per SM (the
    CPU's stand-in: 4). Without a mask each takes tiles in order; causal calls take pairs of query blocks of one
    head (ORDER 2), and so do softcap calls with a running max up to 4096 keys; windows, ALiBi, the fixed-max softcap
    and varlen calls keep a program a tile."""
    q, k, v = qkv(2, 2048, 2048, 4, 2, torch.bfloat16, device="cpu")
    row = fwd_gluon.gluon_row("sm90", 128, False)
    plan = fwd_gluon.plan_gluon(q, k, v, params(), row.config, (0, 0, 0), (0, 0))
    assert plan.hd_slot.constexprs["PERSISTENT"] and plan.hd_slot.constexprs["ORDER"] == 0
    assert plan.hd_grid == (4, 1, 1) and plan.grid == (16, 8, 1) and plan.hd_tail[-1] == 16 * 8  # the tiles
    causal = fwd_gluon.plan_gluon(q, k, v, params(causal=True), row.config, (0, 0, 0), (0, 0))
    assert causal.hd_slot.constexprs["PERSISTENT"] and causal.hd_slot.constexprs["ORDER"] == 2
    assert causal.hd_tail[-1] == 8 * 8 and causal.slot.constexprs["ORDER"] == 1  # pairs; device-made: descending
    q3 = q[:, :1920]  # 15 query blocks: 8 pairs a head, the last one the middle block alone
    assert fwd_gluon.plan_gluon(q3, k, v, params(causal=True), row.config, (0, 0, 0), (0, 0)).hd_tail[-1] == 8 * 8
    for flags, varlen, seqlen_k in (((False, False, False, 0), True, 0), ((False, True, False, 0), True, 0),
                                    ((True, True, False, 0), False, 0), ((True, False, False, 0), False, 0),
                                    ((False, True, False, 2), False, 0), ((False, True, False, 1), False, 0),
                                    ((False, True, True, 0), False, 4097), ((False, True, True, 2), False, 0)):
        assert not fwd_gluon.persistent(flags, varlen, seqlen_k), (flags, varlen, seqlen_k)
    for flags, order in (((False, False, True, 0), 0), ((False, True, True, 0), 2)):  # softcap
        assert fwd_gluon.persistent(flags, False, 4096) and fwd_gluon.order(flags, True) == order, flags
    window = fwd_gluon.plan_gluon(q, k, v, params(causal=True, window_left=256), row.config, (0, 0, 0), (0, 0))
    assert not window.hd_slot.constexprs["PERSISTENT"] and window.hd_grid == window.grid
    assert window.hd_slot.constexprs["ORDER"] == 0  # a left bound evens the work
    softcap = fwd_gluon.plan_gluon(q, k, v, params(causal=True, softcap=30.0), row.config, (0, 0, 0), (0, 0))
    assert not softcap.hd_slot.constexprs["PERSISTENT"]  # bf16: the fixed max, whose persistent build spills
    q16, k16, v16 = (t.half() for t in (q, k, v))
    softcap = fwd_gluon.plan_gluon(q16, k16, v16, params(causal=True, softcap=30.0), row.config, (0, 0, 0), (0, 0))
    assert softcap.hd_slot.constexprs["PERSISTENT"] and softcap.hd_slot.constexprs["ORDER"] == 2
    monkeypatch.setattr(fwd_gluon, "PERSISTENT_OPTIONS", False)
    assert not fwd_gluon.persistent((False, True, True, 0), False)
    assert fwd_gluon.persistent((False, True, False, 0), False)
    monkeypatch.setattr(fwd_gluon, "PERSISTENT_PLAIN", False)
    monkeypatch.setattr(fwd_gluon, "PERSISTENT_CAUSAL", False)
    assert not fwd_gluon.persistent((False, False, False, 0), False)
    assert fwd_gluon.order((False, True, False, 0), False) == 1


def test_alibi_flag(monkeypatch):
    """One-sided ALiBi wherever no visible key lies right of the diagonal (causal, or a right window bound of 0) and
    no left bound cuts: ALIBI 3 (the ramp in the tensor cores) without softcap, up to ALIBI_RAMP_MAX_D; with softcap,
    ALIBI 2 (a per-key term in registers) up to d=128 (the other builds spill); else 1 (|i + limit - j| per score)."""
    slopes = torch.rand(4)
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, causal=True)) == (False, True, False, 3)
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, window_right=0)) == (False, True, False, 3)
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, window_left=64, window_right=0)) == (True, True, False, 1)
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, window_left=64, window_right=1)) == (True, True, False, 1)
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes)) == (False, False, False, 1)
    assert fwd_gluon.flags_of(params(causal=True))[3] == 0
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, causal=True), 256)[3] == 3
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, causal=True, softcap=30.0), 128)[3] == 2
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, causal=True, softcap=30.0), 256)[3] == 1  # 2 spills there
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, causal=True, softmax_scale=-0.1), 128)[3] == 2
    monkeypatch.setattr(fwd_gluon, "ALIBI_RAMP_MMA", False)
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, causal=True), 128)[3] == 2
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, causal=True), 256)[3] == 1
    monkeypatch.setattr(fwd_gluon, "ALIBI_ONE_SIDED", False)
    assert fwd_gluon.flags_of(params(alibi_slopes=slopes, causal=True))[3] == 1


def test_softcap_flag(monkeypatch):
    """SOFTCAP 2 (the fixed max) for bf16 softcap calls within SOFTCAP_MAX_LOG2 and without ALiBi; else 1."""
    assert fwd_gluon.flags_of(params(softcap=30.0, causal=True)) == (False, True, 2, 0)
    assert fwd_gluon.flags_of(params(softcap=53.0))[2] == 2 and fwd_gluon.flags_of(params(softcap=54.0))[2] == 1
    assert fwd_gluon.flags_of(params(softcap=30.0), 128, torch.float16)[2] == 1  # P's range: bf16 / fp32 only
    assert fwd_gluon.flags_of(params(softcap=30.0, alibi_slopes=torch.rand(4)))[2] == 1  # ALiBi moves the bound
    assert fwd_gluon.flags_of(params())[2] == 0
    monkeypatch.setattr(fwd_gluon, "SOFTCAP_FIXED_MAX", False)
    assert fwd_gluon.flags_of(params(softcap=30.0))[2] == 1


def test_env_turns_it_off(monkeypatch):
    q, k, v = qkv(1, 2048, 2048, 2, 2, torch.bfloat16, device="cpu")
    assert fwd_gluon.gluon_reason("sm90", q, k, v, params(), False) is None
    monkeypatch.setenv("FLASH_ATTENTION_GLUON", "0")
    assert "FLASH_ATTENTION_GLUON" in fwd_gluon.gluon_reason("sm90", q, k, v, params(), False)


def test_other_triton_versions_take_the_other_kernels(monkeypatch):
    q, k, v = qkv(1, 2048, 2048, 2, 2, torch.bfloat16, device="cpu")
    monkeypatch.setattr(fwd_gluon, "_gluon_triton", [])
    monkeypatch.setattr(fwd_gluon, "GLUON_TRITON", ("0.1",))
    assert "checked under Triton 0.1 only" in fwd_gluon.gluon_reason("sm90", q, k, v, params(), False)


def test_rows_and_explain():
    """One row per exact head dim, sm90 only, each with the reason it was chosen; explain() names the
    kernel for a call it can take."""
    assert set(tiles.FWD_GLUON) == {"sm90"}
    for row in tiles.FWD_GLUON["sm90"]:
        assert row.config.reason and row.min_seqlen_k >= 1
        assert fwd_gluon.gluon_row("sm90", row.max_d, bool(row.causal)) is row
    assert fwd_gluon.gluon_row("sm90", 128, False).causal is False and fwd_gluon.gluon_row("sm90", 128, True).causal
    from flash_attention_amd import dispatch
    from flash_attention_amd.params import Problem

    base = dict(device_type="cuda", is_rocm=False, dtype=torch.bfloat16, batch=1, seqlen_q=4096, seqlen_k=4096,
                nheads=16, nheads_k=16, headdim=128, headdim_v=128, causal=True)
    triton_backend = dispatch.registry()["triton"]
    assert any("Gluon kernel" in line for line in triton_backend.describe_plan(Problem(arch="sm90", **base)))
    assert not any("Gluon" in line for line in triton_backend.describe_plan(Problem(arch="sm80", **base)))
    varlen = triton_backend.describe_plan(Problem(arch="sm90", is_varlen=True, **base))
    assert any("Gluon kernel" in line and "one cu_seqlens" in line for line in varlen)
    assert any("Gluon" in line for line in triton_backend.describe_plan(Problem(arch="sm90", has_alibi=True, **base)))
    assert not any("Gluon" in line for line in triton_backend.describe_plan(Problem(arch="sm90", softcap=30.0,
                                                                                    **base)))  # d=128: no softcap
    assert not any("Gluon" in line for line in triton_backend.describe_plan(Problem(arch="sm90", dropout_p=0.1,
                                                                                    **base)))


def test_sm90_builds_overlap_and_do_not_spill(tmp_path):
    """Every sm90 build, compiled here through check-kernels (in worker processes without the interpreter):
    no local memory (spills), wgmma on the tensor cores; and the d=128 causal build's PTX has a
    ``wgmma.wait_group 1`` (QK^T retired while P V stays in flight: the overlap this kernel exists for)."""
    import json

    from flash_attention_amd.tools import check_kernels as ck

    path = tmp_path / "gluon.json"
    rc = ck.main(["--arch", "sm90", "--kernel", "fwd_gluon", "--jobs", "2", "--json", str(path)])
    rows = json.loads(path.read_text())["rows"]
    # per row: bf16 / fp16, causal or not where the row serves both (the options rows: every option at once),
    # descriptors made on the device / on the host (the host-made ones dense and varlen; dense plain calls run
    # persistent programs)
    variants = sum(1 if r.causal is not None else 2 for r in tiles.FWD_GLUON["sm90"])
    # the options rows: every option at once with |distance| ALiBi, one-sided ALiBi (d=128), causal ALiBi alone with
    # the ramp in the tensor cores, causal softcap with the fixed max and with the running max (the second persistent)
    variants += sum(3 + (r.max_d <= fwd_gluon.ALIBI_ONE_SIDED_MAX_D) + (r.max_d <= fwd_gluon.ALIBI_RAMP_MAX_D)
                    for r in tiles.FWD_GLUON_OPTIONS["sm90"])
    assert rc == 0 and len(rows) == variants * 2 * 3
    kinds = {(r["label"].split(" ")[2], r["label"].split(" s2 ", 1)[1]) for r in rows}
    assert kinds == {(what, desc) for what in ("plain", "causal") for desc in
                     ("device-desc", "host-desc persistent", "host-desc varlen")} | \
        {("opts", "device-desc"), ("opts", "host-desc"), ("opts", "host-desc varlen"), ("causal", "host-desc")}
    whats = {r["label"].split(" gluon")[0].split(" ", 2)[2] for r in rows}
    assert whats >= {"opts", "opts one-sided", "causal alibi mma-ramp", "causal softcap", "causal softcap running"}
    for r in rows:
        accepted = r["label"].startswith(("bf16 d=128 causal", "fp16 d=128 causal")) and "persistent" in r["label"]
        if accepted and r["status"] != "ok":  # the row's spills_ok: measured with its 24 B (tiles.py; none since
            # session 32's build)
            assert r["status"] == "warn" and r["scratch"] <= 32 and "accepted" in " ".join(r["warnings"]), r
        else:
            assert r["status"] == "ok" and r["spills"] == 0 and r["scratch"] == 0, r
        assert any(name.startswith("wgmma") for name in r["matrix"]), r
    code = (
        "import re, triton\n"
        "from triton.backends.compiler import GPUTarget\n"
        "from triton.experimental.gluon._runtime import GluonASTSource\n"
        "from flash_attention_amd.launch import fwd_gluon\n"
        "s = next(s for s in fwd_gluon.compile_specs('sm90') if s.label.startswith('bf16 d=128 causal'))\n"
        "ck = triton.compile(GluonASTSource(s.fn, dict(s.signature), dict(s.constexprs)),\n"
        "                    target=GPUTarget('cuda', 90, 32), options=dict(s.options))\n"
        "print(sorted(set(re.findall(r'wgmma.wait_group.sync.aligned (\\d+)', ck.asm['ptx']))))\n")
    out = run_fresh(code, timeout=300)
    assert "'1'" in out, out


# --- exactness on an sm90 GPU ----------------------------------------------------------------------

@pytest.fixture(params=[True, False], ids=["host-desc", "device-desc"])
def any_length(monkeypatch, request):
    """The tests' calls are short: lift the rows' length rules and the options' limits (speed choices,
    test_declines_shapes, test_serves_windows_softcap_alibi). Each test
    runs with the descriptors made on the host (where the layout allows) and on the device."""
    rows = [r._replace(min_seqlen_k=0) for r in tiles.FWD_GLUON["sm90"]]
    for causal in (False, True):  # the kernel at d=64 both ways (the table's d=64 row: not causal only)
        if not any(r.max_d == 64 and r.causal in (None, causal) for r in rows):
            rows.append(tiles.Row(64, tiles.Tile(128, 128, 4, 2, reason="test"), causal=causal))
    monkeypatch.setitem(tiles.FWD_GLUON, "sm90", rows)
    # the options rows serve causal calls within limits chosen for speed: every option path is tested here
    monkeypatch.setitem(tiles.FWD_GLUON_OPTIONS, "sm90",
                        [r._replace(min_seqlen_k=0, causal=None) for r in tiles.FWD_GLUON_OPTIONS["sm90"]])
    for key in list(tiles.GLUON_OPTION_LIMITS):
        monkeypatch.setitem(tiles.GLUON_OPTION_LIMITS, key, {})
    monkeypatch.delenv("FLASH_ATTENTION_GLUON", raising=False)
    monkeypatch.setattr(fwd_gluon, "HOST_DESCRIPTORS", request.param)
    return request.param


def run_gluon(q, k, v, p):
    """The planned call with NaN out / lse; asserts the Gluon kernel served it."""
    plan = launch.plan_forward(q, k, v, p)
    assert plan.gluon is not None, fwd_gluon.gluon_reason("sm90", q, k, v, p, False)
    b, sq, h, d = q.shape
    out = torch.full((b, sq, h, d), math.nan, dtype=q.dtype, device=q.device)
    lse = torch.full((b, h, sq), math.nan, dtype=torch.float32, device=q.device)
    (o, _), launched = spied(launch, "launch_gluon", lambda: launch.run_forward(plan, q, k, v, p, out=out, lse=lse))
    assert launched is True, "another kernel served the call"
    assert o is out and not out.isnan().any() and not lse.isnan().any()
    if plan.gluon.host:  # later calls launch the compiled kernel directly (launch/runtime.py), not through Triton,
        # expanding the descriptors themselves (kind 2)
        assert plan.gluon.hd_slot.kernels and all(d is not None and d[1] == 2
                                                  for _, d in plan.gluon.hd_slot.kernels.values())
    return out, lse


@pytest.mark.gpu
@pytest.mark.skipif(not ON_SM90, reason="the Gluon forward runs on sm90 GPUs only")
def test_direct_launches_encode_each_address(any_length):
    """Direct launches encode a host-made descriptor once per address (launch/runtime.py ``_descriptor_args``): one
    plan's calls alternating between two sets of tensors, then over memory freed and allocated again (likely the
    same addresses, new values), each give their own tensors' result."""
    if not any_length:
        pytest.skip("the host-made descriptors only")
    p = params(128, causal=True)
    sets = [qkv(2, 640, 640, 4, 2, torch.bfloat16) for _ in range(2)]
    plan = launch.plan_forward(*sets[0], p)
    assert plan.gluon is not None and plan.gluon.host

    def check(q, k, v):
        out = torch.full_like(q, math.nan)
        launch.run_forward(plan, q, k, v, p, out=out, lse=torch.full((2, 4, 640), math.nan, device=DEVICE))
        ro, _ = attention_ref(q.double(), k.double(), v.double(), softmax_scale=p.softmax_scale, causal=True)
        assert_matches(out, ro, attention_ref(q, k, v, softmax_scale=p.softmax_scale, causal=True)[0])

    for i in range(5):
        check(*sets[i % 2])
    del sets[1]
    check(*qkv(2, 640, 640, 4, 2, torch.bfloat16))
    assert all(d is not None and d[1] == 2 for _, d in plan.gluon.hd_slot.kernels.values())


GPU = pytest.mark.skipif(not ON_SM90, reason="the Gluon forward runs on sm90 GPUs only")


@pytest.mark.gpu
@GPU
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal,dtype", [
    (1, 128, 128, 1, 1, 128, False, torch.bfloat16),  # one block each way
    (2, 200, 333, 3, 1, 128, False, torch.bfloat16),  # partial query and key blocks, MQA
    (2, 333, 333, 4, 2, 128, True, torch.bfloat16),   # causal, partial blocks, GQA
    (1, 130, 517, 2, 2, 128, True, torch.float16),    # causal bottom-right (seqlen_q < seqlen_k)
    (3, 256, 256, 2, 2, 128, False, torch.bfloat16),  # whole key blocks: no mask at all
    (1, 300, 700, 3, 3, 256, True, torch.float16),
    (2, 192, 192, 2, 1, 256, True, torch.bfloat16),
    (1, 100, 450, 2, 2, 256, False, torch.bfloat16),
    (2, 333, 333, 4, 2, 64, True, torch.bfloat16),
    (1, 200, 517, 3, 3, 64, False, torch.float16),
])
def test_matches_reference(any_length, b, sq, sk, h, hk, d, causal, dtype):
    q, k, v = qkv(b, sq, sk, h, hk, dtype, d=d)
    p = params(d, causal=causal)
    out, lse = run_gluon(q, k, v, p)
    ro, rl = attention_ref(q.double(), k.double(), v.double(), softmax_scale=p.softmax_scale, causal=causal)
    lo, _ = attention_ref(q, k, v, softmax_scale=p.softmax_scale, causal=causal)
    assert_matches(out, ro, lo)
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.gpu
@GPU
@pytest.mark.parametrize("b,sq,sk,h,hk,d,causal", [
    (3, 1000, 1000, 23, 23, 128, False),  # 8 x 69 = 552 tiles: most programs take 5, some 4; partial last blocks
    (5, 640, 640, 18, 6, 256, False),     # 5 x 90 = 450 tiles, GQA
    (1, 128, 128, 7, 7, 128, False),      # fewer tiles than programs
    (4, 900, 900, 40, 40, 64, False),     # d=64, three ring slots
    (4, 900, 900, 40, 8, 64, True),
    (3, 1000, 1000, 23, 23, 128, True),   # causal: 4 pairs of query blocks x 69 heads = 276 pairs
    (2, 1100, 1100, 20, 10, 128, True),   # 9 query blocks: the middle one alone in its pair
    (2, 700, 900, 16, 16, 256, True),     # bottom-right causal (seqlen_q < seqlen_k), 3 blocks
])
def test_persistent_programs_take_every_tile(any_length, b, sq, sk, h, hk, d, causal):
    """Dense calls (host-made descriptors) run one program per SM, each taking every P-th tile (causal: every P-th
    pair of query blocks); with more tiles than programs each program's ring, Q slot and barriers carry from one
    tile to the next."""
    if not any_length:
        pytest.skip("persistent programs take the host-made descriptors only")
    q, k, v = qkv(b, sq, sk, h, hk, torch.bfloat16, d=d)
    p = params(d, causal=causal)
    plan = launch.plan_forward(q, k, v, p)
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    blocks = -(-sq // 128)
    units = ((blocks + 1) // 2 if causal else blocks) * b * h
    assert plan.gluon.hd_grid == (min(units, sms), 1, 1) and plan.gluon.hd_slot.constexprs["PERSISTENT"]
    out, lse = run_gluon(q, k, v, p)
    ro, rl = attention_ref(q.double(), k.double(), v.double(), softmax_scale=p.softmax_scale, causal=causal)
    assert_matches(out, ro, attention_ref(q, k, v, softmax_scale=p.softmax_scale, causal=causal)[0])
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.gpu
@GPU
def test_packed_strides_scale_and_large_scores(any_length):
    """Q, K, V views of one packed [b, s, 3, h, d] tensor (each addressed with its own strides), a custom
    scale and scores far from 0 (the running max moves by hundreds)."""
    qkv_ = torch.randn(2, 640, 3, 4, 128, dtype=torch.bfloat16, device=DEVICE) * 6
    q, k, v = qkv_.unbind(2)
    p = params(softmax_scale=0.3, causal=True)
    out, lse = run_gluon(q, k, v, p)
    ro, rl = attention_ref(q.double(), k.double(), v.double(), softmax_scale=0.3, causal=True)
    assert_matches(out, ro, attention_ref(q, k, v, softmax_scale=0.3, causal=True)[0])
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.gpu
@GPU
@pytest.mark.parametrize("softcap,dtype", [(50.0, torch.bfloat16), (53.0, torch.bfloat16), (30.0, torch.float16)])
def test_softcap_saturated_scores(any_length, softcap, dtype):
    """Scores far past the cap (tanh saturated at both ends): the fixed max's range (bf16: P from 2^-90 to 2^64) and
    fp16's running max."""
    q, k, v = qkv(2, 400, 400, 4, 2, dtype)
    q = q * 8
    p = params(softcap=softcap, causal=True)
    assert fwd_gluon.flags_of(p, 128, dtype)[2] == (2 if dtype == torch.bfloat16 else 1)
    out, lse = run_gluon(q, k, v, p)
    ro, rl = attention_ref(q.double(), k.double(), v.double(), softmax_scale=p.softmax_scale, causal=True,
                           softcap=softcap)
    assert_matches(out, ro, attention_ref(q, k, v, softmax_scale=p.softmax_scale, causal=True, softcap=softcap)[0])
    assert rel_err(lse, rl) < 1e-3


def check_options(q, k, v, p) -> None:
    """The Gluon kernel's out and LSE for params p against the float64 oracle with the same options."""
    out, lse = run_gluon(q, k, v, p)
    ref = dict(softmax_scale=p.softmax_scale, causal=p.causal, window_size=(p.window_left, p.window_right),
               softcap=p.softcap, alibi_slopes=p.alibi_slopes)
    ro, rl = attention_ref(q.double(), k.double(), v.double(), **ref)
    assert_matches(out, ro, attention_ref(q, k, v, **ref)[0])
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.gpu
@GPU
@pytest.mark.parametrize("d,sq,sk,change", [
    (128, 333, 333, dict(window_left=100, causal=True)),               # sliding window (Mistral)
    (128, 300, 500, dict(window_left=70, window_right=40)),            # both bounds, not causal, shorter than a block
    (128, 256, 700, dict(window_right=0, window_left=300)),            # causal as a right bound, bottom-right
    (128, 333, 333, dict(softcap=30.0, causal=True)),                  # softcap (Gemma 2, Grok): the fixed max
    (128, 333, 333, dict(softcap=60.0, causal=True)),                  # softcap past the fixed max's range
    (128, 200, 450, dict(alibi="1d")),                                 # ALiBi, not causal
    (256, 320, 320, dict(softcap=50.0, window_left=150, causal=True)),  # Gemma 2's local layers
    (256, 190, 420, dict(alibi="2d", causal=True, softcap=20.0)),
])
def test_options_match_reference(any_length, d, sq, sk, change):
    q, k, v = qkv(2, sq, sk, 4, 2, torch.bfloat16, d=d)
    change = dict(change)
    kind = change.pop("alibi", None)
    if kind:
        change["alibi_slopes"] = (torch.rand(4, device=DEVICE) if kind == "1d" else torch.rand(2, 4, device=DEVICE))
    check_options(q, k, v, params(d, **change))


@pytest.mark.gpu
@GPU
@pytest.mark.parametrize("d,b,sq,sk,h,hk,change", [
    (128, 2, 1500, 1500, 20, 10, dict(causal=True, alibi="1d")),          # one-sided ALiBi
    (128, 2, 1300, 1700, 12, 12, dict(window_right=0, alibi="2d")),       # one-sided: a right bound of 0
    (128, 2, 1500, 1500, 20, 10, dict(causal=True, alibi="1d", dtype=torch.float16)),  # the ramp's fp16 parts
    (256, 2, 1100, 1100, 16, 16, dict(causal=True, alibi="2d")),          # one-sided at d=256 (64-key blocks)
    (128, 2, 1300, 1300, 12, 12, dict(causal=True, alibi="1d", softmax_scale=0.3)),  # the ramp is slope / scale
    (128, 2, 1300, 1700, 12, 12, dict(window_left=300, window_right=0, alibi="2d")),  # windowed: |distance|
    (128, 3, 1000, 1000, 16, 8, dict(window_left=500, window_right=200, alibi="1d")),  # |distance| ALiBi, both bounds
    (256, 2, 1100, 1100, 16, 16, dict(causal=True, softcap=30.0)),         # softcap: the fixed max
    (256, 2, 1100, 1100, 16, 16, dict(causal=True, softcap=30.0, dtype=torch.float16)),  # running max: persistent
    (256, 2, 900, 1000, 18, 6, dict(causal=True, window_left=256, softcap=50.0, alibi="2d")),  # everything at once
])
def test_options_take_every_tile(any_length, d, b, sq, sk, h, hk, change):
    """Calls with options and more tiles than SMs: softcap in persistent programs (each program's ring and barriers
    carry from tile to tile), one-sided ALiBi (d=128) with steep slopes (up to 4 a key: the per-row term the
    softmax leaves out, then added to the LSE, spans hundreds), windows and |distance| ALiBi."""
    change = dict(change)
    q, k, v = qkv(b, sq, sk, h, hk, change.pop("dtype", torch.bfloat16), d=d)
    kind = change.pop("alibi", None)
    if kind:
        change["alibi_slopes"] = 4 * (torch.rand(h, device=DEVICE) if kind == "1d" else torch.rand(b, h, device=DEVICE))
    p = params(d, **change)
    plan = launch.plan_forward(q, k, v, p)
    flags = fwd_gluon.flags_of(p, d, q.dtype)
    persist = fwd_gluon.persistent(flags, False, sk)
    assert plan.gluon.hd_slot.constexprs["FLAGS"] == flags and plan.gluon.hd_slot.constexprs["PERSISTENT"] == persist
    assert persist == (plan.gluon.hd_grid != plan.gluon.grid)  # persistent: (min(tiles, SMs), 1, 1)
    # softcap alone with a running max (fp16; up to 4096 keys)
    assert persist == (set(change) == {"causal", "softcap"} and q.dtype == torch.float16)
    check_options(q, k, v, p)


@pytest.mark.gpu
@GPU
@pytest.mark.parametrize("d,lens,change", [
    (128, (300, 1, 128, 517), dict(causal=True)),
    (128, (640, 77), dict()),
    (256, (200, 333, 64), dict(causal=True, softcap=30.0, window_left=100)),
    (128, (129, 400), dict(causal=True, alibi="1d")),
])
def test_varlen_matches_reference(any_length, d, lens, change):
    """Packed sequences (one cu_seqlens): each sequence against the float64 oracle; a block past a sequence's
    end reads the next one's rows, which the key mask and the row mask must keep out."""
    from flash_attention_amd.reference import attention_ref_varlen

    if not any_length:
        pytest.skip("varlen calls take the host-made descriptors only (test_varlen_rule)")
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    total, h, hk = cu[-1].item(), 4, 2
    q = torch.randn(total, h, d, dtype=torch.bfloat16, device=DEVICE)
    k, v = (torch.randn(total, hk, d, dtype=torch.bfloat16, device=DEVICE) for _ in range(2))
    change = dict(change)
    if change.pop("alibi", None):
        change["alibi_slopes"] = torch.rand(h, device=DEVICE)
    p = params(d, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens), max_seqlen_k=max(lens), **change)
    plan = launch.plan_forward(q, k, v, p)
    assert plan.gluon is not None and plan.gluon.host, fwd_gluon.gluon_reason("sm90", q, k, v, p, True)
    out = torch.full((total, h, d), math.nan, dtype=q.dtype, device=DEVICE)
    lse = torch.full((h, total), math.nan, dtype=torch.float32, device=DEVICE)
    _, launched = spied(launch, "launch_gluon", lambda: launch.run_forward(plan, q, k, v, p, out=out, lse=lse))
    assert launched is True and not out.isnan().any() and not lse.isnan().any()
    ref = dict(softmax_scale=p.softmax_scale, causal=p.causal, window_size=(p.window_left, p.window_right),
               softcap=p.softcap, alibi_slopes=p.alibi_slopes)
    ro, rl = attention_ref_varlen(q.double(), k.double(), v.double(), cu, cu, **ref)
    assert_matches(out, ro, attention_ref_varlen(q, k, v, cu, cu, **ref)[0])
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.gpu
@GPU
def test_chunk_diagonal_offset(any_length):
    """Causal with a chunk's diagonal offset (ring attention): row i sees keys j <= i + sk - sq + offset."""
    q, k, v = qkv(2, 200, 600, 2, 1, torch.bfloat16)
    for offset in (-400, -150, 0, 77):
        p = params(causal=True, diag_offset=offset)
        out, lse = run_gluon(q, k, v, p)
        ro, rl = attention_ref(q.double(), k.double(), v.double(), causal=True, diag_offset=offset)
        assert_matches(out, ro, attention_ref(q, k, v, causal=True, diag_offset=offset)[0])
        assert rel_err(lse, rl) < 1e-3, offset


@pytest.mark.gpu
@GPU
def test_sequences_apart_take_device_descriptors(any_length):
    """Views whose batch stride is not seqlen x row stride (a slice of longer sequences) have no 2-D rows view:
    the plan takes the descriptors made on the device, which address each (sequence, head) by its strides."""
    big = torch.randn(3, 400, 2, 128, dtype=torch.bfloat16, device=DEVICE)
    q = big[:, :333]
    k, v = (torch.randn(3, 500, 2, 128, dtype=torch.bfloat16, device=DEVICE)[:, 17:350] for _ in range(2))
    assert fwd_gluon.rows_view(q) is None and fwd_gluon.rows_view(k) is None
    assert launch.plan_forward(q, k, v, params(causal=True)).gluon.host is False
    out, lse = run_gluon(q, k, v, params(causal=True))
    ro, rl = attention_ref(q.double(), k.double(), v.double(), causal=True)
    assert_matches(out, ro, attention_ref(q, k, v, causal=True)[0])
    assert rel_err(lse, rl) < 1e-3


@pytest.mark.gpu
@GPU
def test_public_call_and_gradients(any_length):
    """Through flash_attn_func: the Gluon forward's out and LSE feed our backward kernels; gradients against
    the float64 oracle's."""
    import flash_attention_amd as fa
    from flash_attention_amd import core

    for opts in (dict(causal=True), dict(causal=True, softcap=30.0, window_size=(100, 0))):
        core.clear_plans()
        q, k, v = (t.requires_grad_() for t in qkv(2, 384, 384, 4, 2, torch.bfloat16))
        dout = torch.randn_like(q)
        with fa.use_backend("triton"):
            out = fa.flash_attn_func(q, k, v, **opts)
        grads = torch.autograd.grad(out, (q, k, v), dout)
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        ro, _ = attention_ref(q64, k64, v64, **opts)
        ref = torch.autograd.grad(ro, (q64, k64, v64), dout.double())
        assert_matches(out, ro.detach())
        for g, r, name in zip(grads, ref, "qkv"):
            assert rel_err(g, r) < 2e-2, (name, opts)
    core.clear_plans()


def test_a_call_that_shares_the_gpu_is_never_persistent():
    """AttnParams.shares_gpu (the ring's steps with a transfer in flight): a grid of one program per tile, as the
    device-made kernel's, so that the transfer's kernel finds free SMs; the same call alone stays persistent. Through
    core.forward_pass, shares_gpu is a plan of its own (the key), its params carry the flag, and a plain call's
    don't."""
    from flash_attention_amd import core

    q, k, v = qkv(2, 2048, 2048, 4, 2, torch.bfloat16, device="cpu")
    row = fwd_gluon.gluon_row("sm90", 128, False)
    for causal in (False, True):
        alone = fwd_gluon.plan_gluon(q, k, v, params(causal=causal), row.config, (0, 0, 0), (0, 0))
        shared = fwd_gluon.plan_gluon(q, k, v, params(causal=causal, shares_gpu=True), row.config, (0, 0, 0), (0, 0))
        assert alone.hd_slot.constexprs["PERSISTENT"] and alone.hd_grid == (4, 1, 1)
        assert not shared.hd_slot.constexprs["PERSISTENT"] and shared.hd_grid == shared.grid == (16, 8, 1)
    args = (0.0, None, True, (-1, -1), 0.0, None, False, True, None, None, None, None, False, None, None, None)
    small = [t[:, :64].float() for t in (q, k, v)]
    plain = core._plan(*small, args, False, kernel_only=True, offsets=(0, 0, 0))
    shared = core._plan(*small, args, False, kernel_only=True, offsets=(0, 0, 0, True))
    assert shared is not plain and shared.params.shares_gpu and not plain.params.shares_gpu
    assert shared.params._replace(shares_gpu=False) == plain.params
