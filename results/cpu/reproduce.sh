#!/usr/bin/env bash
# Profile -> plan -> validate on this machine's CPU (see results/cpu/README.md). Measured
# numbers are CPU measurements (fp32, ranks as threads); nothing here ran on a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
TPO=${1:-build/cli/tpo}
OUT=results/cpu
P=configs/profiles/cpu-vm-llama3.1-8b-tp2.json
run() {  # name, then the tpo arguments
  local name=$1
  shift
  echo "\$ tpo $*" > "$OUT/$name.txt"
  "$TPO" "$@" >> "$OUT/$name.txt" 2>&1
  echo "wrote $OUT/$name.txt"
}
run profile-llama3.1-8b-tp2 profile --backend cpu --model llama3.1-8b --tp 2 --quick --out $P --quiet
run plan-llama3.1-8b-tp2 plan --model llama3.1-8b --hardware cpu-host --tp 2 --seq 128,256 \
  --layers 2 --profile $P --json $OUT/plan-llama3.1-8b-tp2.json --quiet
run validate-plan validate --plan $OUT/plan-llama3.1-8b-tp2.json --hardware cpu-host --profile $P \
  --json $OUT/validate-plan.json --trace $OUT/validate-plan.trace.json
for s in iso ladder; do
  run validate-$s validate --model llama3.1-8b --hardware cpu-host --tp 2 --seq 256 --layers 2 \
    --strategy $s --profile $P --json $OUT/validate-$s.json
done
