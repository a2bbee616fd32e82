"""FP8 (e4m3) q, k, v with per-(batch, KV head) descale factors (FA3's q_descale, k_descale,
v_descale): the attention of the dequantised inputs, bf16 output, forward only.

- The torch path dequantises tile by tile in fp32: it matches the float64 oracle on the
  dequantised inputs up to the bf16 rounding of its output.
- The Triton kernel multiplies in fp8 (fp32 accumulation) and rounds P to e4m3 for the PV
  product, like FA3; its LSE (from unrounded scores) matches the oracle tightly, its output
  within the error of P in e4m3 (~2% on random data) and, in the interpreter, matches a float64
  emulation of exactly that (P rounded to e4m3 block by block against the running max) up to the
  bf16 output. In Triton's interpreter (CPU) e4m3fn runs with fp32 dots of the fp8 values (exact)
  and P rounded by ``kernels/common.py:round_e4m3`` (the interpreter's own fp32 -> e4m3
  conversion loses the carry into the exponent); e4m3fnuz (MI300's flavour) only compiles
  (check-amd) and runs on the GPU.
- Accuracy against the bf16 computation on the original (unquantised) data: stated and checked
  on the GPU (``test_gpu_accuracy_vs_bf16``).
"""
from __future__ import annotations

import math

import pytest
import torch

from flash_attention_amd import flash_attn_func, flash_attn_qkvpacked_func, flash_attn_varlen_func, use_backend
from flash_attention_amd.fp8 import fp8_dtype, quantize
from flash_attention_amd.reference import attention_ref, attention_ref_varlen
from helpers import DEVICE, HAS_TRITON, rel_err

E4M3 = torch.float8_e4m3fn
TRITON = HAS_TRITON and (DEVICE == "cuda" or __import__("flash_attention_amd").config.triton_interpret())
FP8 = fp8_dtype(DEVICE)
# The Triton FP8 output against the oracle on the dequantised inputs (P in e4m3: ~2% measured).
TRITON_OUT_TOL = 0.04
ON_GPU = DEVICE == "cuda"
# The LSE (the scores) against the oracle: exact up to fp32 in the interpreter. On a GPU the fp8
# matrix instructions accumulate with fewer mantissa bits than fp32 (Hopper's fp8 wgmma keeps about
# 14): measured 1.1e-5 to 2.2e-5 relative on an H200, so 1e-4 there.
LSE_TOL = 1e-4 if ON_GPU else 1e-6


def _inputs(b, sq, sk, h, hk, d, dv=None, dtype=FP8, scale=1.0):
    q = torch.randn(b, sq, h, d, device=DEVICE) * scale
    k = torch.randn(b, sk, hk, d, device=DEVICE) * scale
    v = torch.randn(b, sk, hk, dv or d, device=DEVICE)
    (q8, qd), (k8, kd), (v8, vd) = quantize(q, hk, dtype), quantize(k, dtype=dtype), quantize(v, dtype=dtype)
    return q8, k8, v8, dict(q_descale=qd, k_descale=kd, v_descale=vd)


def _ref(q8, k8, v8, ds, **kw):
    return attention_ref(q8, k8, v8, **ds, **kw)


def _emulate(q8, k8, v8, ds, block_n, **kw):
    """float64 emulation of the kernel's FP8 math: online softmax over key blocks of block_n, P
    rounded to e4m3 against the running max for the PV product, row sums from the unrounded P."""
    from flash_attention_amd.reference import dequantise, scores_ref

    q, k, v = dequantise(q8, k8, v8, ds["q_descale"], ds["k_descale"], ds["v_descale"])
    s = scores_ref(q, k, **kw)  # [b, h, sq, sk], -inf where hidden
    v = v.repeat_interleave(q.shape[2] // v.shape[2], dim=2)
    m = torch.full((*s.shape[:3], 1), -1e30, dtype=s.dtype, device=s.device)
    row_sum, acc = torch.zeros_like(m), torch.zeros(*s.shape[:3], v.shape[-1], dtype=s.dtype, device=s.device)
    for n0 in range(0, s.shape[-1], block_n):
        blk = s[..., n0:n0 + block_n]
        m_new = torch.maximum(m, blk.amax(-1, keepdim=True))
        p, alpha = torch.exp(blk - m_new), torch.exp(m - m_new)
        row_sum = row_sum * alpha + p.sum(-1, keepdim=True)
        p8 = p.float().to(E4M3).to(s.dtype)
        acc = acc * alpha + torch.einsum("bhij,bjhd->bhid", p8, v[:, n0:n0 + block_n])
        m = m_new
    return (acc / torch.where(row_sum > 0, row_sum, 1)).transpose(1, 2)


@pytest.mark.parametrize("opts", [dict(), dict(causal=True), dict(window_size=(9, 2), softcap=4.0),
                                  dict(causal=True, alibi_slopes="1d")], ids=["plain", "causal", "window-softcap",
                                                                              "alibi"])
def test_torch_path_matches_oracle_on_dequantised_inputs(opts):
    q8, k8, v8, ds = _inputs(2, 33, 47, 4, 2, 64, dtype=E4M3)
    opts = dict(opts)
    if opts.get("alibi_slopes") == "1d":
        opts["alibi_slopes"] = torch.rand(4, device=DEVICE) * 0.3
    ro, rl = _ref(q8, k8, v8, ds, **opts)
    with use_backend("torch"):
        out, lse, _ = flash_attn_func(q8, k8, v8, return_attn_probs=True, **opts, **ds)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 33, 4, 64)
    assert rel_err(out, ro.to(torch.bfloat16)) < 1e-3  # the oracle rounded like the output: bf16 ties only
    assert rel_err(out, ro) < 4e-3  # bf16 output
    assert rel_err(lse, rl) < 1e-6


def test_torch_path_varlen_and_packed():
    cu = torch.tensor([0, 5, 5, 29], dtype=torch.int32, device=DEVICE)
    q = torch.randn(29, 4, 32, device=DEVICE)
    k, v = torch.randn(29, 2, 32, device=DEVICE), torch.randn(29, 2, 32, device=DEVICE)
    (q8, qd), (k8, kd), (v8, vd) = (quantize(q, 2, E4M3, cu), quantize(k, None, E4M3, cu),
                                    quantize(v, None, E4M3, cu))
    ds = dict(q_descale=qd, k_descale=kd, v_descale=vd)
    assert qd.shape == (3, 2)
    ro, _ = attention_ref_varlen(q8, k8, v8, cu, cu, causal=True, **ds)
    with use_backend("torch"):
        out = flash_attn_varlen_func(q8, k8, v8, cu, cu, 24, 24, causal=True, **ds)
    assert rel_err(out, ro) < 4e-3
    parts = [quantize(torch.randn(2, 20, 4, 32, device=DEVICE), dtype=E4M3) for _ in range(3)]
    qkv8 = torch.stack([x8 for x8, _ in parts], dim=2)  # [b, s, 3, h, d]
    ds = dict(zip(("q_descale", "k_descale", "v_descale"), (d for _, d in parts)))
    with use_backend("torch"):
        out = flash_attn_qkvpacked_func(qkv8, causal=True, **ds)
    ro, _ = attention_ref(*qkv8.unbind(2), causal=True, **ds)
    assert rel_err(out, ro) < 4e-3


# ----------------------------------------------------------------------------- the Triton FP8 forward

needs_triton = pytest.mark.skipif(not TRITON, reason="needs triton on a GPU or in the interpreter")


def _fwd_kernel(q8, k8, v8, ds, **opts):
    """The Triton forward into NaN-poisoned buffers (launch/fwd._forward); nothing may stay NaN."""
    from flash_attention_amd.launch import fwd
    from flash_attention_amd.params import AttnParams

    d = q8.shape[-1]
    left, right = opts.get("window_size", (-1, -1))
    causal = opts.get("causal", False)
    p = AttnParams(softmax_scale=d ** -0.5, causal=causal, window_left=left, window_right=0 if causal else right,
                   softcap=opts.get("softcap", 0.0), alibi_slopes=opts.get("alibi_slopes"), **ds)
    b, sq, h, _ = q8.shape
    out = torch.full((b, sq, h, v8.shape[-1]), math.nan, dtype=torch.bfloat16, device=q8.device)
    lse = torch.full((b, h, sq), math.nan, device=q8.device)
    o, lse_out = fwd._forward(q8, k8, v8, p, out=out, lse=lse)
    assert not o.isnan().any() and not lse_out.isnan().any()
    return o, lse_out


@needs_triton
@pytest.mark.parametrize("shape,opts", [
    ((2, 37, 45, 4, 2, 64), dict(causal=True)),
    ((1, 40, 40, 2, 2, 128), dict()),
    ((1, 29, 50, 3, 1, 96), dict(window_size=(7, 3), softcap=5.0)),
    ((2, 50, 30, 2, 1, 40), dict(causal=True)),  # sq > sk: rows with no key (out 0, lse +inf)
], ids=["causal-gqa", "plain-d128", "window-softcap-mqa", "empty-rows"])
def test_triton_fp8(shape, opts):
    b, sq, sk, h, hk, d = shape
    q8, k8, v8, ds = _inputs(b, sq, sk, h, hk, d)
    out, lse = _fwd_kernel(q8, k8, v8, ds, **opts)
    ro, rl = _ref(q8, k8, v8, ds, **opts)
    assert torch.equal(torch.isinf(lse), torch.isinf(rl))
    assert rel_err(lse, rl) < LSE_TOL, "scores (q/k descales, masks) must be exact up to the dot's accumulation"
    assert rel_err(out, ro) < TRITON_OUT_TOL, "P in e4m3"
    if not ON_GPU:  # the interpreter's tile (BLOCK_N 16): the same P rounding, up to the bf16 output
        assert rel_err(out, _emulate(q8, k8, v8, ds, 16, **opts)) < 6e-3
    if torch.isinf(rl).any():
        assert (out.transpose(1, 2)[torch.isinf(rl)] == 0).all()


@needs_triton
def test_triton_fp8_pv_path_is_exact_for_uniform_scores():
    """q = 0: every score 0, P = 1 exactly (no e4m3 rounding): out = mean of the dequantised visible
    values, up to the bf16 rounding of the output (Triton's interpreter rounds fp32 -> bf16 toward
    zero: one ulp, ~3e-3)."""
    q8, k8, v8, ds = _inputs(2, 24, 41, 4, 2, 64)
    q8 = torch.zeros_like(q8)
    out, _ = _fwd_kernel(q8, k8, v8, ds, causal=True)
    ro, _ = _ref(q8, k8, v8, ds, causal=True)
    assert rel_err(out, ro) < 5e-3


@needs_triton
def test_triton_fp8_descales_are_per_batch_and_kv_head():
    """Powers of two are exact in e4m3: (x8 * 2^a, descale / 2^a) is the same input, so the kernel's
    output must not change (up to fp32 rounding), with different factors per (batch, KV head)."""
    g = torch.Generator(device="cpu").manual_seed(3)

    def fp8(*shape):  # e4m3 values with magnitudes in [1/4, 16): x 4 or / 8 stays exact
        x = torch.randn(*shape, generator=g).clamp(-3.9, 3.9) * 4
        x = torch.where(x.abs() < 0.25, torch.full_like(x, 0.25), x)
        return x.to(FP8).to(DEVICE)

    q8, k8, v8 = fp8(2, 30, 4, 64), fp8(2, 30, 2, 64), fp8(2, 30, 2, 64)
    ds = {n: torch.rand(2, 2, generator=g).add(0.02).to(DEVICE) for n in ("q_descale", "k_descale", "v_descale")}
    e = torch.tensor([[1.0, 4.0], [0.125, 2.0]], device=DEVICE)  # per (batch, KV head)
    eq = e.repeat_interleave(2, dim=1)  # q's heads of each group
    q2 = (q8.float() * eq[:, None, :, None]).to(FP8)
    k2 = (k8.float() / e[:, None, :, None] / 4).to(FP8)
    v2 = (v8.float() * e[:, None, :, None]).to(FP8)
    assert torch.equal(q2.float() / eq[:, None, :, None], q8.float())  # exact round trips
    assert torch.equal(k2.float() * e[:, None, :, None] * 4, k8.float())
    ds2 = dict(q_descale=ds["q_descale"] / e, k_descale=ds["k_descale"] * e * 4, v_descale=ds["v_descale"] / e)
    out1, lse1 = _fwd_kernel(q8, k8, v8, ds, causal=True)
    out2, lse2 = _fwd_kernel(q2, k2, v2, ds2, causal=True)
    assert rel_err(lse2, lse1) < LSE_TOL and rel_err(out2, out1) < 2e-3
    ro, rl = _ref(q8, k8, v8, ds, causal=True)
    assert rel_err(lse1, rl) < LSE_TOL and rel_err(out1, ro) < TRITON_OUT_TOL


@needs_triton
def test_triton_fp8_varlen():
    """Varlen: the descale row of a sequence is its index (an empty sequence in the middle)."""
    cu = torch.tensor([0, 9, 9, 40], dtype=torch.int32, device=DEVICE)
    q, k, v = (torch.randn(40, h, 64, device=DEVICE) for h in (4, 2, 2))
    (q8, qd), (k8, kd), (v8, vd) = quantize(q, 2, FP8, cu), quantize(k, None, FP8, cu), quantize(v, None, FP8, cu)
    ds = dict(q_descale=qd, k_descale=kd, v_descale=vd)
    with use_backend("triton"):
        out, lse, _ = flash_attn_varlen_func(q8, k8, v8, cu, cu, 31, 31, causal=True, return_attn_probs=True, **ds)
    ro, rl = attention_ref_varlen(q8, k8, v8, cu, cu, causal=True, **ds)
    assert rel_err(lse, rl) < LSE_TOL and rel_err(out, ro) < TRITON_OUT_TOL


@needs_triton
def test_api_dispatch_and_explain():
    import flash_attention_amd as fa

    q8, k8, v8, ds = _inputs(1, 17, 17, 2, 2, 64)
    text = fa.explain(q8, k8, v8, causal=True, **ds)
    assert "fp8-descale" in text and "sdpa: FP8" in text or "-> triton" in text
    with use_backend("triton"):
        out = flash_attn_func(q8, k8, v8, causal=True, **ds)
    ro, _ = _ref(q8, k8, v8, ds, causal=True)
    assert out.dtype == torch.bfloat16 and rel_err(out, ro) < TRITON_OUT_TOL


# ----------------------------------------------------------------------------- errors and declines

def test_errors():
    q8, k8, v8, ds = _inputs(2, 8, 8, 4, 2, 32, dtype=E4M3)
    with pytest.raises(ValueError, match="FP8 inputs need q_descale, k_descale and v_descale"):
        flash_attn_func(q8, k8, v8)
    with pytest.raises(ValueError, match="k_descale is None"):
        flash_attn_func(q8, k8, v8, q_descale=ds["q_descale"], v_descale=ds["v_descale"])
    with pytest.raises(ValueError, match=r"q_descale has shape \(2, 4\); allowed: \(2, 2\)"):
        flash_attn_func(q8, k8, v8, **dict(ds, q_descale=torch.ones(2, 4, device=DEVICE)))
    with pytest.raises(TypeError, match="v_descale has dtype torch.float16; allowed: float32"):
        flash_attn_func(q8, k8, v8, **dict(ds, v_descale=ds["v_descale"].half()))
    with pytest.raises(ValueError, match="descale factors apply to FP8"):
        x = torch.randn(2, 8, 2, 32, device=DEVICE)
        flash_attn_func(x, x, x, **ds)
    with pytest.raises(ValueError, match="forward-only"):
        flash_attn_func(q8.float().to(q8.dtype).requires_grad_(), k8, v8, **ds)
    with pytest.raises(ValueError, match="dropout_p is 0.1 with FP8"):
        flash_attn_func(q8, k8, v8, dropout_p=0.1, **ds)
    with pytest.raises(TypeError, match="k has dtype"):
        flash_attn_func(q8, k8.to(torch.bfloat16), v8, **ds)


def test_descale_values_are_checked(monkeypatch):
    """Negative / non-finite descales: an error on CPU tensors always, on GPU tensors in debug mode."""
    if DEVICE == "cuda":
        monkeypatch.setenv("FLASH_ATTENTION_DEBUG", "1")
    q8, k8, v8, ds = _inputs(2, 8, 8, 4, 2, 32, dtype=E4M3)
    bad = ds["k_descale"].clone()
    bad[1, 0] = -1.0
    with pytest.raises(ValueError, match=r"k_descale\[1, 0\] is -1.0; allowed: finite values > 0"):
        flash_attn_func(q8, k8, v8, **dict(ds, k_descale=bad))
    bad[1, 0] = math.inf
    with pytest.raises(ValueError, match=r"k_descale\[1, 0\] is inf"):
        flash_attn_func(q8, k8, v8, **dict(ds, k_descale=bad))


def test_triton_declines_say_why():
    from flash_attention_amd.launch import fwd
    from flash_attention_amd.params import Problem

    def problem(arch, dtype, d=128, **kw):
        return Problem(device_type="cuda", is_rocm=arch.startswith("gfx"), arch=arch, dtype=dtype, batch=1,
                       seqlen_q=64, seqlen_k=64, nheads=4, nheads_k=4, headdim=d, headdim_v=d, fp8=True, **kw)

    fnuz = torch.float8_e4m3fnuz
    assert fwd.supports(problem("sm90", E4M3)) is None
    assert fwd.supports(problem("gfx942", fnuz)) is None
    assert fwd.supports(problem("gfx950", E4M3)) is None
    assert "take float8_e4m3fnuz" in fwd.supports(problem("gfx942", E4M3))
    assert "float8_e4m3fn" in fwd.supports(problem("sm90", fnuz))
    assert "no FP8 forward on gfx90a" in fwd.supports(problem("gfx90a", fnuz))
    assert "no FP8 forward on sm80" in fwd.supports(problem("sm80", E4M3))
    assert "head dims up to 256" in fwd.supports(problem("sm90", E4M3, d=320))
    assert "forward-only" in fwd.supports(problem("sm90", E4M3, needs_grad=True))


def test_compile_specs_have_fp8_rows():
    from flash_attention_amd.launch import fwd

    for arch, ty in (("sm90", "*fp8e4nv"), ("gfx942", "*fp8e4b8"), ("gfx950", "*fp8e4nv")):
        specs = [s for s in fwd.compile_specs(arch) if s.signature["Q"] == ty]
        assert {s.constexprs["HEAD_DIM"] for s in specs} >= {64, 128, 256}
        assert all(s.signature["Out"] == "*bf16" and len(s.signature["Descales"]) == 3 for s in specs)
    assert not [s for s in fwd.compile_specs("gfx90a") if "fp8" in s.signature["Q"]]


def test_fp8_v_layout_and_tables():
    """sm90: dense FP8 calls without options read V as [b, hk, dv, sk] (V_T, the FWD_FP8 rows and
    specs); options or varlen read V as it lies (FWD_FP8_OPTIONS); AMD never transposes V."""
    from flash_attention_amd.launch import fwd
    from flash_attention_amd.launch.tiles import FWD_FP8, FWD_FP8_OPTIONS

    e4m3 = torch.float8_e4m3fn
    dense = fwd.select_config("sm90", e4m3, 128, 128, False, 8192)
    assert dense == FWD_FP8["sm90"][1].config
    for options, varlen in ((True, False), (False, True)):
        assert fwd.select_config("sm90", e4m3, 128, 128, False, 8192, options=options, varlen=varlen) == \
            FWD_FP8_OPTIONS["sm90"][1].config
    from flash_attention_amd.kernels.features import has

    def flag(s, name):
        return has(s.constexprs["FEATURES"], name)

    specs = [s for s in fwd.compile_specs("sm90") if s.signature["Q"] == "*fp8e4nv"]
    assert {s.label.split()[2] for s in specs if flag(s, "V_T")} == {"plain", "causal"}
    assert all(s.divisible == ("sizes[3]",) for s in specs if flag(s, "V_T"))
    from flash_attention_amd.tools.check_kernels.compile import attrs_for

    vt = next(s for s in specs if flag(s, "V_T"))  # seqlen_k (sizes[3]) compiled as a multiple of 16
    sizes = vt.fn.arg_names.index("sizes")
    assert attrs_for(vt.fn, vt.signature, "cuda", True, vt.divisible)[(sizes, 3)] == [["tt.divisibility", 16]]
    assert (sizes, 3) not in attrs_for(vt.fn, vt.signature, "cuda", True)
    assert not [s for s in specs if flag(s, "V_T") and flag(s, "HAS_WINDOW")]
    assert not [s for s in fwd.compile_specs("gfx942") if flag(s, "V_T")]


# ----------------------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_gpu_accuracy_vs_bf16(causal, d):
    """Random N(0, 1) data, 16k tokens: the FP8 forward (inputs quantised per (batch, KV head) by amax)
    against the bf16 forward on the original data: relative Frobenius error < 0.08 (measured on the
    CPU path: ~4.7% from the e4m3 inputs, ~5.4% with P in e4m3 too); against the oracle on the
    dequantised inputs < 0.05 (P in e4m3: ~2.5%)."""
    torch.manual_seed(0)
    b, s, h = 16384 // 4096, 4096, 2048 // d
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    (q8, qd), (k8, kd), (v8, vd) = quantize(q), quantize(k), quantize(v)
    with use_backend("triton"):
        out8 = flash_attn_func(q8, k8, v8, causal=causal, q_descale=qd, k_descale=kd, v_descale=vd)
        out16 = flash_attn_func(q, k, v, causal=causal)
    assert out8.dtype == torch.bfloat16
    err_bf16 = rel_err(out8, out16)
    one = slice(0, 1)  # the float64 oracle on one sequence (memory)
    ro, _ = attention_ref(q8[one], k8[one], v8[one], causal=causal, q_descale=qd[one], k_descale=kd[one],
                          v_descale=vd[one])
    err_oracle = rel_err(out8[one], ro)
    print(f"d={d} causal={causal}: FP8 vs bf16 {err_bf16:.4f}, vs oracle on dequantised inputs {err_oracle:.4f}")
    assert err_bf16 < 0.08
    assert err_oracle < 0.05


@pytest.mark.gpu
def test_gpu_fp8_uses_the_fp8_dtype_of_the_device():
    dt = fp8_dtype("cuda")
    q8, k8, v8, ds = _inputs(2, 256, 256, 8, 2, 128, dtype=dt)
    out, lse = _fwd_kernel(q8, k8, v8, ds, causal=True)
    ro, rl = _ref(q8, k8, v8, ds, causal=True)
    assert rel_err(lse, rl) < LSE_TOL and rel_err(out, ro) < 0.05


def test_compile_fullgraph():
    """torch.compile traces an FP8 call into the forward custom op (bf16 out), same result as eager."""
    torch._dynamo.reset()
    q8, k8, v8, ds = _inputs(1, 16, 16, 2, 2, 32, dtype=E4M3)

    def f(q, k, v, qd, kd, vd):
        with use_backend("torch"):
            return flash_attn_func(q, k, v, causal=True, q_descale=qd, k_descale=kd, v_descale=vd)

    args = (q8, k8, v8, ds["q_descale"], ds["k_descale"], ds["v_descale"])
    out_c = torch.compile(f, fullgraph=True, backend="aot_eager")(*args)
    assert out_c.dtype == torch.bfloat16
    torch.testing.assert_close(out_c, f(*args))
