"""``check-amd``: the static compile checker (flash_attention_amd/check_amd.py).

The checker compiles kernels for AMD and NVIDIA targets on the CPU. It is tested on small
kernels of this file, which it loads in its worker processes through ``--specs <this file>``
(so ``compile_specs`` below is the same interface the launchers expose), and in quick mode
on the library's real launchers once they expose ``compile_specs``.

Shape legend: M query rows of a block, N key columns of a block, D head dim.
"""
from __future__ import annotations

import importlib
import json

import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from flash_attention_amd import check_amd  # noqa: E402
from flash_attention_amd.kernels.common import key_range, philox_keep, score_mod, visible  # noqa: E402
from flash_attention_amd.launch.spec import CompileSpec  # noqa: E402


@triton.jit
def _tiny_attn_fwd(Q, K, V, Out, seqlen_q, seqlen_k, sm_scale, seed_lo, seed_hi, threshold,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                   IS_CAUSAL: tl.constexpr, HAS_DROPOUT: tl.constexpr):
    """One head, contiguous [seqlen, HEAD_DIM] q/k/v: online softmax with the shared helpers."""
    start_m = tl.program_id(0) * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                mask=offs_m[:, None] < seqlen_q, other=0.0)  # [BLOCK_M, HEAD_DIM]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    diag = seqlen_k - seqlen_q
    lo, hi = key_range(start_m, start_m + BLOCK_M - 1, diag, seqlen_k, -1, -1, BLOCK_N, IS_CAUSAL, False)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        kt = tl.load(K + cols[None, :] * HEAD_DIM + offs_d[:, None],
                     mask=cols[None, :] < seqlen_k, other=0.0)  # [HEAD_DIM, BLOCK_N]
        s, _ = score_mod(tl.dot(q, kt), offs_m, cols, diag, sm_scale, 0.0, 0.0, False, False)
        s = tl.where(visible(offs_m, cols, diag, seqlen_k, -1, -1, IS_CAUSAL, False, True), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        if HAS_DROPOUT:
            keep = philox_keep(seed_lo, seed_hi, cols[None, :], offs_m[:, None], tl.program_id(1), threshold)
            p = tl.where(keep, p, 0.0)
        v = tl.load(V + cols[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=cols[:, None] < seqlen_k, other=0.0)  # [BLOCK_N, HEAD_DIM]
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(Out + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(Out.dtype.element_ty),
             mask=offs_m[:, None] < seqlen_q)


@triton.jit
def _tiny_matmul(A, B, C, stride, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C[M, N] = A[M, K] @ B[K, N] for one [BLOCK_M, BLOCK_N] tile, row-major with a common
    stride; the fp32 accumulator lives across the K loop (so its registers are all live)."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(A + offs_m[:, None] * stride + (k + offs_k)[None, :])  # [BLOCK_M, BLOCK_K]
        b = tl.load(B + (k + offs_k)[:, None] * stride + offs_n[None, :])  # [BLOCK_K, BLOCK_N]
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(C + offs_m[:, None] * stride + offs_n[None, :], acc.to(C.dtype.element_ty))


def _attn_spec(dt, d, causal, dropout, bm, bn, nw, stages=1):
    sig = {"Q": f"*{dt}", "K": f"*{dt}", "V": f"*{dt}", "Out": f"*{dt}", "seqlen_q": "i32",
           "seqlen_k": "i32", "sm_scale": "fp32", "seed_lo": "i32", "seed_hi": "i32", "threshold": "i32"}
    cx = {"BLOCK_M": bm, "BLOCK_N": bn, "HEAD_DIM": d, "IS_CAUSAL": causal, "HAS_DROPOUT": dropout}
    label = f"{dt} d={d}{' causal' if causal else ''}{' dropout' if dropout else ''} {bm}x{bn} w{nw} s{stages}"
    return CompileSpec("tiny_attn", _tiny_attn_fwd, sig, cx, {"num_warps": nw, "num_stages": stages}, label)


def _mm_spec(kernel, dt, bm, bn, bk, nw, drop_arg=False):
    sig = {"A": f"*{dt}", "B": f"*{dt}", "C": f"*{dt}", "stride": "i32", "K": "i32"}
    if drop_arg:
        del sig["K"]  # an incomplete signature: triton.compile must fail
    cx = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
    return CompileSpec(kernel, _tiny_matmul, sig, cx, {"num_warps": nw}, f"{dt} {bm}x{bn}x{bk} w{nw}")


def compile_specs(arch: str) -> list[CompileSpec]:
    """The test configs. Pick them with --kernel: tiny_attn passes everywhere; tiny_spill
    (an fp32 accumulator of 256 registers per lane) spills on gfx1100 and sm80; tiny_fma (an
    fp32 ieee dot) has no WMMA / mma form; tiny_broken does not compile."""
    return [
        _attn_spec("fp16", 64, True, True, 64, 32, 4),
        _attn_spec("bf16", 128, False, False, 64, 64, 4),
        # 128x128 (gfx1100) / 128x64 (NVIDIA) fp32 accumulator over 64 / 32 lanes: 256 registers
        _mm_spec("tiny_spill", "fp16", 128, 64, 16, 1) if arch.startswith("sm") else
        _mm_spec("tiny_spill", "fp16", 128, 128, 16, 2),
        _mm_spec("tiny_fma", "fp32", 32, 32, 16, 1),
        _mm_spec("tiny_broken", "fp16", 32, 32, 16, 1, drop_arg=True),
    ]


def _run(tmp_path, *args):
    path = tmp_path / "check.json"
    rc = check_amd.main(["--specs", __file__, "--json", str(path), *args])
    return rc, json.loads(path.read_text())


# ----------------------------------------------------------------------------- pure functions
def test_occupancy_formulas():
    a = check_amd.ARCHS
    # CDNA (gfx90a / gfx942): 512 unified VGPRs per lane, granule 8, at most 8 waves per SIMD.
    assert check_amd.occupancy_amd(a["gfx942"], 64, 0, 4)[0] == 8
    assert check_amd.occupancy_amd(a["gfx942"], 128, 0, 4)[0] == 4
    assert check_amd.occupancy_amd(a["gfx942"], 129, 0, 4)[0] == 3  # rounds to 136: 512 // 136
    assert check_amd.occupancy_amd(a["gfx90a"], 256, 0, 4)[0] == 2
    assert check_amd.occupancy_amd(a["gfx90a"], 257, 0, 4)[0] == 1
    # RDNA3 wave32: 1536 VGPRs, granule 24, at most 16 waves.
    assert check_amd.occupancy_amd(a["gfx1100"], 96, 0, 4)[0] == 16
    assert check_amd.occupancy_amd(a["gfx1100"], 97, 0, 4)[0] == 12  # 120 -> 1536 // 120
    assert check_amd.occupancy_amd(a["gfx1100"], 256, 0, 4)[0] == 5
    # LDS: 64 KiB per CU, 32 KiB per 4-wave workgroup -> 2 groups -> 2 waves per SIMD.
    assert check_amd.occupancy_amd(a["gfx942"], 64, 32768, 4) == (2, 8, 2)
    # NVIDIA: 128 regs x 32 lanes = 4096 per warp -> 16 warps per SM -> 4 per sub-partition.
    assert check_amd.occupancy_nvidia(a["sm90"], 128, 0, 4)[0] == 4
    assert check_amd.occupancy_nvidia(a["sm90"], 255, 0, 8)[0] == 2


_AMDGCN_TAIL = """
	v_mfma_f32_32x32x8_f16 a[0:15], v[2:3], v[4:5], a[0:15]
	v_mfma_f32_32x32x8_f16 a[0:15], v[6:7], v[8:9], a[0:15]
; ScratchSize: 24
; Occupancy: 3
	.amdgpu_metadata
amdhsa.kernels:
  - .agpr_count:     16
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 24
    .sgpr_count:     40
    .sgpr_spill_count: 2
    .vgpr_count:     150
    .vgpr_spill_count: 5
    .wavefront_size: 64
	.end_amdgpu_metadata
"""

_PTX = """
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};
	@%p7 wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%r1}, %rd33, %rd34, 0, 1, 1, 0, 1;
	wgmma.fence.sync.aligned;
"""


def test_parsers():
    res = check_amd.parse_amdgcn(_AMDGCN_TAIL)
    assert res["vgpr_count"] == 150 and res["agpr_count"] == 16 and res["sgpr_count"] == 40
    assert res["vgpr_spill_count"] == 5 and res["sgpr_spill_count"] == 2
    assert res["private_segment_fixed_size"] == 24 and res["scratch_size"] == 24 and res["llvm_occupancy"] == 3
    assert check_amd.amd_matrix_instrs(_AMDGCN_TAIL) == {"mfma_f32_32x32x8_f16": 2}
    assert check_amd.nvidia_matrix_instrs(_PTX) == {"mma.m16n8k16": 1, "wgmma.m64n64k16": 1}
    usage = check_amd.parse_cuobjdump(" Function k:\n  REG:168 STACK:8 SHARED:0 LOCAL:4 CONSTANT[0]:576")
    assert usage == {"regs": 168, "stack": 8, "static_shared": 0, "local": 4}
    ttir = "%1 = tt.dot %a, %b, %c : x\n%2 = tt.dot %d, %e, %f : y"
    ttgir = ("#mma = #ttg.amd_mfma<{version = 3}>\n#blocked = #ttg.blocked<{}>\n"
             "%1 = tt.dot %a, %b, %c : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32, #mma>\n"
             "%2 = tt.dot %d, %e, %f : tensor<64x32xf32> * tensor<32x64xf32> -> tensor<64x64xf32, #blocked>\n")
    assert check_amd.dot_lowering(ttir, ttgir) == (2, 1)


def test_judge_flags_each_problem():
    info = check_amd.ARCHS["gfx942"]
    clean = check_amd.Row("k", "gfx942", "c", vgprs=100, dots=2, matrix_dots=2, matrix={"mfma_x": 4}, lds=65536)
    check_amd.judge(clean, info)
    assert clean.status == "ok" and not clean.problems
    sgpr = check_amd.Row("k", "gfx942", "c", vgprs=100, sgpr_spills=2)
    check_amd.judge(sgpr, info)
    assert sgpr.status == "warn"  # SGPRs spilled into VGPR lanes: reported, not a failure
    for change, words in (
        ({"spills": 3, "sgpr_spills": 1}, "spills 3"),
        ({"scratch": 16}, "scratch"),
        ({"lds": 65537}, "shared memory"),
        ({"matrix_dots": 1}, "without matrix cores"),
        ({"matrix": {}}, "no MFMA/WMMA"),
    ):
        row = check_amd.Row("k", "gfx942", "c", vgprs=100, dots=2, matrix_dots=2, matrix={"mfma_x": 4})
        for key, val in change.items():
            setattr(row, key, val)
        check_amd.judge(row, info)
        assert row.status == "FAIL" and any(words in p for p in row.problems), (change, row.problems)


def test_bad_arch_is_usage_error(capsys):
    assert check_amd.main(["--arch", "gfx000", "--specs", __file__]) == 2


# ----------------------------------------------------------------------------- compiling
def test_checker_passes_good_configs(tmp_path):
    archs = ["gfx90a", "gfx942", "gfx1100", "sm90"]
    rc, out = _run(tmp_path, "--kernel", "tiny_attn", "--arch", ",".join(archs))
    rows = out["rows"]
    assert rc == 0, [r["problems"] for r in rows]
    assert sorted({r["arch"] for r in rows}) == sorted(archs) and len(rows) == 2 * len(archs)
    for r in rows:
        assert r["status"] in ("ok", "warn") and r["dots"] == 2 == r["matrix_dots"]
        assert r["vgprs"] > 0 and r["spills"] == 0 and r["scratch"] == 0 and r["occupancy"] >= 1
        prefix = {"gfx90a": "mfma", "gfx942": "mfma", "gfx1100": "wmma", "sm90": "wgmma"}[r["arch"]]
        assert any(name.startswith(prefix) for name in r["matrix"]), (r["arch"], r["matrix"])
        if r["arch"].startswith("gfx"):
            assert r["sgprs"] > 0
            # Our VGPR formula agrees with the occupancy LLVM computed for the kernel.
            assert r["occ_by_regs"] == r["llvm_occupancy"], r


def test_checker_fails_on_spill_fma_and_compile_error(tmp_path, capsys):
    rc, out = _run(tmp_path, "--kernel", "tiny_spill,tiny_fma,tiny_broken", "--arch", "gfx1100,sm80")
    assert rc == 1
    nv = {r["kernel"]: r for r in out["rows"] if r["arch"] == "sm80"}
    rows = {r["kernel"]: r for r in out["rows"] if r["arch"] == "gfx1100"}
    assert set(rows) == set(nv) == {"tiny_spill", "tiny_fma", "tiny_broken"}
    assert all(r["status"] == "FAIL" for r in rows.values())
    spill = rows["tiny_spill"]
    assert spill["spills"] > 0 and spill["scratch"] > 0 and spill["vgprs"] == 256
    assert any("spills" in p for p in spill["problems"])
    # NVIDIA: 128x64 fp32 accumulator over 32 threads = 256 registers > 255 -> ptxas spills.
    assert nv["tiny_spill"]["status"] == "FAIL" and nv["tiny_spill"]["spills"] > 0
    assert all(r["status"] == "FAIL" for r in nv.values())
    # an fp32 dot with input_precision="ieee" has no tensor-core form on either vendor
    assert nv["tiny_fma"]["matrix"] == {} and any("FMA" in p for p in nv["tiny_fma"]["problems"])
    assert rows["tiny_fma"]["matrix"] == {} and any("FMA" in p for p in rows["tiny_fma"]["problems"])
    assert any("compile failed" in p for p in rows["tiny_broken"]["problems"])
    printed = capsys.readouterr().out
    assert "tiny_spill" in printed and "FAIL" in printed and "6 FAIL" in printed


# ----------------------------------------------------------------------------- the library
def _launchers_with_specs() -> list[str]:
    found = []
    for name in check_amd.LAUNCHERS:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        if callable(getattr(mod, "compile_specs", None)):
            found.append(name)
    return found


def test_real_kernels_quick(tmp_path):
    """CI: every launcher's heaviest and lightest config per kernel compiles cleanly for
    gfx90a, gfx942, gfx1100 and sm90 (no spills, no scratch, MFMA/WMMA/wgmma used)."""
    if not _launchers_with_specs():
        pytest.skip("no launcher exposes compile_specs yet")
    path = tmp_path / "quick.json"
    rc = check_amd.main(["--quick", "--json", str(path)])
    out = json.loads(path.read_text())
    failures = [(r["kernel"], r["arch"], r["label"], r["problems"]) for r in out["rows"] if r["status"] == "FAIL"]
    assert rc == 0, failures
    archs = {r["arch"] for r in out["rows"]}
    assert {"gfx90a", "gfx942", "gfx1100"} <= archs, archs


def test_accepted_spills_warn_on_nvidia_only():
    """A measured NVIDIA config may keep its spills (a warning naming the measurement); AMD never."""
    from flash_attention_amd.check_amd import ARCHS, Row, judge

    for arch, expected in (("sm90", "warn"), ("gfx942", "FAIL")):
        row = Row("bwd_dkdv", arch, "cfg", spills=30, scratch=120)
        judge(row, ARCHS[arch], accepted_spills="fastest on an H100")
        assert row.status == expected, (arch, row.problems)
    row = Row("bwd_dkdv", "sm90", "cfg", spills=30, scratch=120)
    judge(row, ARCHS["sm90"])
    assert row.status == "FAIL"
