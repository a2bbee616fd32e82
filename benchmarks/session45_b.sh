#!/bin/bash
# Session 45, call B: flash_attn 2.8.3's own tests/test_flash_attn.py against the current tree (a seeded sample, as
# in session 18's run15/flash_attn_suite), the file carried in .fa_tests/ (benchmarks/flash_attn_suite/fetch_tests.sh).
set -u
FA_SUITE_BUDGET=${FA_SUITE_BUDGET:-330} bash benchmarks/flash_attn_suite/run.sh > $OUT/suite_stdout.txt 2>&1
tail -12 $OUT/suite_stdout.txt
rm -f $OUT/results.jsonl $OUT/selected.tsv
ls $OUT
