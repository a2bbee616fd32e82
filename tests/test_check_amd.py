"""``check-kernels`` (old name ``check-amd``): the static compile checker, package
``flash_attention_amd.tools.check_kernels``.

The pure parts (occupancy formulas, parsers, verdicts, the command line) are tested without
Triton. The compiling tests need Triton: they compile the small kernels of
tests/check_kernels_specs.py (loaded by the checker's workers through ``--specs <that file>``)
and, in quick mode, the library's real launchers.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

import flash_attention_amd.check_amd as alias
from flash_attention_amd import cli
from flash_attention_amd.tools import check_kernels as ck

SPECS = str(Path(__file__).with_name("check_kernels_specs.py"))


def _run(tmp_path, *args):
    pytest.importorskip("triton")
    path = tmp_path / "check.json"
    rc = ck.main(["--specs", SPECS, "--json", str(path), *args])
    return rc, json.loads(path.read_text())


# ----------------------------------------------------------------------------- pure functions
def test_occupancy_formulas():
    a = ck.ARCHS
    # CDNA (gfx90a / gfx942): 512 unified VGPRs per lane, granule 8, at most 8 waves per SIMD.
    assert ck.occupancy_amd(a["gfx942"], 64, 0, 4)[0] == 8
    assert ck.occupancy_amd(a["gfx942"], 128, 0, 4)[0] == 4
    assert ck.occupancy_amd(a["gfx942"], 129, 0, 4)[0] == 3  # rounds to 136: 512 // 136
    assert ck.occupancy_amd(a["gfx90a"], 256, 0, 4)[0] == 2
    assert ck.occupancy_amd(a["gfx90a"], 257, 0, 4)[0] == 1
    # RDNA3 wave32: 1536 VGPRs, granule 24, at most 16 waves.
    assert ck.occupancy_amd(a["gfx1100"], 96, 0, 4)[0] == 16
    assert ck.occupancy_amd(a["gfx1100"], 97, 0, 4)[0] == 12  # 120 -> 1536 // 120
    assert ck.occupancy_amd(a["gfx1100"], 256, 0, 4)[0] == 5
    # LDS: 64 KiB per CU, 32 KiB per 4-wave workgroup -> 2 groups -> 2 waves per SIMD.
    assert ck.occupancy_amd(a["gfx942"], 64, 32768, 4) == (2, 8, 2)
    # NVIDIA: 128 regs x 32 lanes = 4096 per warp -> 16 warps per SM -> 4 per sub-partition.
    assert ck.occupancy_nvidia(a["sm90"], 128, 0, 4)[0] == 4
    assert ck.occupancy_nvidia(a["sm90"], 255, 0, 8)[0] == 2
    # 64 regs: 8 blocks of 4 warps by registers (8 per sub-partition), but 100 KiB shared memory
    # (+1 KiB reserved) per block: 2 blocks per sm90 SM -> 8 warps -> 2 per sub-partition.
    assert ck.occupancy_nvidia(a["sm90"], 64, 100 * 1024, 4) == (2, 8, 2)


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
"""  # noqa: E501


def test_parsers():
    res = ck.parse_amdgcn(_AMDGCN_TAIL)
    assert res["vgpr_count"] == 150 and res["agpr_count"] == 16 and res["sgpr_count"] == 40
    assert res["vgpr_spill_count"] == 5 and res["sgpr_spill_count"] == 2
    assert res["private_segment_fixed_size"] == 24 and res["scratch_size"] == 24 and res["llvm_occupancy"] == 3
    with pytest.raises(ValueError, match="vgpr_count"):
        ck.parse_amdgcn("; Occupancy: 3\n")
    assert ck.amd_matrix_instrs(_AMDGCN_TAIL) == {"mfma_f32_32x32x8_f16": 2}
    assert ck.nvidia_matrix_instrs(_PTX) == {"mma.m16n8k16": 1, "wgmma.m64n64k16": 1}
    usage = ck.parse_cuobjdump(" Function k:\n  REG:168 STACK:8 SHARED:0 LOCAL:4 CONSTANT[0]:576")
    assert usage == {"regs": 168, "stack": 8, "static_shared": 0, "local": 4}
    ttir = "%1 = tt.dot %a, %b, %c : x\n%2 = tt.dot %d, %e, %f : y"
    ttgir = ("#mma = #ttg.amd_mfma<{version = 3}>\n#blocked = #ttg.blocked<{}>\n"
             "%1 = tt.dot %a, %b, %c : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32, #mma>\n"
             "%2 = tt.dot %d, %e, %f : tensor<64x32xf32> * tensor<32x64xf32> -> tensor<64x64xf32, #blocked>\n")
    assert ck.dot_lowering(ttir, ttgir) == (2, 1)


def test_judge_flags_each_problem():
    info = ck.ARCHS["gfx942"]
    clean = ck.Row("k", "gfx942", "c", vgprs=100, dots=2, matrix_dots=2, matrix={"mfma_x": 4}, lds=65536)
    ck.judge(clean, info)
    assert clean.status == "ok" and not clean.problems
    sgpr = ck.Row("k", "gfx942", "c", vgprs=100, sgpr_spills=2)
    ck.judge(sgpr, info)
    assert sgpr.status == "warn"  # SGPRs spilled into VGPR lanes: reported, not a failure
    for change, words in (
        ({"spills": 3, "sgpr_spills": 1}, "spills 3"),
        ({"scratch": 16}, "scratch"),
        ({"lds": 65537}, "shared memory"),
        ({"matrix_dots": 1}, "without matrix cores"),
        ({"matrix": {}}, "no MFMA/WMMA"),
    ):
        row = ck.Row("k", "gfx942", "c", vgprs=100, dots=2, matrix_dots=2, matrix={"mfma_x": 4})
        for key, val in change.items():
            setattr(row, key, val)
        ck.judge(row, info)
        assert row.status == "FAIL" and any(words in p for p in row.problems), (change, row.problems)


def test_accepted_spills_warn_on_nvidia_only():
    """A measured NVIDIA config may keep its spills (a warning naming the measurement); AMD never."""
    for arch, expected in (("sm90", "warn"), ("gfx942", "FAIL")):
        row = ck.Row("bwd_dkdv", arch, "cfg", spills=30, scratch=120)
        ck.judge(row, ck.ARCHS[arch], accepted_spills="fastest on an H100")
        assert row.status == expected, (arch, row.problems)
    row = ck.Row("bwd_dkdv", "sm90", "cfg", spills=30, scratch=120)
    ck.judge(row, ck.ARCHS["sm90"])
    assert row.status == "FAIL"


def test_backward_specs_carry_each_kernels_own_spill_reason():
    """On NVIDIA each backward kernel's build is judged against its own tile's ``spills_ok`` (a dQ tile measured
    apart from its dK/dV tile, e.g. sm90's d=256 row, names its own measurement); AMD builds accept none."""
    from flash_attention_amd.launch import bwd
    from flash_attention_amd.launch.tiles_bwd import _D256_DQ128

    assert _D256_DQ128.dq.spills_ok != _D256_DQ128.dkdv.spills_ok
    specs = bwd.config_specs("sm90", _D256_DQ128, "bf16", 256, True, "win", accepted_spills=None)
    kinds = {s.kernel: s.accepted_spills for s in specs}
    assert kinds == {"bwd_dkdv": _D256_DQ128.dkdv.spills_ok, "bwd_dq": _D256_DQ128.dq.spills_ok}
    library = [s for s in bwd.compile_specs("sm90") if s.kernel == "bwd_dq" and "d=256" in s.label
               and "128x32 w8" in s.label]
    biased = [s for s in library if "bias" in s.label or "mask" in s.label]  # the bias tiers' own rows (_BIAS256, ...)
    assert library and all(s.accepted_spills == _D256_DQ128.dq.spills_ok for s in library if s not in biased)
    assert biased and all(s.accepted_spills and s.accepted_spills != _D256_DQ128.dq.spills_ok for s in biased)
    assert all(not s.accepted_spills for s in bwd.config_specs("gfx942", _D256_DQ128, "bf16", 256, True))


def test_quick_subset_keeps_heaviest_and_lightest():
    jobs = [ck.Job("src", "gfx942", i, "fwd", f"#{i}", w) for i, w in enumerate((3.0, 9.0, 1.0, 5.0))]
    jobs.append(ck.Job("src", "gfx942", 4, "decode", "#4", 2.0))
    assert [(j.kernel, j.index) for j in ck.quick_subset(jobs)] == [("fwd", 1), ("fwd", 2), ("decode", 4)]


def test_reports():
    rows = [ck.Row("fwd", "gfx942", "a|b", vgprs=200, agprs=8, sgprs=60, lds=32768, occupancy=2, occ_by_regs=2,
                   occ_by_lds=2, dots=2, matrix_dots=2, matrix={"mfma_x": 4}),
            ck.Row("fwd", "gfx942", "c", status="FAIL", problems=["compile failed: X"])]
    table = ck.format_table(rows).splitlines()
    assert table[0].startswith("kernel") and "200(8)" in table[2] and "FAIL: compile failed: X" in table[3]
    md = ck.format_markdown(rows)
    assert "| fwd | gfx942 | 2 | 1 | 0 | 1 | 1 | 200 | 0 | 2 |" in md and "a\\|b" in md
    assert ck.summarize(rows)[0]["vgprs"] == (200, 200)


def test_alias_module_reexports_the_package():
    assert alias.main is ck.main
    for name in ck.__all__:
        assert getattr(alias, name) is getattr(ck, name), name


def test_bad_arch_is_usage_error(capsys):
    assert ck.main(["--arch", "gfx000", "--specs", SPECS]) == 2
    assert "check-kernels: unknown arch gfx000" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["check-kernels", "check-amd"])
def test_command_and_alias(command, capsys):
    """Both names reach the checker, which names the command it was called as."""
    assert cli.main([command, "--arch", "gfx000"]) == 2
    assert f"{command}: unknown arch gfx000" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert f"flash-attention-amd {command}" in out and "'check-amd' is the old name" in out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "check-kernels (check-amd)" in capsys.readouterr().out


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
def test_every_launcher_exposes_compile_specs():
    """The checker skips a source without ``compile_specs`` with only a note: every launcher must
    have one, or its kernels would silently go unchecked."""
    for name in ck.LAUNCHERS:
        assert callable(getattr(importlib.import_module(name), "compile_specs", None)), name


def test_real_kernels_quick(tmp_path):
    """CI: every launcher's heaviest and lightest config per kernel compiles cleanly for
    gfx90a, gfx942 and gfx1100 (no spills, no scratch, MFMA/WMMA used), through the command."""
    pytest.importorskip("triton")
    path = tmp_path / "quick.json"
    rc = cli.main(["check-kernels", "--quick", "--json", str(path)])
    out = json.loads(path.read_text())
    failures = [(r["kernel"], r["arch"], r["label"], r["problems"]) for r in out["rows"] if r["status"] == "FAIL"]
    assert rc == 0 and not failures, failures
    assert out["notes"] == [] and out["skipped_archs"] == {}
    kernels = {"fwd", "bwd_dkdv", "bwd_dq", "bwd_pre", "decode", "combine", "append"}
    got = {(r["kernel"], r["arch"]) for r in out["rows"]}
    assert got == {(k, a) for k in kernels for a in ck.QUICK_ARCHS}, got
    assert all(r["vgprs"] > 0 and r["matrix"] for r in out["rows"]
               if r["kernel"] not in ("bwd_pre", "combine", "append"))  # no matrix products in these
