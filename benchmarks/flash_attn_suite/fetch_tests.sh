#!/usr/bin/env bash
# Copies flash_attn's own tests/test_flash_attn.py (v2.8.3) from the local mirror of
# Dao-AILab/flash-attention into <repo>/.fa_tests/ (git-ignored: it is flash_attn's file, never
# committed here). run.sh runs it against this library.
#
#   benchmarks/flash_attn_suite/fetch_tests.sh [DEST_DIR] [TAG]
#
# DEST_DIR defaults to .fa_tests/ at the root of the checkout this script is in; TAG to v2.8.3.
# FA_MIRROR overrides the mirror (a bare or normal git repository of flash-attention).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel)"
dest="${1:-$root/.fa_tests}"
tag="${2:-v2.8.3}"
mirror="${FA_MIRROR:-/work/.mirror/Dao-AILab+flash-attention/repo}"
if ! git -C "$mirror" rev-parse --verify --quiet "$tag^{commit}" >/dev/null; then
  echo "fetch_tests.sh: $mirror has no tag $tag (set FA_MIRROR to a flash-attention clone)" >&2
  exit 1
fi
mkdir -p "$dest"
git -C "$mirror" show "$tag:tests/test_flash_attn.py" > "$dest/test_flash_attn.py.tmp"
mv "$dest/test_flash_attn.py.tmp" "$dest/test_flash_attn.py"
echo "$tag" > "$dest/VERSION"
if git -C "$root" check-ignore -q "$dest/test_flash_attn.py" 2>/dev/null || [[ "$dest" != "$root"/* ]]; then
  echo "wrote $dest/test_flash_attn.py ($tag, $(wc -l < "$dest/test_flash_attn.py") lines)"
else
  echo "fetch_tests.sh: warning: $dest is not git-ignored; add it to .gitignore (flash_attn's file must not be committed)" >&2
fi
