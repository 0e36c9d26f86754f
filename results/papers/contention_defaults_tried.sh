#!/usr/bin/env bash
# The comparison in results/README.md, "Tried and not shipped": the shipped fixed factors
# against the contention blocks of contention_defaults_tried.py, on the published settings.
# Predictions only. Usage: results/papers/contention_defaults_tried.sh [path/to/tpo]
set -euo pipefail
cd "$(dirname "$0")/../.."
TPO=${1:-build/cli/tpo}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
python3 results/papers/contention_defaults_tried.py "$DIR" > /dev/null
echo "# $(date -u +%F), git $(git rev-parse --short HEAD), CPU only: predictions of the shipped fixed"
echo "# factors and of the tried contention blocks (TRIED_DIR, written by contention_defaults_tried.py)"
iso() {  # prompt, ISO's best 2-chunk split and its speedup over none, per prompt length
  "$TPO" plan "$@" --seq 1024:16384 --max-chunks 2 --quiet --json "$DIR/plan.json" > /dev/null
  python3 - "$DIR/plan.json" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["points"]:
    iso = [c for c in p["candidates"] if c["strategy"] == "iso"]
    best = max(iso, key=lambda c: c["speedup"])
    print(p["seq_len"], best["detail"],
          f'{best["speedup"]:.3f}x')
PY
}
for hw in rtx4090x8 a800x8; do
  for m in "llama2-70b 8" "llama-30b 4"; do
    set -- $m
    for v in "$hw" "$DIR/$hw.json"; do
      echo "\$ tpo plan --model $1 --hardware ${v/$DIR/TRIED_DIR} --tp $2 --seq 1024:16384 --max-chunks 2  (ISO: prompt, split, speedup)"
      iso --model "$1" --hardware "$v" --tp "$2"
    done
  done
done
for hw in h100x8 h100x8-nop2p; do
  for v in "$hw" "$DIR/$hw.json"; do
    echo "\$ tpo plan --scenario generate --model llama3-70b --hardware ${v/$DIR/TRIED_DIR} --tp 8 --prompt 1024 --new-tokens 512 --batch 1  (ladder row)"
    "$TPO" plan --scenario generate --model llama3-70b --hardware "$v" --tp 8 --prompt 1024 \
      --new-tokens 512 --batch 1 --quiet | grep -E "^ladder"
  done
done
