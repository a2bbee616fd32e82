"""Kernel TFLOP/s against the peers (SDPA flash / cuDNN / mem-efficient, FlexAttention, flash_attn,
FA4): ``flash-attention-amd bench --suite kernels``, kept as a script for old commands.

    PYTHONPATH=src python benchmarks/bench_attention.py [--quick] [--headdims 128] [--seqlens 4096 16384]
        [--peers flash cudnn flex] [--json $OUT/kernels.json] [--plot $OUT/kernels.png]

Every ``flash-attention-amd bench`` option works (see --help). The tables of
benchmarks/results/fwd_h100.md and bwd_h100.md came from this script's earlier version (the
commands there name its old options; git history has it).
"""
import sys

from _caller import run

if __name__ == "__main__":
    sys.exit(run("kernels"))
