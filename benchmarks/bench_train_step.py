"""Training and generation with Hugging Face models (BERT-base, a Llama-style model), attention
"eager", "sdpa" and ours ("fa_amd"): ``flash-attention-amd bench --suite e2e``.

    PYTHONPATH=src python benchmarks/bench_train_step.py [--quick] [--json $OUT/e2e.json]

Every ``flash-attention-amd bench`` option works (see --help); ``--backends triton`` adds a column
with that backend forced. The "Training step" section of benchmarks/results/bwd_h100.md came from
this script's earlier version (a hand-written decoder; git history has it).
"""
import sys

from _caller import run

if __name__ == "__main__":
    sys.exit(run("e2e"))
