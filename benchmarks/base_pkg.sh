#!/bin/bash
# Sourced by the device scripts: BASE_SRC's package (an older tree's src) also importable as
# flash_attention_amd_base from /tmp/basepkg (its op namespace and HF name renamed), so that
# host_overhead.py / bert_host.py --compare time the old code in the same process as the new.
# Sets CMP to the --compare argument (empty without BASE_SRC).
CMP=""
if [ -n "${BASE_SRC:-}" ]; then
  rm -rf /tmp/basepkg && mkdir -p /tmp/basepkg && cp -r "$BASE_SRC/flash_attention_amd" /tmp/basepkg/flash_attention_amd_base
  grep -rl "flash_attention_amd::" /tmp/basepkg | xargs -r sed -i 's/flash_attention_amd::/flash_attention_amd_base::/g'
  sed -i 's/^NAME = "fa_amd"/NAME = "fa_amd_base"/' /tmp/basepkg/flash_attention_amd_base/integrations/hf.py
  CMP="--compare flash_attention_amd_base"
fi
