"""flash-attention-amd bench: argument errors, the record schema of --json / --csv, and a tiny
CPU run of every suite (--tiny: the smallest sizes, seconds; the numbers mean nothing)."""
import csv
import json
import subprocess
import sys

import pytest
import torch

from flash_attention_amd.bench import core
from flash_attention_amd.cli import main


def _bench(args, capsys, device="cpu"):
    rc = main(["bench", "--tiny", "--no-progress", "--device", device, *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _ok(path) -> set:
    """{(table, backend, metric)} of the records measured without error."""
    recs = json.loads(path.read_text())["records"]
    return {(r["table"], r["backend"], r["metric"]) for r in recs if r["status"] == "ok"}, recs


# ---------------------------------------------------------------------- argument errors

@pytest.mark.parametrize("args, words", [
    (["--backends", "foo"], "unknown backend 'foo'"),
    (["--seqlens", "-5"], "--seqlens must be a positive integer"),
    (["--device", "meta"], "'meta' is not a device"),
    (["--reps", "0"], "--reps must be a positive integer"),
    (["--suite", "nope"], "invalid choice"),
    (["--plot", "out.txt"], "--plot takes a .png path"),
    (["--json", "/no/such/folder/x.json"], "does not exist"),
    (["--headdims", "1024"], "at most 512"),
    (["--features", "bias,foo"], "unknown feature foo"),
    (["--features", "bias"], "--features times the kernels suite, not --suite seeds"),
    (["--suite", "kernels", "--features", "bias", "--headdims", "512"], "--features: head dims up to 256"),
    (["--suite", "kernels", "--features", "bias", "--fp8"], "run them separately"),
])
def test_bad_arguments_are_one_line_errors(args, words, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", *args])
    assert exc.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, out.err
    assert lines[0].startswith("flash-attention-amd bench: error:") and words in lines[0], lines[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cuda_without_gpu_is_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--device", "cuda"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no CUDA/ROCm GPU" in err and len(err.strip().splitlines()) == 1


def test_plot_without_matplotlib_is_an_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--tiny", "--plot", str(tmp_path / "x.png")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err and len(err.strip().splitlines()) == 1


def test_bad_argument_in_a_fresh_process_has_no_traceback():
    res = subprocess.run([sys.executable, "-m", "flash_attention_amd", "bench", "--device", "meta"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


# ---------------------------------------------------------------------- figures and tables

def test_figure_median_spread_and_flag():
    f = core.Figure([10.0, 12.0, 11.0])
    assert f.value == 11.0 and (f.lo, f.hi) == (10.0, 12.0)
    assert f.spread_pct == pytest.approx(200 / 11)
    r = core.ratio(core.Figure([4.0, 4.0]), core.Figure([2.0, 1.0]))
    assert r.value == pytest.approx(4.0 / 1.5) and (r.lo, r.hi) == (2.0, 4.0)
    t = core.Table("s", "t", "T", "time", "ms", ["n"])
    t.put({"n": 1}, "a", core.Cell(core.Figure([1.0, 1.5])))
    t.put({"n": 1}, "b", core.Cell(core.Figure([2.0, 2.0])))
    t.put({"n": 1}, "c", core.Cell(None, "declined", "cannot"))
    t.ratio("speedup a", "speedup", "b", "a", subject="den")
    recs = t.records("dev", {"torch": "x"})
    by = {(r["backend"], r["metric"]): r for r in recs}
    assert by[("a", "time")]["flagged"] and not by[("b", "time")]["flagged"]
    assert by[("c", "time")]["status"] == "declined" and by[("c", "time")]["value"] is None
    assert by[("a", "speedup")]["parameters"]["baseline"] == "b" and by[("a", "speedup")]["unit"] == "x"
    md = t.markdown()
    assert "| 1 | 1.25 (1.00-1.50) | 2.00 | 1.60x | a |" in md
    assert "- c: declined: cannot" in md


def test_ratio_of_figures_taken_in_turns_pairs_their_rounds():
    """Samples taken in the same rounds (one tag): the ratio is the median of the rounds' ratios, so that stalls
    that hit both paths in the same rounds (b's rounds 2-4, a's rounds 3-4 here) cancel; untagged, or tags or lengths
    that differ: the median over the median."""
    tag = object()
    a = core.Figure([10.0, 10.0, 10.0, 30.0, 30.0], rounds=tag)
    b = core.Figure([20.0, 20.0, 40.0, 40.0, 40.0], rounds=tag).map(lambda ms: ms)  # map keeps the tag
    r = core.ratio(a, b)
    assert r.samples == [0.5, 0.5, 0.25, 0.75, 0.75] and r.value == pytest.approx(0.5) and (r.lo, r.hi) == (0.25, 0.75)
    for other in (core.Figure(a.samples), core.Figure(a.samples, rounds=object())):
        unpaired = core.ratio(other, b)
        assert unpaired.value == pytest.approx(10.0 / 40.0) and (unpaired.lo, unpaired.hi) == (0.25, 1.5)
    assert core.ratio(core.Figure([10.0, 30.0], rounds=tag), b).value == pytest.approx(20.0 / 40.0)


def test_flag_agrees_with_the_written_spread_at_the_boundary():
    """A spread of 10.004 % is written as 10.0 and not flagged (flag and record agree); 10.02 % is."""
    for hi, flagged in ((1.10004, False), (1.1002, True)):
        t = core.Table("s", "t", "T", "time", "ms", ["n"])
        t.put({"n": 1}, "a", core.Cell(core.Figure([1.0, 1.0, hi])))
        (rec,) = [r for r in t.records("dev", {"torch": "x"}) if r["backend"] == "a"]
        assert rec["flagged"] is flagged and rec["flagged"] == (rec["spread_pct"] > core.FLAG_PCT)


# ---------------------------------------------------------------------- tiny runs

SEED_TABLES = {"fwd_by_seqlen", "fwd_by_headdim", "memory", "bert_train"}


def test_seeds_json_and_csv_schema(tmp_path, capsys):
    js, cs = tmp_path / "r.json", tmp_path / "r.csv"
    rc, out, _err = _bench(["--json", str(js), "--csv", str(cs)], capsys)
    assert rc == 0
    assert out.splitlines()[0].startswith("flash-attention-amd bench: suite seeds on ")
    assert "CPU numbers are not GPU numbers" in out and "standard = the plain materialised attention" in out
    data = json.loads(js.read_text())
    recs = data["records"]
    assert data["meta"]["suites"] == ["seeds"] and "torch" in data["meta"]["versions"]
    assert {r["table"] for r in recs} == SEED_TABLES
    for r in recs:
        assert tuple(r) == core.FIELDS
        assert r["suite"] == "seeds" and r["device"] and r["versions"]["torch"] == torch.__version__
        assert isinstance(r["parameters"], dict)
        if r["status"] == "ok":
            assert isinstance(r["value"], float) and r["spread"][0] <= r["spread"][1] and r["reps"] >= 1
            assert r["flagged"] == (r["spread_pct"] > core.FLAG_PCT)
        else:
            assert r["value"] is None and r["note"]
    backends = {r["backend"] for r in recs}
    assert {"standard", "sdpa", "torch"} <= backends
    speedups = [r for r in recs if r["metric"] == "speedup_vs_standard"]
    assert speedups and all(r["unit"] == "x" and r["parameters"]["baseline"] == "standard" for r in speedups)
    # the triton backend on a CPU: not timed, and the reason is in the record
    assert any(r["backend"] == "triton" and r["status"] == "skipped" and "interpreter" in r["note"] for r in recs)
    with open(cs, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(recs) and tuple(rows[0]) == core.FIELDS
    assert json.loads(rows[0]["parameters"]) == recs[0]["parameters"]
    for md_table in ("Forward time by sequence length", "Forward time by head dim", "Forward memory by batch",
                     "BERT training throughput"):
        assert md_table in out


def test_kernels_tiny(tmp_path, capsys):
    js = tmp_path / "k.json"
    rc, out, _ = _bench(["--suite", "kernels", "--json", str(js)], capsys)
    assert rc == 0 and "Forward GFLOP/s" in out and "Backward GFLOP/s" in out
    recs = json.loads(js.read_text())["records"]
    ok = {(r["table"], r["backend"]) for r in recs if r["status"] == "ok" and r["metric"] == "throughput"}
    assert {("fwd", "flash"), ("fwd", "ours:torch"), ("bwd", "flash"), ("bwd", "ours:torch")} <= ok
    assert any(r["metric"] == "ratio_vs_flash" for r in recs)


def test_kernels_features_tiny(tmp_path, capsys):
    js = tmp_path / "f.json"
    rc, out, _ = _bench(["--suite", "kernels", "--features", "bias,mask,sinks", "--json", str(js)], capsys)
    assert rc == 0 and "attention bias: forward GFLOP/s" in out and "learnable sinks: backward GFLOP/s" in out
    recs = json.loads(js.read_text())["records"]
    ok = {(r["table"], r["backend"]) for r in recs if r["status"] == "ok" and r["metric"] == "throughput"}
    assert {("bias_fwd", "ours:torch"), ("bias_fwd", "sdpa"), ("bias_bwd", "ours:torch+dbias"), ("mask_bwd", "sdpa"),
            ("sinks_fwd", "ours:torch+sinks"), ("sinks_bwd", "ours:torch")} <= ok, recs
    assert any(r["metric"] == "ratio_sinks_vs_plain" for r in recs)


def test_decode_tiny(tmp_path, capsys):
    js = tmp_path / "d.json"
    rc, out, _ = _bench(["--suite", "decode", "--json", str(js)], capsys)
    assert rc == 0 and "Decoding bandwidth" in out
    recs = json.loads(js.read_text())["records"]
    ok = {(r["table"], r["backend"]) for r in recs if r["status"] == "ok"}
    assert {("copy", "device copy"), ("decode", "torch"), ("decode", "torch paged16"), ("decode", "sdpa")} <= ok
    assert any(r["metric"] == "percent_of_copy_bandwidth" for r in recs)


def test_e2e_tiny(tmp_path, capsys):
    pytest.importorskip("transformers")
    js = tmp_path / "e.json"
    rc, out, _ = _bench(["--suite", "e2e", "--json", str(js)], capsys)
    assert rc == 0
    recs = json.loads(js.read_text())["records"]
    ok = {(r["table"], r["backend"]) for r in recs if r["status"] == "ok"}
    for table in ("bert_train", "generate"):
        assert {(table, "eager"), (table, "sdpa"), (table, "fa_amd")} <= ok, recs
    assert {("llama_train", "sdpa"), ("llama_train", "fa_amd")} <= ok
    assert {("gemma2_train", "eager"), ("gemma2_train", "fa_amd")} <= ok
    if hasattr(__import__("transformers"), "GptOssConfig"):
        assert {("gptoss_train", "eager"), ("gptoss_train", "fa_amd")} <= ok
    check = [r for r in recs if r["table"] == "generate_check" and r["backend"] == "fa_amd"]
    assert check and check[0]["value"] == 100.0
    assert any(r["metric"] == "speedup_vs_best_of_eager_sdpa" for r in recs)


# ---------------------------------------------------------------------- GPU smoke runs
# Every GPU code path of the bench (do_bench, CUDA graphs, the allocator's peak, FlexAttention,
# cuDNN, the capacity search) at tiny sizes: part of the GPU test pass, a minute or two.

@pytest.mark.gpu
def test_gpu_seeds_tiny(tmp_path, capsys):
    js = tmp_path / "s.json"
    rc, out, _ = _bench(["--json", str(js)], capsys, device="cuda")
    assert rc == 0
    ok, _ = _ok(js)
    for table in ("fwd_by_seqlen", "fwd_by_headdim"):
        assert {(table, "standard", "time"), (table, "triton", "time"), (table, "triton", "speedup_vs_standard")} <= ok
    assert {("memory", "standard", "memory"), ("memory", "triton", "memory")} <= ok
    assert {("bert_train", "standard", "throughput"), ("bert_train", "triton", "throughput")} <= ok


@pytest.mark.gpu
def test_gpu_kernels_tiny(tmp_path, capsys):
    js = tmp_path / "k.json"
    rc, out, _ = _bench(["--suite", "kernels", "--seqlens", "128", "--json", str(js)], capsys, device="cuda")
    assert rc == 0 and "Forward TFLOP/s" in out
    ok, recs = _ok(js)
    for table in ("fwd", "bwd"):
        assert {(table, "flash", "throughput"), (table, "flex", "throughput"),
                (table, "ours:triton", "throughput"), (table, "ours:triton", "ratio_vs_flash")} <= ok, recs


@pytest.mark.gpu
def test_gpu_decode_tiny(tmp_path, capsys):
    pytest.importorskip("transformers")
    js = tmp_path / "d.json"
    rc, out, _ = _bench(["--suite", "decode", "--json", str(js)], capsys, device="cuda")
    assert rc == 0
    ok, recs = _ok(js)
    assert {("copy", "device copy", "bandwidth"), ("decode", "triton", "bandwidth"),
            ("decode", "triton paged16", "bandwidth"), ("decode", "sdpa", "bandwidth")} <= ok, recs
    timings = {r["parameters"]["timing"] for r in recs if r["table"] == "decode" and r["status"] == "ok"}
    assert timings == {"graph", "eager"}
    assert {("llm", "fa_amd", "throughput"), ("llm", "fa_amd", "memory"), ("llm", "fa_amd", "capacity")} <= ok, recs


@pytest.mark.gpu
def test_gpu_e2e_tiny(tmp_path, capsys):
    pytest.importorskip("transformers")
    js = tmp_path / "e.json"
    rc, out, _ = _bench(["--suite", "e2e", "--json", str(js)], capsys, device="cuda")
    assert rc == 0
    ok, recs = _ok(js)
    for table in ("bert_train", "generate"):
        assert {(table, "eager", "throughput"), (table, "sdpa", "throughput"), (table, "fa_amd", "throughput")} <= ok
    assert {("llama_train", "sdpa", "step_time"), ("llama_train", "fa_amd", "step_time")} <= ok
    assert {("gemma2_train", "eager", "step_time"), ("gemma2_train", "fa_amd", "step_time")} <= ok
    assert {("gptoss_train", "eager", "step_time"), ("gptoss_train", "fa_amd", "step_time")} <= ok
    check = [r for r in recs if r["table"] == "generate_check" and r["backend"] == "fa_amd"]
    assert check and check[0]["status"] == "ok", check


def test_plot_writes_a_png_per_suite(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "b.png"
    rc, out, _ = _bench(["--suite", "kernels", "--plot", str(png)], capsys)
    assert rc == 0 and png.exists() and png.read_bytes()[:4] == b"\x89PNG"


def test_kernels_tiny_fp8(tmp_path, capsys):
    """--fp8: our FP8 forward next to the bf16 one with their ratio; the backward says it declines."""
    js = tmp_path / "k.json"
    rc, out, _ = _bench(["--suite", "kernels", "--fp8", "--peers", "flash", "--json", str(js)], capsys)
    assert rc == 0 and "ours fp8 (torch)" in out and "fp8/bf16" in out and "FP8 attention is forward-only" in out
    recs = json.loads(js.read_text())["records"]
    assert any(r["backend"] == "ours:fp8" and r["status"] == "ok" and r["table"] == "fwd" for r in recs)
    assert any(r["metric"] == "ratio_fp8_vs_bf16" for r in recs)


def test_e2e_routes_describe_what_the_integration_does():
    """The e2e tables say how the Hugging Face integration serves each row: a padded batch below
    PACK_MIN_SCORES as one dense call with a key mask, above it as packed varlen calls, and a packed batch of
    one causal sequence as one dense causal call (integrations/hf.py _one_sequence), each through explain()."""
    from types import SimpleNamespace

    from flash_attention_amd.bench.e2e import served_by
    from flash_attention_amd.integrations import hf

    ctx = SimpleNamespace(device="cpu", dtype=torch.float32)
    big = int((hf.PACK_MIN_SCORES // 2) ** 0.5) + 1  # b=2, h=1: 2 * big**2 >= PACK_MIN_SCORES
    assert served_by(ctx, 2, 64, 2, 2, 16, True).startswith("dense, key mask: ")
    assert served_by(ctx, 2, 64, 2, 2, 16, False).startswith("dense: ")
    assert served_by(ctx, 2, big, 1, 1, 8, True, causal=True).startswith("packed varlen: ")
    one = served_by(ctx, 1, 2 * big, 1, 1, 8, True, causal=True)
    assert one.startswith("packed, one dense causal call: ")
    # the backend named is the one of that dense causal call, which has no key mask
    assert one.split(": ")[1] == served_by(ctx, 1, 2 * big, 1, 1, 8, False, causal=True).split(": ")[1]
    assert served_by(ctx, 1, 2 * big, 1, 1, 8, True).startswith("packed varlen: ")  # not causal
