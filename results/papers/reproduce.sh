#!/usr/bin/env bash
# Regenerates every prediction in results/papers/ (see results/README.md). All numbers are
# predictions of the analytical cost model; none is a measurement.
# Usage: results/papers/reproduce.sh [path/to/tpo]   (default build/cli/tpo)
set -euo pipefail
cd "$(dirname "$0")/../.."
TPO=${1:-build/cli/tpo}
OUT=results/papers
run() {  # name, then the tpo arguments; the console table goes to NAME.txt
  local name=$1
  shift
  echo "\$ tpo $*" > "$OUT/$name.txt"
  "$TPO" "$@" --quiet >> "$OUT/$name.txt"
  echo "wrote $OUT/$name.txt"
}
# (a) ISO's setting: prefill, prompt lengths 1k-16k. LLaMA-30B's 52 heads do not split over
#     8 GPUs, so it runs at TP 4 (we do not know the TP the ISO paper used for it).
for hw in rtx4090x8 a800x8; do
  run iso-llama30b-$hw plan --model llama-30b --hardware $hw --tp 4 --seq 1024:16384 \
    --json $OUT/iso-llama30b-$hw.json --csv $OUT/iso-llama30b-$hw.csv --svg $OUT/iso-llama30b-$hw.svg
  run iso-llama2-70b-$hw plan --model llama2-70b --hardware $hw --tp 8 --seq 1024:16384 \
    --json $OUT/iso-llama2-70b-$hw.json --csv $OUT/iso-llama2-70b-$hw.csv --svg $OUT/iso-llama2-70b-$hw.svg
done
# (b) Ladder residual's setting: prompt 1024 + 512 generated tokens, batch 1-64.
for hw in h100x8 h100x8-nop2p; do
  run ladder-llama3-70b-$hw plan --scenario generate --model llama3-70b --hardware $hw --tp 8 \
    --prompt 1024 --new-tokens 512 --batch 1,4,16,64 --json $OUT/ladder-llama3-70b-$hw.json
done
run ladder-llama3.1-405b-h100x16 plan --scenario generate --model llama3.1-405b --hardware h100x16 \
  --tp 16 --prompt 1024 --new-tokens 512 --batch 1,4,16,64 --json $OUT/ladder-llama3.1-405b-h100x16.json
