"""Peak memory of the torch backend's forward + backward: O(seqlen), not O(seqlen^2).

One head, head dim 64, fp32 on the CPU (defaults: seqlen 16384, where the score matrix alone
would take 1 GiB). The measurement is the bench's (``flash_attention_amd.bench.timing.
cpu_peak_bytes``: the peak of the allocations the PyTorch profiler tracks), of
``flash_attn_func`` with ``use_backend("torch")``, forward and backward, outputs and gradients
included, inputs excluded. It runs in a fresh subprocess (its own thread setting).

Usage::

    PYTHONPATH=src python benchmarks/mem_torch_path.py [--seqlen 16384] [--headdim 64] [--causal] [--threads N]

Prints one JSON line: seqlen, headdim, causal, peak_mib_above_inputs, score_matrix_mib,
seconds (forward + backward) and how the peak was measured.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, sys, time
import torch
import flash_attention_amd as fa
from flash_attention_amd.bench.timing import cpu_peak_bytes

seqlen, d, causal, threads = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
if threads > 0:
    torch.set_num_threads(threads)

def inputs(n):
    return [torch.randn(1, n, 1, d, requires_grad=i < 3) for i in range(4)]

def step(q, k, v, do):
    with fa.use_backend("torch"):
        out = fa.flash_attn_func(q, k, v, causal=causal)
    out.backward(do)
    return out

step(*inputs(300))  # warm up: thread pools, lazy init
q, k, v, do = inputs(seqlen)
t0 = time.perf_counter()
peak = cpu_peak_bytes(lambda: step(q, k, v, do))
seconds = time.perf_counter() - t0
assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
print(json.dumps(dict(seqlen=seqlen, headdim=d, causal=causal, peak_mib_above_inputs=round(peak / 2**20, 1),
                      inputs_mib=round(4 * seqlen * d * 4 / 2**20, 1),
                      score_matrix_mib=round(seqlen * seqlen * 4 / 2**20, 1), seconds=round(seconds, 2),
                      threads=torch.get_num_threads(),
                      method="PyTorch profiler: peak of the tracked allocations (outputs and grads included)")))
"""


def measure(seqlen: int = 16384, headdim: int = 64, causal: bool = False, threads: int = 0,
            timeout: float = 600) -> dict:
    """Runs one measurement in a fresh Python process and returns its JSON record.

    threads > 0 sets torch's intra-op thread count (0: torch's default).
    """
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = dict(os.environ)
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    args = [str(seqlen), str(headdim), "1" if causal else "0", str(threads)]
    res = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, env=env,
                         timeout=timeout, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"measurement failed (rc {res.returncode}):\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--headdim", type=int, default=64)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: torch's default)")
    args = ap.parse_args(argv)
    print(json.dumps(measure(args.seqlen, args.headdim, args.causal, args.threads)))


if __name__ == "__main__":
    main()
