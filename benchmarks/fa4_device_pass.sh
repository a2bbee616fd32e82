#!/usr/bin/env bash
# On the device, after a call that copied .fa4a/ir.tar.xz to .fa4stash/ on the same (warm) machine:
# put FA4 together (fa4_install.sh) and run fa4_probe.py. PROBE_ARGS: extra arguments of the probe;
# THEN: a command to run after the probe with FA4 on PYTHONPATH.
set -x
A=${A:-.fa4stash}
if [ ! -d /tmp/fa4site/flash_attn ]; then
  [ -f "$A/ir.tar.xz" ] || { echo "no $A/ir.tar.xz: not the machine the upload call ran on"; exit 3; }
  bash benchmarks/fa4_install.sh /tmp/fa4site "$A" .fa4b || exit 4
fi
export PYTHONPATH=$PWD/src:/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4cache
[ -f .fa4cache/fa4cache.tgz ] && tar -xzf .fa4cache/fa4cache.tgz -C /tmp
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv
if [ "${PROBE:-1}" = 1 ]; then
  PYTHONUNBUFFERED=1 python3 benchmarks/fa4_probe.py --out "$OUT" ${PROBE_ARGS:-} 2>&1 | tee "$OUT/fa4_probe.txt"
fi
[ -n "${THEN:-}" ] && eval "$THEN"
tar -czf /tmp/fa4cache.tgz -C /tmp fa4cache 2>/dev/null && [ "$(stat -c %s /tmp/fa4cache.tgz)" -lt 15000000 ] \
  && cp /tmp/fa4cache.tgz "$OUT/"
ls -la "$OUT"
