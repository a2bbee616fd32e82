"""Ring attention (flash_attention_amd.ring) on 2 and 4 gloo processes, float64, torch backend.

One spawn per world size runs every case (``ring_worker.cases``: each layout, ring / zigzag /
varlen, times every option: causal, windows, ALiBi per head and per sequence, dropout, GQA/MQA,
softmax_scale, softcap, headdim_v, deterministic, the LSE's gradient) in one process group;
each test below checks one case's recorded errors: forward and backward of every rank's shard
against single-process ``flash_attn_func`` / ``flash_attn_varlen_func`` on the gathered
sequence, max abs error <= 1e-8. Spawns are bounded (a hung group is killed and fails).
Single-process tests (world size 1, layout helpers, the planner, the merge) run in-process.
"""
from __future__ import annotations

import json
import math
import os
import socket
import time

import pytest
import ring_worker
import torch
import torch.multiprocessing as mp

from flash_attention_amd import flash_attn_func, use_backend
from flash_attention_amd.ring import (
    merge,
    ring_flash_attn_func,
    ring_flash_attn_varlen_func,
    shard,
    shard_varlen,
    unshard,
    unshard_varlen,
    zigzag_ring_flash_attn_func,
)
from flash_attention_amd.ring.layout import MaskSpec, Piece, dense_plan, visibility

pytestmark = pytest.mark.distributed
TOL = 1e-8
SPAWN_TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn_bounded(fn, world: int, *args, timeout: float = SPAWN_TIMEOUT_S) -> None:
    """fn(rank, world, port, *args) on `world` spawned processes; fails (and kills them) past timeout."""
    ctx = mp.spawn(fn, args=(world, _free_port(), *args), nprocs=world, join=False)
    deadline = time.monotonic() + timeout
    try:
        while not ctx.join(timeout=max(0.1, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                pytest.fail(f"{fn.__name__} on {world} processes did not finish within {timeout} s")
    finally:
        for p in ctx.processes:  # only ours, by handle; a no-op when they exited
            if p.is_alive():
                p.kill()
                p.join(5)


def _spawn(world: int, outdir: str) -> dict:
    """Run ring_worker.run on `world` gloo processes -> {rank: {case: errors}}."""
    _spawn_bounded(ring_worker.run, world, outdir)
    results = {}
    for r in range(world):
        with open(os.path.join(outdir, f"rank{r}.json")) as f:
            results[r] = json.load(f)
    return results


@pytest.fixture(scope="module", params=[2, 4], ids=["world2", "world4"])
def ring_results(request, tmp_path_factory):
    world = request.param
    return world, _spawn(world, str(tmp_path_factory.mktemp(f"ring{world}")))


@pytest.mark.parametrize("case", [c["name"] for c in ring_worker.cases(2)])
def test_ring_matches_single_process(ring_results, case):
    world, results = ring_results
    for rank in range(world):
        errs = results[rank].get(case)
        assert errs is not None, f"rank {rank}: case {case} did not run"
        assert "error" not in errs, f"rank {rank}:\n{errs.get('error')}"
        for name in ("out", "lse", "dq", "dk", "dv"):
            assert errs[name] <= TOL, f"world {world} rank {rank} {case}: {name} max err {errs[name]:.3e}"
        assert errs["probs_is_none"]
        assert errs["dtypes"] == ["torch.float64"] * 5
        if "bitwise_repeat" in errs:
            assert errs["bitwise_repeat"], f"rank {rank}: deterministic backward differs between two runs"


# ----------------------------------------------------------------------------- in-process


@pytest.fixture()
def _torch_backend():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    with use_backend("torch"):
        yield
    torch.set_num_threads(n)


@pytest.mark.usefixtures("_torch_backend")
@pytest.mark.parametrize("fn", [ring_flash_attn_func, zigzag_ring_flash_attn_func])
@pytest.mark.parametrize("kw", [dict(causal=True), dict(causal=True, alibi_slopes=torch.rand(4)),
                                dict(window_size=(3, 1), softcap=1.5)], ids=["causal", "alibi", "window"])
def test_world_size_one_is_a_plain_call(fn, kw):
    """No process group: world size 1, same as flash_attn_func within fp64 rounding (the ring runs the backend's
    forward and backward passes; an eager CPU call may keep its probabilities instead: backends/torch_saved.py)."""
    q = torch.randn(2, 16, 4, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 16, 2, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 16, 2, 8, dtype=torch.float64, requires_grad=True)
    out = fn(q, k, v, **kw)
    ref = flash_attn_func(q, k, v, **kw)
    dout = torch.randn_like(out)
    g = torch.autograd.grad(out, (q, k, v), dout)
    g_ref = torch.autograd.grad(ref, (q, k, v), dout)
    assert (out - ref).abs().max() <= 1e-12
    for a, b in zip(g, g_ref):
        assert (a - b).abs().max() <= 1e-12


@pytest.mark.usefixtures("_torch_backend")
def test_world_size_one_varlen_without_grad():
    from flash_attention_amd import flash_attn_varlen_func

    cu = torch.tensor([0, 5, 5, 17], dtype=torch.int32)
    q = torch.randn(17, 2, 8, dtype=torch.float64)
    k, v = torch.randn(17, 1, 8, dtype=torch.float64), torch.randn(17, 1, 8, dtype=torch.float64)
    slopes = torch.rand(3, 2)
    out, lse, probs = ring_flash_attn_varlen_func(q, k, v, cu, 12, causal=True, alibi_slopes=slopes,
                                                  return_attn_probs=True)
    ref = flash_attn_varlen_func(q, k, v, cu, cu, 12, 12, causal=True, alibi_slopes=slopes)
    assert probs is None and lse.shape == (2, 17) and lse.dtype == torch.float64
    assert (out - ref).abs().max() <= 1e-12


def test_shard_roundtrip():
    x = torch.arange(2 * 24).view(2, 24)
    for layout in ("ring", "zigzag"):
        parts = [shard(x, r, 3, layout) for r in range(3)]
        assert torch.equal(unshard(parts, layout), x)
    z = [shard(x, r, 3, "zigzag")[0].tolist() for r in range(3)]
    assert z[0] == [0, 1, 2, 3, 20, 21, 22, 23] and z[2] == [8, 9, 10, 11, 12, 13, 14, 15]
    cu = torch.tensor([0, 6, 6, 18], dtype=torch.int32)
    t = torch.arange(18)
    parts = [shard_varlen(t, cu, r, 3) for r in range(3)]
    assert parts[1][0].tolist() == [2, 3, 10, 11, 12, 13] and parts[1][1].tolist() == [0, 2, 2, 6]
    assert parts[1][2] == 4
    assert torch.equal(unshard_varlen([p[0] for p in parts], cu), t)
    with pytest.raises(ValueError, match="divisible"):
        shard(x, 0, 5, "zigzag")


def test_visibility():
    assert visibility(8, 4, 0, 4, -1, 0) == "full"  # later queries, causal
    assert visibility(0, 4, 8, 4, -1, 0) == "none"
    assert visibility(4, 4, 4, 4, -1, 0) == "partial"
    assert visibility(20, 4, 0, 4, 10, 0) == "none"  # beyond the left window
    assert visibility(8, 4, 0, 4, 10, 0) == "partial"
    assert visibility(0, 4, 0, 4, -1, -1) == "full"


def _brute_visible(qs, n, ks, m, left, right):
    vis = [(left < 0 or j >= i - left) and (right < 0 or j <= i + right)
           for i in range(qs, qs + n) for j in range(ks, ks + m)]
    return "none" if not any(vis) else "full" if all(vis) else "partial"


def test_visibility_brute_force():
    for left in (-1, 0, 2, 5):
        for right in (-1, 0, 1, 4):
            for qs in range(0, 12, 3):
                for ks in range(0, 12, 2):
                    for n, m in ((3, 2), (1, 4), (4, 4)):
                        assert visibility(qs, n, ks, m, left, right) == _brute_visible(qs, n, ks, m, left, right)


def test_plain_causal_zigzag_is_one_call_per_step():
    """Plain causal zigzag: one call per step, half the rows or keys off the diagonal step, no offsets."""
    spec = MaskSpec(causal=True, left=-1, right=0, alibi=False, dropout=False)
    world, n = 4, 16
    for rank in range(world):
        steps = dense_plan("zigzag", rank, world, n, spec)
        assert steps[0] == [Piece(0, 16, 0, 16, True)]
        for t in range(1, world):
            (p,) = steps[t]
            assert p.diag_offset == 0 and p.dropout_offsets == (0, 0) and not p.masked
            src = (rank - t) % world
            assert (p.q0, p.q1, p.k0, p.k1) == ((0, 16, 0, 8) if src < rank else (8, 16, 0, 16))
    ring_steps = dense_plan("ring", 1, 4, 8, spec)
    assert [len(s) for s in ring_steps] == [1, 1, 0, 0]  # keys of ranks 1, 0, then 3, 2 (hidden)


def test_merge_handles_empty_partials():
    out_acc, lse_acc = merge.empty((1, 3, 1, 2), (1, 1, 3), torch.float64, "cpu")
    out = torch.tensor([[[[1.0, 2.0]], [[3.0, 4.0]], [[0.0, 0.0]]]], dtype=torch.float64)
    lse = torch.tensor([[[0.5, math.inf, math.inf]]], dtype=torch.float64)
    merge.merge_(out_acc, lse_acc, out, lse)
    merge.merge_(out_acc, lse_acc, out * 0 + 1, torch.tensor([[[0.5, 1.0, math.inf]]], dtype=torch.float64))
    o, lf = merge.finish(out_acc, lse_acc, torch.float64)
    assert not torch.isnan(o).any()
    assert torch.allclose(o[0, 0, 0], torch.tensor([1.0, 1.5], dtype=torch.float64))  # equal weights
    assert torch.equal(o[0, 1, 0], torch.tensor([1.0, 1.0], dtype=torch.float64)) and lf[0, 0, 1] == 1.0
    assert torch.equal(o[0, 2, 0], torch.zeros(2, dtype=torch.float64)) and torch.isposinf(lf[0, 0, 2])
    assert abs(lf[0, 0, 0].item() - (0.5 + math.log(2))) < 1e-15


def test_bad_calls_raise_before_any_transfer():
    q = torch.randn(1, 7, 2, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match="even local sequence length"):
        zigzag_ring_flash_attn_func(q, q, q)
    with pytest.raises(ValueError, match="self-attention"):
        ring_flash_attn_func(q, q[:, :5], q[:, :5])
    with pytest.raises(ValueError, match="dropout_p"):
        ring_flash_attn_func(q, q, q, dropout_p=1.5)
    with pytest.raises(ValueError, match="not initialised"):
        ring_flash_attn_func(q, q, q, group=object())


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [dict(causal=True), dict(causal=True, window_size=(256, 0)),
                                dict(causal=False)], ids=["causal", "window", "full"])
def test_world_size_one_on_gpu(kw):
    """World size 1 on a GPU: the ring layout is the plain call (bitwise on the same backend);
    zigzag with a window runs as pieces with offsets (whichever backend takes them)."""
    from flash_attention_amd import explain

    torch.manual_seed(0)
    q = torch.randn(2, 2048, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 2048, 2, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 2048, 2, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dout = torch.randn_like(q)
    backend = explain(q, k, v, return_attn_probs=True, **kw).split("-> ")[-1].split()[0]
    with use_backend(backend):
        ref = flash_attn_func(q, k, v, deterministic=True, **kw)
    g_ref = torch.autograd.grad(ref, (q, k, v), dout)
    out = ring_flash_attn_func(q, k, v, deterministic=True, **kw)
    g = torch.autograd.grad(out, (q, k, v), dout)
    assert torch.equal(out, ref)
    for a, b in zip(g, g_ref):
        assert torch.equal(a, b)
    out = zigzag_ring_flash_attn_func(q, k, v, **kw)
    g = torch.autograd.grad(out, (q, k, v), dout)
    assert float((out - ref).float().norm() / ref.float().norm()) < 1e-2
    for a, b in zip(g, g_ref):
        assert float((a - b).float().norm() / b.float().norm()) < 1e-2


def test_bench_script_runs_on_cpu(tmp_path):
    """benchmarks/bench_ring.py on 2 gloo processes, tiny: runs, and its exactness check passes."""
    _spawn_bounded(ring_worker.run_bench, 2, str(tmp_path), timeout=120)
    res = json.loads((tmp_path / "bench.json").read_text())
    assert res["world"] == 2 and res["check_passed"] and res["tokens_per_s"] > 0
    assert max(res["rel_err_vs_one_device"].values()) < 2e-2


@pytest.mark.usefixtures("_torch_backend")
def test_world_size_one_pieces_with_expanded_gradient():
    """Zigzag with ALiBi at world size 1 runs as three pieces with offsets and merges them; the
    gradient of out.sum() (stride 0) and of the LSE reach q, k, v as in flash_attn_func."""
    q, k, v = (torch.randn(1, 12, 2, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    slopes = torch.rand(2)
    out, lse, _ = zigzag_ring_flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes, return_attn_probs=True)
    g = torch.autograd.grad(out.sum() + lse.sum(), (q, k, v))
    ref, ref_lse, _ = flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes, return_attn_probs=True)
    g_ref = torch.autograd.grad(ref.sum() + ref_lse.sum(), (q, k, v))
    assert (out - ref).abs().max() <= 1e-12 and (lse - ref_lse).abs().max() <= 1e-12
    for a, b in zip(g, g_ref):
        assert (a - b).abs().max() <= 1e-12
