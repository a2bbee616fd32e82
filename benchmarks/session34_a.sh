#!/bin/bash
# Session 34, call A (4 GPUs of one H100 host): the Gluon forward with three consumer warp groups (192 query
# rows a tile) at d=64.
#   GPU 0: the Gluon forward tests (GPU-marked), the three-consumer test among them;
#   GPU 1, 2: bench_gluon_ab at d=64: on (two consumers; causal through an extra row of 128 rows) / off (the Triton
#            kernels) / m192 (three consumers) / m192+np (three, a program a tile), cuDNN and FA2 in the same run;
#   GPU 3: the Hugging Face BERT and Llama training rows (issue 10).
set -x
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv
(CUDA_VISIBLE_DEVICES=0 timeout 300 python3 -m pytest -q -n 8 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
    > "$OUT/gpu_tests_gluon_fwd.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_gluon_fwd.txt") &
for g in 1 2; do
  (CUDA_VISIBLE_DEVICES=$g timeout 400 python3 benchmarks/bench_gluon_ab.py --reps 3 --headdims 64 \
      --seqlens 1024 2048 4096 16384 --extra-row 64:128:2 --modes m192 m192+np > "$OUT/gluon_d64_192_gpu$g.md" 2>&1
   echo "rc $?" >> "$OUT/gluon_d64_192_gpu$g.md") &
done
(CUDA_VISIBLE_DEVICES=3 timeout 400 python3 -m flash_attention_amd bench --suite e2e --models bert,llama --device cuda \
    --no-progress --markdown "$OUT/e2e_bert.md" > "$OUT/e2e_bert_log.txt" 2>&1; echo "rc $?" >> "$OUT/e2e_bert_log.txt") &
wait
