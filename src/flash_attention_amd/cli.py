"""Command line: ``flash-attention-amd bench | info | check-kernels`` (also ``python -m flash_attention_amd``;
``check-amd`` is the old name of ``check-kernels``, kept as an alias)."""
from __future__ import annotations

import argparse
import platform
import sys

import torch


def _info() -> int:
    from .backends import registry
    from .params import Problem, device_arch

    print(f"flash_attention_amd on Python {platform.python_version()}, torch {torch.__version__}"
          f" ({'ROCm ' + torch.version.hip if torch.version.hip else 'CUDA ' + str(torch.version.cuda)})")
    try:
        import triton

        print(f"triton {triton.__version__}")
    except ImportError:
        print("triton: not installed")
    devices = [torch.device("cpu")] + [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    for dev in devices:
        is_rocm, arch = device_arch(dev)
        name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu"
        print(f"\n{dev}: {name}{' (' + arch + ')' if arch else ''}")
        dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
        for label, extra in (("forward+backward, causal", dict(causal=True, needs_grad=True)),
                             ("forward, softcap + window",
                              dict(softcap=30.0, window_left=256, window_right=0, causal=True)),
                             ("kvcache decode", dict(kind="kvcache"))):
            problem = Problem(device_type=dev.type, is_rocm=is_rocm, arch=arch, dtype=dtype, batch=2,
                              seqlen_q=1 if extra.get("kind") else 1024, seqlen_k=1024, nheads=16,
                              nheads_k=16, headdim=128, headdim_v=128, **extra)
            print(f"  {label}:")
            for backend in registry().values():
                reason = backend.available()
                if reason is None:
                    reason = (backend.supports_decode(problem) if problem.kind == "kvcache"
                              else backend.supports(problem))
                print(f"    {backend.name:7s} {'can serve' if reason is None else 'no: ' + reason}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from . import bench as bench_pkg
    from .bench import _Parser, add_arguments
    from .bench import main as bench_main

    parser = argparse.ArgumentParser(prog="flash-attention-amd", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    bench = sub.add_parser("bench", help="the main job: standard attention against each backend, peers, models",
                           description=bench_pkg.__doc__.split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(bench)
    sub.add_parser("info", help="devices, and which backends can serve and why not")
    sub.add_parser("check-kernels", aliases=["check-amd"], add_help=False,
                   help="compile every kernel config for AMD and NVIDIA targets without a GPU and check their "
                   "resources (--help for options; check-amd: its old name, an alias)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["check-kernels"], ["check-amd"]):  # its own options, parsed by check_kernels.main
        from .tools.check_kernels import main as check_main

        return check_main(argv[1:], name=argv[0])
    ns = parser.parse_args(argv)
    if ns.command == "info":
        return _info()
    return bench_main(ns, bench)


if __name__ == "__main__":
    sys.exit(main())
