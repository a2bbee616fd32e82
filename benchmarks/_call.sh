# Sourced by benchmarks/session*.sh (session 49 on) at the repository root of the device machine: the call's
# environment, N (h200 / h100: the files' prefix) and step.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
N=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && echo h200 || echo h100)

# step FILE SECONDS COMMAND...: COMMAND's output (stdout and stderr) into $OUT/${N}_FILE, then "rc <exit status>"
step() {
  local file="$OUT/${N}_$1" seconds=$2
  shift 2
  timeout "$seconds" "$@" > "$file" 2>&1
  echo "rc $?" >> "$file"
}
