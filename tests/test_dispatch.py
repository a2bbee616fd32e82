"""Dispatch: registry, policy, forcing (env and context manager), explain, debug log, no silent fallback."""
import logging
import os

import pytest
import torch

import flash_attention_amd as fa
from flash_attention_amd import BackendUnavailable, config, dispatch
from flash_attention_amd.backends import sdpa_mask
from flash_attention_amd.params import Problem
from helpers import randn


def _qkv(**kw):
    """CPU tensors: these tests check the CPU rule table (GPU rules: test_*_rule* below)."""
    return tuple(randn(1, 16, 2, 32, device="cpu") for _ in range(3))


def test_every_backend_registered_and_torch_last():
    assert set(dispatch.registry()) == {"triton", "sdpa", "flash_attn", "fa4", "torch"}
    for plat in ("nvidia", "rocm-cdna", "rocm-rdna", "cpu"):
        for kind in ("attn", "kvcache"):
            order = dispatch._PREFERENCE[(plat, kind)]
            assert order[-1] == "torch", (plat, kind)
            if plat != "cpu":
                assert order.index("triton") < order.index("torch")


def test_rocm_rules_never_softcap_or_rdna3_backward_to_ck():
    ck = dispatch.registry()["flash_attn"]  # the old name "ck" is an alias
    base = dict(device_type="cuda", is_rocm=True, dtype=torch.bfloat16, batch=1, seqlen_q=128, seqlen_k=128,
                nheads=8, nheads_k=8, headdim=128, headdim_v=128)
    assert "softcap" in ck.supports(Problem(arch="gfx942", softcap=30.0, **base))
    assert "RDNA3" in ck.supports(Problem(arch="gfx1100", needs_grad=True, **base))
    assert ck.supports(Problem(arch="gfx942", **base)) is None


def test_nvidia_rule_table_sdpa_first_only_where_measured_faster(monkeypatch):
    # the table without FA4 (with FA4 installed, its own rule comes first: test_fa4.py)
    monkeypatch.setattr(dispatch.registry()["fa4"], "available", lambda: "FA4 not installed (this test)")
    base = dict(device_type="cuda", is_rocm=False, dtype=torch.bfloat16, batch=4, seqlen_q=4096,
                seqlen_k=4096, nheads=16, headdim=128, headdim_v=128)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **base))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **base))[0] == "sdpa"  # GQA: h100_run3/gqa_route
    # options SDPA cannot express: triton first, and no "plain dense call" rule named for them
    for opt in (dict(causal=True, window_left=1024, window_right=0), dict(softcap=30.0), dict(has_alibi=True),
                dict(has_sinks=True)):
        problem = Problem(arch="sm90", nheads_k=16, needs_grad=True, **base, **opt)
        assert dispatch.preference(problem)[0] == "triton" and "sdpa first" not in dispatch.order_rule(problem)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **dict(base, headdim=256, headdim_v=256)))[0] == (
        "sdpa")  # GQA at d=256: run16/h100_gqa_route_d256.txt
    # dropout at d=64 / 128, MHA and GQA: SDPA measured faster (run16/h100_dropout_route_*, h100_dropout_gqa);
    # d=256 MHA only with grads (run16/h100_dropout_d256: our forward alone is faster); GQA d=256 not measured
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, dropout_p=0.1, **base))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, dropout_p=0.1, **base))[0] == "sdpa"
    d256_drop = dict(base, headdim=256, headdim_v=256, dropout_p=0.1)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, needs_grad=True, **d256_drop))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **d256_drop))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, needs_grad=True, **d256_drop))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm80", nheads_k=16, **base))[0] == "triton"  # not measured
    d256 = dict(base, headdim=256, headdim_v=256)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, needs_grad=True, **d256))[0] == "sdpa"
    # forward without grads: the Gluon forward as fast or faster (run26/h100_route_fwd_no_grad.txt)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **d256))[0] == "triton"
    assert "Gluon forward measured" in dispatch.order_rule(Problem(arch="sm90", nheads_k=16, **d256))
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **dict(d256, seqlen_q=2048, seqlen_k=2048)))[0] == (
        "sdpa")
    long_causal = dict(base, seqlen_q=16384, seqlen_k=16384, batch=1, causal=True)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **long_causal))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, needs_grad=True, **long_causal))[0] == "sdpa"
    # GQA: causal d=128 from 16k keys without grads (session 45, run42/h100_d_gqa_no_grad_*.md); not causal, shorter
    # or with grads: sdpa
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **long_causal))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, needs_grad=True, **long_causal))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **dict(long_causal, causal=False)))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **dict(long_causal, seqlen_q=8192, seqlen_k=8192,
                                                                       batch=2)))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **dict(long_causal, headdim=64,
                                                                       headdim_v=64)))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **dict(long_causal, causal=False)))[0] == "sdpa"
    # small causal grids without grads (session 50, run47/h200_*_route_fwd_small*.md): at most 1024 query blocks of
    # 128 rows, d=128 from 2k keys, d=64 from 4k; with grads, not causal, more blocks or shorter: sdpa
    small = dict(base, batch=1, causal=True)  # 16 heads x 32 blocks = 512
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **small))[0] == "triton"
    assert "small causal grid" in dispatch.order_rule(Problem(arch="sm90", nheads_k=16, **small))
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **dict(small, nheads=32)))[0] == "triton"  # 1024
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **dict(small, batch=3)))[0] == "sdpa"  # 1536
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, needs_grad=True, **small))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **dict(small, causal=False)))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **dict(small, batch=2, seqlen_q=2048,
                                                                        seqlen_k=2048)))[0] == "triton"
    d64_small = dict(small, headdim=64, headdim_v=64)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **d64_small))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **dict(d64_small, batch=2, seqlen_q=2048,
                                                                        seqlen_k=2048)))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **dict(small, headdim=256, headdim_v=256,
                                                                        seqlen_q=2048, seqlen_k=2048)))[0] == "sdpa"
    # d=64 not causal from 16k keys (session 38's audit, run35/h100_route_mha_*.md), not at 4k nor with grads
    d64_long = dict(long_causal, causal=False, nheads=32, headdim=64, headdim_v=64)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=32, **d64_long))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=32, needs_grad=True, **d64_long))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=32, **dict(d64_long, batch=4, seqlen_q=4096,
                                                                        seqlen_k=4096)))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=32, **dict(d64_long, causal=True)))[0] == "sdpa"
    # causal with more keys than queries (bottom-right): ours measured faster (run16/h100_bottom_right_causal_route)
    prefill = dict(base, seqlen_q=1024, seqlen_k=3072, causal=True)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **prefill))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **dict(prefill, causal=False)))[0] == "sdpa"
    d96 = dict(base, headdim=96, headdim_v=96)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **d96))[0] == "sdpa"  # run16/h100_dims_route_*
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **d96))[0] == "sdpa"
    d112 = dict(base, headdim=112, headdim_v=112)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **d112))[0] == "triton"  # not measured
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, kind="kvcache", **base))[0] == "triton"
    # small calls: host-bound, our path is cheaper (results/run11/h100_small_calls.txt): BERT-base's shape
    bert = dict(base, batch=32, seqlen_q=128, seqlen_k=128, nheads=12, headdim=64, headdim_v=64)
    assert dispatch.forward_flop(Problem(arch="sm90", nheads_k=12, **bert)) == 4 * 32 * 12 * 128 * 128 * 64
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **bert))[0] == "triton"
    # dropout: SDPA at any size (its host path too, run16/h100_bert_call_probe*)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, dropout_p=0.1, **bert))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **dict(bert, seqlen_q=1024, seqlen_k=1024)))[0] == (
        "sdpa")  # 12.9 GFLOP
    at_limit = dict(bert, batch=int(dispatch.SMALL_CALL_FLOP) // 256, nheads=1, seqlen_q=1, seqlen_k=1)
    assert dispatch.forward_flop(Problem(arch="sm90", nheads_k=1, **at_limit)) == dispatch.SMALL_CALL_FLOP
    assert dispatch.preference(Problem(arch="sm90", nheads_k=1, **at_limit))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=1, causal=True, **at_limit))[0] == "triton"  # half
    # GQA: its sdpa path costs more host time, so a higher limit (results/run11/h100_gqa_small_calls_base.txt)
    gqa = dict(base, batch=8, seqlen_q=512, seqlen_k=512, nheads=16, headdim=128, headdim_v=128, causal=True)
    assert dispatch.forward_flop(Problem(arch="sm90", nheads_k=4, **gqa)) == 4 * 8 * 16 * 512 * 512 * 128 / 2
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **gqa))[0] == "triton"  # 8.6 GFLOP
    assert dispatch.preference(Problem(arch="sm90", nheads_k=16, **gqa))[0] == "sdpa"  # MHA: above 4.5
    assert dispatch.preference(Problem(arch="sm90", nheads_k=4, **dict(gqa, causal=False)))[0] == "sdpa"  # 17.2
    # causal GQA at d=64 with gradients: triton up to 70 GFLOP (run20/h100_route_gqa64_short*.txt)
    gqa64 = dict(gqa, batch=16, seqlen_q=1024, seqlen_k=1024, nheads=32, headdim=64, headdim_v=64)  # 68.7 GFLOP
    assert dispatch.preference(Problem(arch="sm90", nheads_k=8, needs_grad=True, **gqa64))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=8, **gqa64))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=8, **dict(gqa64, batch=8)))[0] == "sdpa"  # no grad
    assert dispatch.preference(Problem(arch="sm90", nheads_k=8, needs_grad=True, **dict(gqa64, batch=8)))[0] == (
        "triton")  # 34.4 GFLOP
    assert dispatch.preference(Problem(arch="sm90", nheads_k=8, needs_grad=True, **dict(gqa64, batch=32)))[0] == (
        "sdpa")  # 137 GFLOP
    assert dispatch.preference(Problem(arch="sm90", nheads_k=8, needs_grad=True,
                                       **dict(gqa64, batch=8, causal=False)))[0] == "sdpa"  # not causal: 10 GFLOP
    assert dispatch.preference(Problem(arch="sm90", nheads_k=32, needs_grad=True, **gqa64))[0] == "sdpa"  # MHA
    assert "below 70" in dispatch.order_rule(Problem(arch="sm90", nheads_k=8, needs_grad=True, **gqa64))
    # explain() / the debug log say which rule set the order
    assert "host-bound, triton first" in dispatch.order_rule(Problem(arch="sm90", nheads_k=12, **bert))
    assert "1.6 GFLOP, below 4.5" in dispatch.order_rule(Problem(arch="sm90", nheads_k=12, **bert))
    assert "below 10" in dispatch.order_rule(Problem(arch="sm90", nheads_k=4, **gqa))
    assert "sdpa first" in dispatch.order_rule(Problem(arch="sm90", nheads_k=16, **base))
    assert "dropout: sdpa first" in dispatch.order_rule(Problem(arch="sm90", nheads_k=16, dropout_p=0.1, **base))
    assert dispatch.order_rule(Problem(arch="sm90", nheads_k=4, needs_grad=True, **d256_drop)) == ""  # no rule
    assert dispatch.order_rule(Problem(arch="sm80", nheads_k=12, **bert)) == ""
    # BERT's masked calls: triton first, also with dropout (run17/h100_bert_mask_route.txt), where SDPA's kernels
    # would leave rows without a key to the sdpa backend's fill
    masked = dict(bert, dropout_p=0.1, bias="bool", bias_shape=(32, 1, 1, 128), needs_grad=True)
    asked = []
    monkeypatch.setattr(sdpa_mask, "_gpu_zeroes_hidden_rows", lambda *a: asked.append(a) or False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **masked))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **dict(masked, batch=4096)))[0] == "triton"
    assert "bool-masked call: triton first" in dispatch.order_rule(Problem(arch="sm90", nheads_k=12, **masked))
    assert asked[0][1:] == (torch.bfloat16, 64, True, False)  # (device, dtype, head dim, dropout, GQA)
    # where they give those rows 0 themselves (session 55): sdpa first for training calls with dropout at d=64
    # (run52/h200_b_route_d64.md), eager calls only
    monkeypatch.setattr(sdpa_mask, "_gpu_zeroes_hidden_rows", lambda *a: True)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **masked))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **dict(masked, batch=4096)))[0] == "sdpa"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **dict(masked, dropout_p=0.0)))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **dict(masked, needs_grad=False)))[0] == "triton"
    assert "gives the rows the mask hides 0 itself" in dispatch.order_rule(Problem(arch="sm90", nheads_k=12, **masked))
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, **dict(masked, headdim=96, headdim_v=96)))[0] == (
        "triton")
    assert dispatch.preference(Problem(arch="sm80", nheads_k=12, **masked))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, causal=True, **masked))[0] == "triton"
    monkeypatch.setattr(sdpa_mask, "_gpu_zeroes_hidden_rows", lambda *a: False)
    # traced by torch.compile: sdpa first at d=64 (compiled BERT steps, run35/h100_bert_compiled_route_*.md), not at
    # d=128 (not measured), not causal-masked, not on sm80
    traced = Problem(arch="sm90", nheads_k=12, compiling=True, **masked)
    assert dispatch.preference(traced)[0] == "sdpa"
    assert "traced by torch.compile: sdpa first" in dispatch.order_rule(traced)
    d128 = dict(masked, headdim=128, headdim_v=128)
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, compiling=True, **d128))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm80", nheads_k=12, compiling=True, **masked))[0] == "triton"
    assert dispatch.preference(Problem(arch="sm90", nheads_k=12, compiling=True, causal=True, **masked))[0] == (
        "triton")
    text = dispatch.Decision("triton", False, (), Problem(arch="sm90", nheads_k=12, **bert),
                             dispatch.order_rule(Problem(arch="sm90", nheads_k=12, **bert))).describe()
    assert "-> triton (auto)" in text and "order: sm90, plain dense call of 1.6 GFLOP" in text


def test_auto_choice_and_explain_reasons():
    q, k, v = _qkv()
    text = fa.explain(q, k, v, causal=True, softcap=5.0)
    assert "-> torch (auto)" in text and "sdpa: softcap" in text
    assert "-> sdpa (auto)" in fa.explain(q, k, v, causal=True)


def test_explain_names_the_tiles_and_why(monkeypatch):
    """explain() / the debug log: a call our kernels serve also names the tile table rows it takes (forward, and the
    backward when a gradient is needed), their feature tier and the row's reason (measured where, or static check
    only), and the warp-specialised kernels where they may replace them; other backends add nothing."""
    pytest.importorskip("triton")

    def text(backend, **kw):
        p = dict(device_type="cuda", is_rocm=False, arch="sm90", dtype=torch.bfloat16, batch=4, seqlen_q=4096,
                 seqlen_k=4096, nheads=32, nheads_k=8, headdim=64, headdim_v=64, causal=True, needs_grad=True)
        p.update(kw)
        return dispatch.Decision(backend, True, (), Problem(**p)).describe()

    cap = text("triton", softcap=30.0)
    assert "triton forward (sm90, softcap tier): BLOCK 64x64 w4 s3 tma; H100" in cap
    assert "triton backward (sm90, softcap tier): dK/dV BLOCK 64x64 w4 s3, dQ BLOCK 64x64 w4 s3; H100" in cap
    alibi = text("triton", has_alibi=True, nheads_k=32)
    assert "forward (sm90, alibi tier): BLOCK 128x64 w8 s3" in alibi and "backward (sm90, options tier)" in alibi
    assert "forward (sm90, alibi tier): BLOCK 64x64 w4 s3 tma" in text("triton", has_alibi=True)  # causal GQA
    assert "backward" not in text("triton", needs_grad=False)
    drop = text("triton", dropout_p=0.1)
    assert "dQ by atomics" in drop and "dQ by atomics" not in text("triton", dropout_p=0.1, deterministic=True)
    ws = text("triton", causal=False, nheads_k=32, headdim=128, headdim_v=128)
    # the Gluon forward where it serves (before the warp-specialised one), the Gluon backward kernel with dQ (the
    # warp-specialised dK/dV kernel is not served: launch/tiles_bwd.py BWD_WS)
    assert "the Gluon kernel" in ws and "computing dK, dV and dQ" in ws and "warp-specialised dK/dV" not in ws
    assert "computing dK, dV and dQ" not in text("triton", causal=False, nheads_k=32, headdim=128, headdim_v=128,
                                                 deterministic=True)
    short = text("triton", nheads_k=32, headdim=128, headdim_v=128, seqlen_q=2048, seqlen_k=2048)
    assert "the Gluon dK/dV kernel" in short and "computing dK, dV and dQ" not in short
    monkeypatch.setenv("FLASH_ATTENTION_GLUON", "0")
    assert "triton forward: the warp-specialised kernel" in text("triton", causal=False, nheads_k=32, headdim=128,
                                                                 headdim_v=128)
    monkeypatch.delenv("FLASH_ATTENTION_GLUON")
    causal = text("triton", headdim=128, headdim_v=128)
    assert not any(f"triton {p}: the warp-specialised" in causal for p in ("forward", "backward"))
    assert "the Gluon kernel" in causal  # causal: Gluon or the main kernels
    assert "computing dK, dV and dQ" in causal and "the Gluon dK/dV kernel" not in ws
    monkeypatch.setenv("FLASH_ATTENTION_GLUON", "0")
    assert "Gluon" not in text("triton", headdim=128, headdim_v=128)
    monkeypatch.delenv("FLASH_ATTENTION_GLUON")
    rdna = text("triton", is_rocm=True, arch="gfx1100", nheads_k=32, headdim=128, headdim_v=128)
    assert "(gfx1100, plain tier)" in rdna and "static check only" in rdna and "two launches" in rdna
    assert text("sdpa").count("\n") == 0
    from flash_attention_amd.launch import runtime

    assert ("triton launch:" in cap) == (runtime.direct_launch_reason() is not None)


def test_direct_launch_only_under_the_triton_it_replays(monkeypatch):
    """The direct launch path replays one Triton version's launch rules: under any other installed Triton,
    launches go through Triton's own path, and explain() says so."""
    triton = pytest.importorskip("triton")
    from flash_attention_amd.launch import runtime

    monkeypatch.setattr(runtime, "_direct_ok", [])
    monkeypatch.setattr(runtime, "DIRECT_TRITON", (".".join(triton.__version__.split(".")[:2]),))
    assert runtime.direct_launch_reason() is None
    monkeypatch.setattr(runtime, "DIRECT_TRITON", ("0.1",))
    reason = runtime.direct_launch_reason()
    assert reason and triton.__version__ in reason and "0.1" in reason
    assert runtime._read_version() is False and runtime._direct_ok == [False]
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    assert runtime._device_index(torch.device("cuda", 0)) is None  # every launch through fn[grid]
    text = dispatch.Decision("triton", True, (), Problem(
        device_type="cuda", is_rocm=False, arch="sm90", dtype=torch.bfloat16, batch=1, seqlen_q=128, seqlen_k=128,
        nheads=2, nheads_k=2, headdim=64, headdim_v=64)).describe()
    assert f"triton launch: Triton {triton.__version__} is installed" in text
    monkeypatch.setattr(runtime, "_direct_ok", [True])
    assert runtime._device_index(torch.device("cuda", 0)) == 0


def test_triton_backend_declines_a_triton_too_old_for_its_kernels(monkeypatch):
    """Triton 3.4 lacks triton.constexpr_function, which the kernels use: the backend declines with the installed
    version and what it needs (a forced call raises that), instead of an AttributeError from its import."""
    triton = pytest.importorskip("triton")
    from flash_attention_amd.backends import triton_backend

    assert triton_backend._version("3.5.0+rocm7.0.0.git1234") == (3, 5)
    assert triton_backend._version("3.10.1") == (3, 10) and triton_backend._version("nightly") == (0, 0)
    monkeypatch.setattr(triton_backend, "_available", [])
    assert dispatch.registry()["triton"].available() is None  # the Triton of this environment
    monkeypatch.setattr(triton_backend, "_available", [])
    monkeypatch.setattr(triton, "__version__", "3.4.0")
    reason = dispatch.registry()["triton"].available()
    assert reason == ("Triton 3.4.0 is installed; our kernels need Triton >= 3.5 (recent torch releases ship it; on "
                      "ROCm as pytorch-triton-rocm)")
    q, k, v = _qkv()
    with pytest.raises(BackendUnavailable, match="Triton 3.4.0 is installed"):
        with fa.use_backend("triton"):
            fa.flash_attn_func(q, k, v)
    assert fa.flash_attn_func(q, k, v).shape == q.shape  # the others serve
    # a Triton whose API our kernels cannot import under (a future change): declined with the error
    monkeypatch.setattr(triton, "__version__", "3.99.0")
    monkeypatch.setattr(triton_backend, "_available", [])

    def broken():
        raise AttributeError("module 'triton' has no attribute 'jit'")

    monkeypatch.setattr(triton_backend, "_launchers", broken)
    assert dispatch.registry()["triton"].available() == (
        "our kernels do not import under Triton 3.99.0 (AttributeError: module 'triton' has no attribute 'jit')")


def test_forced_by_env_and_context(monkeypatch):
    q, k, v = _qkv()
    monkeypatch.setenv("FLASH_ATTENTION_BACKEND", "torch")
    assert "-> torch (forced)" in fa.explain(q, k, v)
    with fa.use_backend("sdpa"):  # the context manager wins over the environment
        assert "-> sdpa (forced)" in fa.explain(q, k, v)
        with fa.use_backend("auto"):
            assert "(auto)" in fa.explain(q, k, v)
    assert "-> torch (forced)" in fa.explain(q, k, v)


def test_forced_backend_that_declines_raises_with_reason(monkeypatch):
    q, k, v = _qkv()
    with fa.use_backend("sdpa"):
        with pytest.raises(fa.BackendUnavailable, match="softcap"):
            fa.flash_attn_func(q, k, v, softcap=2.0)
    monkeypatch.setenv("FLASH_ATTENTION_BACKEND", "ck")
    with pytest.raises(fa.BackendUnavailable, match="flash_attn"):
        fa.flash_attn_func(q, k, v)


def test_bad_backend_names():
    with pytest.raises(ValueError, match="use_backend"):
        with fa.use_backend("cudnn"):
            pass
    q, k, v = _qkv()
    import os

    os.environ["FLASH_ATTENTION_BACKEND"] = "nope"
    try:
        with pytest.raises(ValueError, match="FLASH_ATTENTION_BACKEND"):
            fa.flash_attn_func(q, k, v)
    finally:
        del os.environ["FLASH_ATTENTION_BACKEND"]


def test_debug_logs_each_decision_once(monkeypatch, caplog):
    monkeypatch.setenv("FLASH_ATTENTION_DEBUG", "1")
    dispatch._logged.clear()
    q, k, v = _qkv()
    with caplog.at_level(logging.WARNING, logger="flash_attention_amd"):
        for _ in range(3):
            fa.flash_attn_func(q, k, v, softcap=1.5)
    lines = [r.getMessage() for r in caplog.records if "dispatch" in r.getMessage()]
    assert len(lines) == 1 and "-> torch" in lines[0] and "sdpa: softcap" in lines[0]


def test_nothing_logged_without_debug(caplog):
    dispatch._logged.clear()
    q, k, v = _qkv()
    with caplog.at_level(logging.DEBUG, logger="flash_attention_amd"):
        fa.flash_attn_func(q, k, v, softcap=1.5)
    assert not caplog.records


@pytest.mark.parametrize("value", [None, "", "1", " TRUE ", "no", "Torch", "sdpa", "ünïcode"])
def test_env_reads_match_os_environ_between_calls(monkeypatch, value):
    """config._env (the per-call read every attention call makes) sees each change at once."""
    for name in ("FLASH_ATTENTION_DEBUG", "FLASH_ATTENTION_BACKEND"):
        config._env(name)  # warm its key cache first: a change after that must still be seen
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
        assert config._env(name) == os.environ.get(name, "")
    raw = [os.fsdecode(x) if isinstance(x, bytes) else x for x in config.call_env()]
    assert raw == [os.environ.get("FLASH_ATTENTION_BACKEND"), os.environ.get("FLASH_ATTENTION_DEBUG")]
    assert config.debug() == (value is not None and value.strip().lower() in ("1", "true"))
