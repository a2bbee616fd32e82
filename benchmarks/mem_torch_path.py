"""Peak host memory of the torch backend's forward + backward: O(seqlen), not O(seqlen^2).

One head, head dim 64, fp32 on the CPU (defaults: seqlen 16384, where the score matrix
alone would take 1 GiB). Each measurement runs in a fresh subprocess: it builds the inputs,
warms up on a tiny problem, resets the kernel's peak-RSS counter (``/proc/self/clear_refs``,
Linux) and reports the peak resident memory reached during forward + backward above the
resident memory right before it (inputs included in the baseline, outputs and gradients
in the peak).

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
import json, resource, sys, time
import torch
from flash_attention_amd.backends.torch_backend import TorchBackend
from flash_attention_amd.params import AttnParams

seqlen, d, causal, threads = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
if threads > 0:
    torch.set_num_threads(threads)

def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None

be = TorchBackend()
params = AttnParams(softmax_scale=d ** -0.5, causal=causal, window_right=0 if causal else -1)

def step(n):
    q, k, v, do = (torch.randn(1, n, 1, d) for _ in range(4))
    return q, k, v, do

q, k, v, do = step(300)  # warm up: thread pools, allocator, lazy init
out, lse = be.forward(q, k, v, params)
be.backward(do, q, k, v, out, lse, params)
del q, k, v, do, out, lse

q, k, v, do = step(seqlen)
method = "VmHWM after clear_refs"
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak RSS (VmHWM) to the current RSS
    base_kib = status_kib("VmRSS")
except OSError:
    method = "ru_maxrss (peak may include earlier phases)"
    base_kib = status_kib("VmRSS") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
out, lse = be.forward(q, k, v, params)
dq, dk, dv = be.backward(do, q, k, v, out, lse, params)
seconds = time.perf_counter() - t0
peak_kib = status_kib("VmHWM") if method.startswith("VmHWM") else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert torch.isfinite(out).all() and torch.isfinite(dq).all() and torch.isfinite(dk).all()
print(json.dumps(dict(seqlen=seqlen, headdim=d, causal=causal,
                      peak_mib_above_inputs=round((peak_kib - base_kib) / 1024, 1),
                      inputs_mib=round(4 * seqlen * d * 4 / 2**20, 1),
                      score_matrix_mib=round(seqlen * seqlen * 4 / 2**20, 1),
                      seconds=round(seconds, 2), threads=torch.get_num_threads(), method=method)))
"""


def measure(seqlen: int = 16384, headdim: int = 64, causal: bool = False, threads: int = 0,
            timeout: float = 600) -> dict:
    """Runs one measurement in a fresh Python process and returns its JSON record.

    threads > 0 sets torch's intra-op thread count (0: torch's default).
    """
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = dict(os.environ)
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", _CHILD, str(seqlen), str(headdim), "1" if causal else "0", str(threads)],
                         capture_output=True, text=True, env=env, timeout=timeout, check=False)
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
