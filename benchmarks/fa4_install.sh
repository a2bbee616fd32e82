#!/usr/bin/env bash
# Put FA4 together from fa4_pack.sh's pieces: bash benchmarks/fa4_install.sh TARGET A_DIR B_DIR
# (A_DIR holds ir.tar.xz, B_DIR the wheels, rest.tar and rt.tar.xz). Then:
#   export PYTHONPATH=TARGET:TARGET/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH
# (the second entry is what nvidia-cutlass-dsl's .pth file adds; --target installs skip .pth files).
set -euo pipefail
T=$1; A=$2; B=$3
mkdir -p "$T"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$T" "$B"/*.whl
tar -x -C "$T" -f "$B/rest.tar"
tar -xJ -C "$T" -f "$B/rt.tar.xz"
tar -xJ -C "$T" -f "$A/ir.tar.xz"
