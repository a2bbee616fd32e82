"""``flash-attention-amd bench``: the main job.

    flash-attention-amd bench [--suite seeds|kernels|decode|e2e|all] [--device cpu|cuda] [--quick]
        [--json PATH] [--csv PATH] [--plot PATH.png] [--backends ...] [--reps N]

Suites: ``seeds`` (default: the seed documents' four tables, standard attention against each
backend), ``kernels`` (TFLOP/s grid against every importable peer), ``decode`` (KV-cache
decoding bandwidth and an LLM serving row), ``e2e`` (Hugging Face models: training and
generation). One runner (runner.py), one record schema (core.py), one way of timing
(timing.py); the scripts in ``benchmarks/`` call the same code.
"""
from __future__ import annotations

import argparse
import os
import sys

from .runner import E2E_PARTS, SUITES

BACKEND_CHOICES = ("triton", "sdpa", "flash_attn", "ck", "fa4", "torch")
PEER_CHOICES = ("flash", "cudnn", "efficient", "flex", "flash_attn", "fa4")
FEATURE_CHOICES = ("bias", "mask", "sinks")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: "flash-attention-amd bench: error: ... (see --help)"."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive(kind: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind} must be a positive integer, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{kind} must be a positive integer, got {text!r}")
        return value

    return parse


def _device(text: str) -> str:
    import torch

    name = text.strip().lower()
    if name == "cpu":
        return "cpu"
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text!r}: no CUDA/ROCm GPU is visible to this torch "
                                             f"({torch.__version__}); use --device cpu")
        if ":" in name:
            idx = name.split(":", 1)[1]
            if not idx.isdigit() or int(idx) >= torch.cuda.device_count():
                raise argparse.ArgumentTypeError(f"{text!r}: this machine has {torch.cuda.device_count()} GPU(s)")
        return name
    raise argparse.ArgumentTypeError(f"{text!r} is not a device the bench runs on; choose cpu or cuda (cuda:N)")


def _backend(text: str) -> str:
    name = text.strip().lower()
    if name not in BACKEND_CHOICES:
        raise argparse.ArgumentTypeError(f"unknown backend {text!r}; choose from {', '.join(BACKEND_CHOICES)}")
    return "flash_attn" if name == "ck" else name


def _peer(text: str) -> str:
    name = text.strip().lower()
    if name not in PEER_CHOICES:
        raise argparse.ArgumentTypeError(f"unknown peer {text!r}; choose from {', '.join(PEER_CHOICES)}")
    return name


def _names(text: str, allowed: tuple, what: str) -> list[str]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(bad) or repr(text)}; choose from "
                                         f"{', '.join(allowed)} (comma separated)")
    return names


def _features(text: str) -> list[str]:
    return _names(text, FEATURE_CHOICES, "feature")


def _models(text: str) -> list[str]:
    return _names(text, E2E_PARTS, "e2e table")


def _png(text: str) -> str:
    import os

    if not text.lower().endswith(".png"):
        raise argparse.ArgumentTypeError(f"--plot takes a .png path, got {text!r}")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"--plot: folder {folder} does not exist")
    return text


def _writable(text: str) -> str:
    import os

    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"{text!r}: folder {folder} does not exist")
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", choices=SUITES + ("all",), default="seeds",
                   help="seeds (default): the seed tables, standard vs each backend; kernels: TFLOP/s against the "
                        "peers; decode: KV-cache decoding and an LLM row; e2e: Hugging Face models; all")
    p.add_argument("--device", type=_device, default=None, help="cpu or cuda (default: cuda when there is a GPU)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (GPU: a few minutes per suite)")
    p.add_argument("--json", type=_writable, metavar="PATH", help="write the long-format records as JSON")
    p.add_argument("--csv", type=_writable, metavar="PATH", help="write the same records as CSV")
    p.add_argument("--markdown", type=_writable, metavar="PATH",
                   help="also write the tables as a markdown file headed by the command, date and versions")
    p.add_argument("--plot", type=_png, metavar="PATH.png",
                   help="write a PNG per suite (PATH for one suite, PATH_<suite>.png for several); needs matplotlib")
    p.add_argument("--backends", type=_backend, nargs="+", metavar="NAME",
                   help="our backends to time: " + ", ".join(BACKEND_CHOICES) + " (default: all that can serve; "
                        "triton on a CPU only when named)")
    p.add_argument("--peers", type=_peer, nargs="+", metavar="NAME",
                   help="kernels suite: peers to time: " + ", ".join(PEER_CHOICES) + " (default: every importable one)")
    p.add_argument("--features", type=_features, default=None, metavar="LIST",
                   help="kernels suite: instead of the grid, time these beyond-flash_attn features, comma separated: "
                        "bias ((b, h, s, s) bias vs FlexAttention score_mod and SDPA attn_mask), mask (bool mask vs "
                        "Flex block_mask and SDPA), sinks (ours with sinks vs without); d=128 (CPU: the small grid)")
    p.add_argument("--models", type=_models, default=None, metavar="LIST",
                   help="e2e suite: these tables only, comma separated: " + ", ".join(E2E_PARTS) + " (default: all)")
    p.add_argument("--reps", type=_positive("--reps"), default=None, help="repetitions per figure (default 5; quick 3)")
    p.add_argument("--seqlens", type=_positive("--seqlens"), nargs="+", metavar="N",
                   help="sequence lengths of the seeds forward table and the kernels grid")
    p.add_argument("--headdims", type=_positive("--headdims"), nargs="+", metavar="D",
                   help="head dims of the seeds head-dim table and the kernels grid")
    p.add_argument("--causal", action="store_true", help="seeds suite: causal attention (default: not causal)")
    p.add_argument("--fp8", action="store_true",
                   help="kernels suite: also time our FP8 (e4m3, per-(batch, head) descales) forward next to the "
                        "bf16 one, with their ratio")
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default=None,
                   help="default: bf16 on a GPU, fp32 on the CPU")
    p.add_argument("--threads", type=_positive("--threads"), default=None,
                   help="CPU: intra-op threads (default: torch's, or 1 when the machine is already busy)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # test sizes: seconds, meaningless numbers


def check(ns, parser) -> None:
    """Checks that need more than one argument or an import; errors as one argparse line."""
    if ns.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error("--plot needs matplotlib, which is not installed: pip install 'flash-attention-amd[bench]'")
    if ns.headdims and any(d > 512 for d in ns.headdims):
        parser.error(f"--headdims: at most 512, got {max(ns.headdims)}")
    if ns.features and ns.suite not in ("kernels", "all"):
        parser.error(f"--features times the kernels suite, not --suite {ns.suite}")
    if ns.features and ns.headdims and any(d > 256 for d in ns.headdims):
        parser.error(f"--features: head dims up to 256 (attn_bias / sinks in our kernels), got {max(ns.headdims)}")
    if ns.features and ns.fp8:
        parser.error("--features replaces the kernels grid, --fp8 adds to it: run them separately")


def _cpu_threads() -> int:
    """torch's thread count, or 1 when other processes already keep the cores busy: then every
    parallel op waits for a core (milliseconds per op) and the figures measure the queue."""
    import torch

    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return torch.get_num_threads()
    return 1 if load > 0.75 * (os.cpu_count() or 1) else torch.get_num_threads()


def main(ns, parser) -> int:
    import torch

    from .attn import default_backends
    from .runner import Ctx, device_name, run
    from .timing import Timer

    check(ns, parser)
    device = torch.device(ns.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, None: None}[ns.dtype]
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    suites = list(SUITES) if ns.suite == "all" else [ns.suite]
    backends, skipped = default_backends(device, ns.backends)
    reps = ns.reps or (2 if ns.tiny else 3 if ns.quick else 5)
    ctx = Ctx(device=device, dtype=dtype, quick=ns.quick, tiny=ns.tiny, reps=reps, backends=backends,
              asked_backends=bool(ns.backends), skipped=skipped, peers=ns.peers, seqlens=ns.seqlens,
              headdims=ns.headdims, causal=ns.causal, fp8=ns.fp8, features=ns.features, models=ns.models,
              progress=not ns.no_progress,
              timer=Timer(device, reps, cpu_sample_s=0.005 if ns.tiny else 0.02))
    busy = ""
    threads_before = torch.get_num_threads()
    if device.type == "cpu":
        threads = ns.threads or _cpu_threads()
        if threads != torch.get_num_threads():
            if not ns.threads:
                busy = (f": the machine is busy, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
                        "--threads N to choose")
            torch.set_num_threads(threads)
    print(f"flash-attention-amd bench: suite {ns.suite} on {device_name(device, busy)}, "
          f"{str(dtype).replace('torch.', '')}, torch {torch.__version__}", flush=True)
    if device.type == "cpu":
        print("CPU numbers are not GPU numbers: this run shows the bench works and how the CPU paths compare; "
              "run it on a GPU (--device cuda) for the figures that matter.", flush=True)
    try:
        run(ctx, suites, ns.json, ns.csv, ns.plot, md_path=ns.markdown)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        torch.set_num_threads(threads_before)  # main() may be called in-process (tests)
    return 0
