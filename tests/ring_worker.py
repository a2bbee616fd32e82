"""Worker side of tests/test_ring.py: one process of a gloo group that runs every ring case.

Kept free of pytest so spawned processes import little. Each rank builds the same whole-sequence
tensors (same seeds), runs the ring function on its shard, runs the single-process function
(``flash_attn_func`` / ``flash_attn_varlen_func``) on the whole sequence, and records the max
abs error of its shard of out, lse, dq, dk, dv. Errors are recorded, never raised mid-loop (a
rank that stops early would leave the others waiting); ``run`` writes them as JSON.

Run as a script under torchrun (``main_nccl``), it runs the same cases with one GPU per process
over NCCL (RCCL on ROCm): the transport a GPU ring uses, which the gloo tests do not reach.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import sys
import traceback
from unittest import mock

import torch
import torch.distributed as dist

F64 = torch.float64
SEQLEN = 32  # whole sequence (dense): divisible by 2 * world for world 2 and 4
VARLEN_SEQS = [8, 8, 24, 0, 12]  # whole lengths of the packed sequences, divisible by world


def cases(world: int) -> list[dict]:
    """name -> options; every supported option on each layout."""
    opts = {
        "full": dict(),
        "causal": dict(causal=True),
        "causal_lse_grad": dict(causal=True, lse_grad=True),
        "window": dict(window_size=(3, 2), lse_grad=True),
        "window_left_causal": dict(causal=True, window_size=(5, -1)),
        "window_right": dict(window_size=(-1, 6)),
        "alibi_causal": dict(causal=True, alibi="heads", lse_grad=True),
        "alibi_batch": dict(alibi="batch", window_size=(7, 7)),
        "dropout": dict(dropout_p=0.2, lse_grad=True),
        "dropout_causal_alibi": dict(dropout_p=0.3, causal=True, alibi="heads"),
        "mqa_scale_softcap": dict(causal=True, hk=1, softmax_scale=0.3, softcap=2.0, lse_grad=True),
        "mha_headdim_v": dict(hk=4, dv=12),
        "deterministic": dict(causal=True, deterministic=True, window_size=(4, 0)),
    }
    out = []
    for layout in ("ring", "zigzag", "varlen"):
        for name, o in opts.items():
            out.append(dict(name=f"{layout}-{name}", layout=layout, **o))
    # rings of 2 inside the world (ranks {0, 1} and {2, 3} at world 4, side by side): group ranks
    # differ from global ranks, the dropout seed comes from each pair's first rank
    out.append(dict(name="zigzag-causal-pairs", layout="zigzag", causal=True, pairs=True))
    out.append(dict(name="varlen-dropout_alibi-pairs", layout="varlen", dropout_p=0.25, alibi="batch", pairs=True,
                    lse_grad=True))
    out.append(dict(name="ring-window-pairs", layout="ring", window_size=(2, 9), pairs=True))
    return out


def _whole(case: dict, seed: int, device: str = "cpu"):
    """Whole-sequence q, k, v, dout, dlse (float64) and extra call kwargs, equal on every rank
    (drawn on the CPU, then moved to ``device``)."""
    g = torch.Generator().manual_seed(seed)
    h, hk, d, dv = 4, case.get("hk", 2), 8, case.get("dv", 8)
    varlen = case["layout"] == "varlen"
    if varlen:
        lead, nb = (sum(VARLEN_SEQS),), len(VARLEN_SEQS)
    else:
        lead, nb = (2, SEQLEN), 2
    q = torch.randn(*lead, h, d, generator=g, dtype=F64)
    k = torch.randn(*lead, hk, d, generator=g, dtype=F64)
    v = torch.randn(*lead, hk, dv, generator=g, dtype=F64)
    dout = torch.randn(*lead, h, dv, generator=g, dtype=F64)
    dlse = torch.randn(*((h, lead[0]) if varlen else (2, h, SEQLEN)), generator=g, dtype=F64)
    kw = {key: case[key] for key in ("dropout_p", "softmax_scale", "causal", "window_size", "deterministic",
                                     "softcap") if key in case}
    if case.get("alibi") == "heads":
        kw["alibi_slopes"] = torch.rand(h, generator=g, dtype=torch.float32).to(device)
    elif case.get("alibi") == "batch":
        kw["alibi_slopes"] = torch.rand(nb, h, generator=g, dtype=torch.float32).to(device)
    q, k, v, dout, dlse = (t.to(device) for t in (q, k, v, dout, dlse))
    return q, k, v, dout, dlse, kw


def _loss(out, lse, dout, dlse, lse_grad: bool):
    loss = (out * dout).sum()
    return loss + (lse * dlse).sum() if lse_grad else loss


def _max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape:
        return math.inf
    if not torch.equal(torch.isposinf(a), torch.isposinf(b)) or torch.isnan(a).any():
        return math.inf
    fin = torch.isfinite(b)
    return float((a[fin] - b[fin]).abs().max()) if fin.any() else 0.0


def run_case(case: dict, rank: int, world: int, group, device: str = "cpu") -> dict:
    from flash_attention_amd import core, flash_attn_func, flash_attn_varlen_func
    from flash_attention_amd.ring import (
        ring_flash_attn_func,
        ring_flash_attn_varlen_func,
        shard,
        shard_varlen,
        zigzag_ring_flash_attn_func,
    )

    salt = 0
    if group is not None:  # the shard this process holds is its rank in the group
        rank, world, salt = dist.get_rank(group), dist.get_world_size(group), dist.get_global_rank(group, 0)
    q, k, v, dout, dlse, kw = _whole(case, seed=1234 + salt, device=device)  # side-by-side groups: different data
    lse_grad = case.get("lse_grad", False)
    layout = case["layout"]
    varlen = layout == "varlen"
    if varlen:
        cu = torch.tensor([0] + torch.tensor(VARLEN_SEQS).cumsum(0).tolist(), dtype=torch.int32, device=device)

        def part(x, dim=0):
            return shard_varlen(x, cu, rank, world, dim)[0]
        _, cu_local, max_local = shard_varlen(q, cu, rank, world)
    else:
        def part(x, dim=1):
            return shard(x, rank, world, layout, dim)
    # the ring, on this rank's shard
    ql, kl, vl = (part(t).clone().requires_grad_() for t in (q, k, v))
    torch.manual_seed(99 + salt)  # the group's rank 0 draws the dropout seed from this state, broadcasts it
    fn = {"ring": ring_flash_attn_func, "zigzag": zigzag_ring_flash_attn_func}.get(layout)
    if varlen:
        out, lse, probs = ring_flash_attn_varlen_func(ql, kl, vl, cu_local, max_local, return_attn_probs=True,
                                                      group=group, **kw)
    else:
        out, lse, probs = fn(ql, kl, vl, return_attn_probs=True, group=group, **kw)
    dl = part(dlse, -1)
    _loss(out, lse, part(dout), dl, lse_grad).backward()
    # one process, the whole sequence (the same seed: flash_attn_func draws it from the same state)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    torch.manual_seed(99 + salt)
    with mock.patch.object(core, "attn_probs", lambda *a: None):  # S_dmask is not compared
        if varlen:
            ref, ref_lse, _ = flash_attn_varlen_func(qg, kg, vg, cu, cu, max(VARLEN_SEQS), max(VARLEN_SEQS),
                                                     return_attn_probs=True, **kw)
        else:
            ref, ref_lse, _ = flash_attn_func(qg, kg, vg, return_attn_probs=True, **kw)
    _loss(ref, ref_lse, dout, dlse, lse_grad).backward()
    errs = {
        "out": _max_err(out, part(ref.detach())),
        "lse": _max_err(lse, part(ref_lse.detach(), -1)),
        "dq": _max_err(ql.grad, part(qg.grad)),
        "dk": _max_err(kl.grad, part(kg.grad)),
        "dv": _max_err(vl.grad, part(vg.grad)),
    }
    errs["probs_is_none"] = probs is None
    errs["dtypes"] = [str(t.dtype) for t in (out, lse, ql.grad, kl.grad, vl.grad)]
    if case.get("deterministic"):  # the backward again: bitwise the same
        ql2, kl2, vl2 = (part(t).clone().requires_grad_() for t in (q, k, v))
        fn2 = (lambda *a, **o: ring_flash_attn_varlen_func(*a[:3], cu_local, max_local, **o)) if varlen else fn
        out2, lse2, _ = fn2(ql2, kl2, vl2, return_attn_probs=True, group=group, **kw)
        _loss(out2, lse2, part(dout), dl, lse_grad).backward()
        errs["bitwise_repeat"] = all(torch.equal(a, b) for a, b in ((ql.grad, ql2.grad), (kl.grad, kl2.grad),
                                                                     (vl.grad, vl2.grad)))
    return errs


def _run_cases(rank: int, world: int, device: str = "cpu", only: list[str] | None = None) -> dict:
    """Every case (or those named in ``only``) on the torch backend -> {case: errors}."""
    from flash_attention_amd import use_backend

    results = {}
    # half of the cases pass a group object of every rank (group=None in the others); the
    # "pairs" cases a group of two ranks (every rank creates every group, as new_group requires)
    every = dist.new_group(list(range(world)))
    pairs = [dist.new_group([a, a + 1]) for a in range(0, world, 2)]
    with use_backend("torch"):
        for i, case in enumerate(cases(world)):
            if only and case["name"] not in only:
                continue
            group = pairs[rank // 2] if case.get("pairs") else every if i % 2 else None
            try:
                results[case["name"]] = run_case(case, rank, world, group, device)
            except Exception:  # noqa: BLE001 (reported by the test, after every case ran)
                results[case["name"]] = {"error": traceback.format_exc()}
                print(f"rank {rank} {case['name']}:\n{results[case['name']]['error']}", file=sys.stderr, flush=True)
    dist.barrier()
    return results


def run(rank: int, world: int, port: int, outdir: str, only: list[str] | None = None) -> None:
    """Entry point of one spawned process: every case, then results to outdir/rank{rank}.json."""
    torch.set_num_threads(1)
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    results = {}
    try:
        results = _run_cases(rank, world, only=only)
    finally:
        with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
            json.dump(results, f)
        dist.destroy_process_group()


def run_bench(rank: int, world: int, port: int, outdir: str) -> None:
    """benchmarks/bench_ring.py's torchrun mode, tiny, on gloo (the environment torchrun would set)."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    bench_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks")
    sys.path.insert(0, bench_dir)
    import bench_ring

    bench_ring.main(["--device", "cpu", "--seqlen", "64", "--heads", "4", "--kv-heads", "2", "--headdim", "16",
                     "--warmup", "0", "--iters", "1", "--threads", "1", "--json", os.path.join(outdir, "bench.json")])


def main_nccl(tol: float = 1e-8) -> None:
    """``torchrun --nproc_per_node N tests/ring_worker.py``: every case on N GPUs over NCCL (RCCL
    on ROCm), float64 on the torch backend, one GPU per process (gloo on the CPU where no GPU is
    seen). Rank 0 prints each case's worst error over the ranks and exits non-zero if any case
    fails (an exception, or an error above tol)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    else:
        torch.set_num_threads(1)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", timeout=datetime.timedelta(minutes=5))
    results = _run_cases(rank, world, device=device)
    gathered = [None] * world
    dist.all_gather_object(gathered, results)
    dist.destroy_process_group()
    if rank:
        return
    failed = 0
    for case in cases(world):
        rows = [g[case["name"]] for g in gathered]
        if any("error" in r for r in rows):
            failed += 1
            print(f"{case['name']:<34} ERROR")
            continue
        worst = {n: max(r[n] for r in rows) for n in ("out", "lse", "dq", "dk", "dv")}
        ok = (max(worst.values()) <= tol and all(r["probs_is_none"] for r in rows)
              and all(r.get("bitwise_repeat", True) for r in rows))
        failed += not ok
        print(f"{case['name']:<34} {'ok  ' if ok else 'FAIL'} " + " ".join(f"{n} {e:.1e}" for n, e in worst.items()))
    where = f"{world} GPUs (NCCL)" if device == "cuda" else f"{world} CPU processes (gloo)"
    print(f"{len(cases(world)) - failed}/{len(cases(world))} cases within {tol} on {where}")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main_nccl()
