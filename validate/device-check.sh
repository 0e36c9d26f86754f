#!/usr/bin/env bash
# One command for a machine with a GPU (the project's lent H200, or your own): build with
# CUDA for sm_90, run the GPU tests, profile a fixed set of shard shapes, and print the
# analytical model's error against the measurements. Reports go to $OUT (default
# results/device/<date>). Exits non-zero on any CUDA error, wrong kernel result or failed step.
#
#   validate/device-check.sh            # everything
#   ARCH=80 validate/device-check.sh    # another GPU architecture
#
# Validation runs use EMULATED communication (one GPU): a single GPU cannot measure a
# multi-GPU NCCL all-reduce, and the profile skips those rows and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90}
OUT=${OUT:-results/device/$(date -u +%Y-%m-%d)}
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
log() { printf '\n== %s\n' "$*"; }

# Fail fast where there is no GPU, before a long build.
if ! nvidia-smi -L > "$OUT/gpus.txt" 2>&1; then
  echo "no NVIDIA GPU visible (nvidia-smi -L failed); this script is for machines with one"
  cat "$OUT/gpus.txt"
  exit 1
fi
cat "$OUT/gpus.txt"
GEN=()
command -v ninja > /dev/null && GEN=(-G Ninja)

log "configure and build (CUDA arch $ARCH) in $BUILD"
cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DTPO_BUILD_BENCH=OFF > "$OUT/configure.log"
grep -E "tpo: CUDA" "$OUT/configure.log" || true
grep -q "tpo: CUDA=1" "$OUT/configure.log" || { echo "CUDA not found by CMake"; exit 1; }
cmake --build "$BUILD" -j "$JOBS" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
TPO="$BUILD/cli/tpo"

log "GPU tests (ctest -L gpu)"
# A skipped GPU test (no device) is a failure here: this script is for machines with one.
(cd "$BUILD" && ctest -L gpu --output-on-failure) | tee "$OUT/ctest-gpu.log"
grep -q "Skipped" "$OUT/ctest-gpu.log" && { echo "GPU tests were skipped: no CUDA device?"; exit 1; }

GIT_SHA=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" 2>/dev/null || true

log "profile Llama-2-70B TP 8 and Llama-3.1-8B TP 2 shard shapes"
"$TPO" profile --backend cuda --model llama2-70b --tp 8 --hardware h200x8 --quick \
  --out "$OUT/profile-llama2-70b-tp8.json" | tee "$OUT/profile-llama2-70b-tp8.txt"
"$TPO" profile --backend cuda --model llama3.1-8b --tp 2 --hardware h200x8 --quick \
  --out "$OUT/profile-llama3.1-8b-tp2.json" | tee "$OUT/profile-llama3.1-8b-tp2.txt"

log "validate on the GPU with EMULATED communication (8x RTX 4090 and 8x H100 links)"
# Rank 0's shard runs on this GPU; each all-reduce is a copy kernel sized to the target
# machine's all-reduce time. Not a multi-GPU run, and reported as emulated everywhere.
# Two layers of each shard, 5 timed runs; function-preserving strategies are checked against
# none's output, ladder against the float64 reference forward (on the host, 2k tokens only:
# it is slow).
VFAIL=0
for model_tp in "llama2-70b 8" "llama3.1-8b 2"; do
  set -- $model_tp
  model=$1; tp=$2
  for hw in rtx4090x8 h100x8; do
    tag="$model-tp$tp-$hw"
    "$TPO" plan --model "$model" --hardware "$hw" --tp "$tp" --seq 2048,4096,8192 --layers 2 \
      --strategies iso --max-chunks 2 --quiet --json "$OUT/plan-$tag.json" > "$OUT/plan-$tag.txt"
    "$TPO" validate --backend cuda --comm emulated --plan "$OUT/plan-$tag.json" --hardware "$hw" \
      --layers 2 --repeat 5 --json "$OUT/validate-plan-$tag.json" \
      --trace "$OUT/validate-plan-$tag.trace.json" | tee "$OUT/validate-plan-$tag.txt" || VFAIL=1
    for seq in 2048 4096 8192; do
      cases=("iso --split 0.5,0.5" "iso --split 0.65,0.35")
      [ "$seq" = 2048 ] && cases+=("ladder")
      for s in "${cases[@]}"; do
        name=$(echo "$s" | tr -c 'a-z0-9\n' '-' | tr -s '-')
        "$TPO" validate --backend cuda --comm emulated --model "$model" --hardware "$hw" \
          --tp "$tp" --seq "$seq" --layers 2 --repeat 5 --strategy $s \
          --json "$OUT/validate-$tag-$seq-$name.json" | grep -E "^(none|iso|ladder) " \
          | tee -a "$OUT/validate-$tag-explicit.txt" || VFAIL=1
      done
    done
  done
done

log "predictions with the measured profiles (analytical model where unmeasured)"
"$TPO" simulate --model llama3.1-8b --hardware h200x8 --tp 2 --seq 4096 --compare \
  --profile "$OUT/profile-llama3.1-8b-tp2.json" --json "$OUT/simulate-llama3.1-8b-tp2.json" \
  | tee "$OUT/simulate-llama3.1-8b-tp2.txt"

cat > "$OUT/README.md" <<EOM
# Device check $(date -u +%Y-%m-%d)

- git SHA: $GIT_SHA
- GPU: $(tail -n +2 "$OUT/nvidia-smi.csv" 2>/dev/null | head -1)
- command: validate/device-check.sh (ARCH=$ARCH)
- measured: kernel correctness (ctest -L gpu), op profiles (profile-*.json, kind "measured")
- predicted: simulate-*.json (cost model "profile": measured ops, analytical elsewhere)
- one GPU: multi-GPU NCCL all-reduces were not measured (skipped rows)
EOM

log "summary: analytical h200x8 model vs measured, per op kind (median / worst |error|)"
for f in "$OUT"/profile-*.json; do
  python3 - "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
s = j.get("analytical_vs_measured", {}).get("summary", {})
print(sys.argv[1].split("/")[-1], "-", j["device"].get("name", "?"))
for kind, v in s.items():
    print(f"  {kind:18s} {v['shapes']:4d} shapes  median {100*v['median_error']:6.1f}%  worst {100*v['worst_error']:6.1f}%")
PY
done
for f in "$OUT"/validate-*.json; do
  python3 - "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for c in j["cases"]:
    print(f"  {sys.argv[1].split('/')[-1][:46]:46s} {c['strategy']['name']:8s} {c['seq_len']:6d} "
          f"pred {c['predicted_us']/1e3:9.2f} ms  meas {c['measured_us']/1e3:9.2f} ms  "
          f"err {100*c['error']:+6.1f}%  {'ok' if c['correct'] else 'WRONG'}")
PY
done
echo "reports in $OUT"
[ "$VFAIL" = 0 ] || { echo "some validation failed (wrong result or CUDA error)"; exit 1; }
