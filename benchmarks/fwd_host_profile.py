"""Where the host time of a forward call goes on a GPU (issue 10's forward <= 40 us and KV-cache <= 30 us): cProfile of
host_overhead.py's forward cases and its KV-cache step through the triton path, the GPU held busy, by self time and by
cumulative time.

    PYTHONPATH=src:benchmarks python benchmarks/fwd_host_profile.py [--calls 300]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats

import torch
from host_overhead import cases, make_call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: cProfile of {args.calls} calls (triton path)")
    for name, *shape in cases():
        if not (name.startswith("fwd ") or name.startswith("kvcache")):
            continue
        call = make_call("triton", *shape)
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        torch.cuda._sleep(int(1.5e9))
        prof.enable()
        for _ in range(args.calls):
            call()
        prof.disable()
        torch.cuda.synchronize()
        for order in ("tottime", "cumulative"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(order).print_stats(22)
            text = "\n".join(line for line in buf.getvalue().splitlines() if line.strip())
            print(f"\n## {name}, by {order}\n```\n{text}\n```", flush=True)


if __name__ == "__main__":
    main()
