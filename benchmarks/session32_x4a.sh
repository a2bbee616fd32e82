#!/bin/bash
# Session 32, first 4-GPU call: the Gluon forward's options (persistent programs for calls with softcap, ALiBi or a
# window; one-sided ALiBi as a per-key term, kernel ALIBI 2 ramp / 3 from integers / 1 |distance|).
#   GPU 0: the GPU-marked test suite (test_gluon_fwd first, alone);
#   GPU 1 and 3: bench_gluon_ab.py --options at d=128 / 256, 4k and 16k, on / off / np / ALiBi modes (two samples);
#   GPU 2: where the host time of a call goes (host_attribution.py).
set -x
export PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$OUT/gpus.txt" 2>&1
for g in 1 3; do
  (CUDA_VISIBLE_DEVICES=$g timeout 480 python3 benchmarks/bench_gluon_ab.py --options --headdims 128 256 \
      --seqlens 4096 16384 --reps 3 --modes np a1 a3 np+a1 np+a3 \
      --json "$OUT/gluon_opts_$g.json" > "$OUT/gluon_opts_$g.md" 2>&1; echo "rc $?" >> "$OUT/gluon_opts_$g.md") &
done
(CUDA_VISIBLE_DEVICES=0 timeout 300 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests/test_gluon_fwd.py \
    > "$OUT/gpu_tests_gluon.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_gluon.txt"
 CUDA_VISIBLE_DEVICES=0 timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider -m gpu tests \
    --deselect tests/test_gluon_fwd.py > "$OUT/gpu_tests_marked.txt" 2>&1; echo "rc $?" >> "$OUT/gpu_tests_marked.txt") &
(CUDA_VISIBLE_DEVICES=2 timeout 200 python3 benchmarks/host_attribution.py --json "$OUT/host_attr.json" \
    > "$OUT/host_attr.txt" 2>&1; echo "rc $?" >> "$OUT/host_attr.txt") &
wait
ls -la "$OUT"
