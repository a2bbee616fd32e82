#!/bin/bash
# Session 57, call F (one H200): the decline of launch/fwd.py UNALIGNED_DV_REASON on the GPU: the fuzzer's regression
# cases (1259: served by another backend, exactly; triton forced declines; 1301: fp32 paged KV cache at d=256).
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/tests
step f_regressions.txt 120 python3 -m pytest -q -rf -n 4 -p no:cacheprovider -m gpu tests/test_fuzz.py -k regressions
tail -3 "$OUT/${N}_f_regressions.txt"
step f_explain.txt 60 python3 -c "
import torch, flash_attention_amd as fa
q = torch.randn(207, 4, 136, device='cuda', dtype=torch.float16)[1:, 1:, :128]
v = torch.randn(235, 4, 24, device='cuda', dtype=torch.float16)[1:, 1:, :16]
k = torch.randn(235, 4, 136, device='cuda', dtype=torch.float16)[1:, 1:, :128]
cu_q = torch.tensor([0, 91, 99, 206], dtype=torch.int32, device='cuda')
cu_k = torch.tensor([0, 57, 179, 234], dtype=torch.int32, device='cuda')
print(fa.explain(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=107, max_seqlen_k=122))"
cat "$OUT/${N}_f_explain.txt"
