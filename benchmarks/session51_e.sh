#!/bin/bash
# Session 51, call E (one H200): torch.func.grad over the triton backend (core._FuncAttentionFn) and the refusal of
# vmap (tests/test_functorch.py), then the GPU tests of the files whose eager kernel branch it touched.
. benchmarks/_call.sh
step e_functorch_tests.txt 120 python3 -m pytest -q -rf -p no:cacheprovider tests/test_functorch.py
step e_kernel_branch_tests.txt ${BRANCH_TIMEOUT:-150} python3 -m pytest -q -rf -n 8 -p no:cacheprovider -m gpu tests/test_api.py \
  tests/test_heads_first.py tests/test_bias_sinks.py tests/test_triton_fwd.py
for f in "$OUT"/*; do echo "== $f"; grep -E "^rc|passed|failed|^FAILED|^ERROR|Error" "$f" | cut -c1-300 | head -20; done
