#!/bin/bash
# Session 57, call E (one H200): seed 1259's forward by tile and shape (strided_v_tiles.py).
. benchmarks/_call.sh
export PYTHONPATH=$PWD/src:$PWD/tests
step e_strided_v_tiles.txt 200 python3 benchmarks/strided_v_tiles.py
cat "$OUT/${N}_e_strided_v_tiles.txt"
