#!/usr/bin/env bash
# Pack FA4 (flash-attn-4, CuTe DSL) and its needs for a device machine that has no network and
# takes at most 64 MiB per call: nvidia-cutlass-dsl-libs-cu12 alone is a 92 MB wheel, so its two
# large shared libraries travel xz-compressed in their own folders (two calls: .fa4a, then .fa4b),
# and fa4_install.sh puts the pieces together there.
#   bash benchmarks/fa4_pack.sh [PY=312]   -> .fa4a/ (ir.tar.xz), .fa4b/ (wheels, rest.tar, rt.tar.xz)
set -euo pipefail
PY=${1:-312}
FA4=${FA4_VERSION:-4.0.0b36}
DSL=${DSL_VERSION:-4.8.1}
dl=$(mktemp -d)
plat=(--only-binary=:all: --python-version "$PY" --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64)
python3 -m pip download -q --no-deps "${plat[@]}" -d "$dl" "flash-attn-4==$FA4" "nvidia-cutlass-dsl==$DSL" \
  "nvidia-cutlass-dsl-libs-base==$DSL" "nvidia-cutlass-dsl-libs-core==$DSL" "nvidia-cutlass-dsl-libs-cu12==$DSL" \
  quack-kernels "apache-tvm-ffi<0.2" torch-c-dlpack-ext
rm -rf .fa4a .fa4b && mkdir -p .fa4a .fa4b
ls "$dl"/*.whl | grep -v libs_cu12 | xargs -I{} cp {} .fa4b/
x=$(mktemp -d) && (cd "$x" && unzip -q "$dl"/nvidia_cutlass_dsl_libs_cu12-*.whl)
ir=$(cd "$x" && ls nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cu12.*.so)
rt=nvidia_cutlass_dsl/cu12/lib/libcute_dsl_runtime.so
(cd "$x" && XZ_OPT="-9 -T2" tar -cJf "$OLDPWD/.fa4a/ir.tar.xz" "$ir")
(cd "$x" && XZ_OPT="-9 -T2" tar -cJf "$OLDPWD/.fa4b/rt.tar.xz" "$rt")
(cd "$x" && tar -cf "$OLDPWD/.fa4b/rest.tar" --exclude "$ir" --exclude "$rt" .)
rm -rf "$dl" "$x"
du -sh .fa4a .fa4b
