#!/usr/bin/env bash
# One command for a machine with a GPU (the project's lent H200, or your own): build with
# CUDA for sm_90, run the GPU tests, profile a fixed set of shard shapes, validate planned
# schedules with emulated communication, and print predicted against measured. Reports go to
# $OUT (default results/device/<date>), and all of them into $OUT/device-check.tar.gz.
# Exits non-zero on any CUDA error, wrong kernel result or failed step.
#
#   validate/device-check.sh                  # everything
#   PHASE=build|test|profile|validate ...     # one phase (to split it over several calls)
#   PREBUILT=build-gpu validate/device-check.sh   # use binaries built elsewhere (same ARCH):
#       cmake -S . -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 -DTPO_BUILD_BENCH=OFF
#       cmake --build build-gpu --target tpo tpo_gpu_tests
#       mkdir -p build-gpu/lib && cp /usr/lib/x86_64-linux-gnu/libbenchmark.so.1* build-gpu/lib/
#       then carry build-gpu/cli/tpo, build-gpu/tests/tpo_gpu_tests and build-gpu/lib
#   ARCH=80 validate/device-check.sh          # another GPU architecture
#
# Validation runs use EMULATED communication (one GPU): a single GPU cannot measure a
# multi-GPU NCCL all-reduce, and the profile skips those rows and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90}
OUT=${OUT:-results/device/$(date -u +%Y-%m-%d)}
BUILD=${PREBUILT:-${BUILD:-build-gpu}}
PHASE=${PHASE:-all}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
log() { printf '\n== %s\n' "$*"; }
want() { [ "$PHASE" = all ] || [ "$PHASE" = "$1" ]; }
TPO="$BUILD/cli/tpo"
export TPO_CONFIG_DIR="$PWD/configs"  # binaries built in another checkout find the configs
# Prebuilt binaries may bring the shared libraries the device lacks (e.g. Debian's
# libbenchmark.so.1debian) in $PREBUILT/lib.
if [ -n "${PREBUILT:-}" ] && [ -d "$PREBUILT/lib" ]; then
  export LD_LIBRARY_PATH="$PWD/$PREBUILT/lib:${LD_LIBRARY_PATH:-}"
fi

# Fail fast where there is no GPU, before a long build.
if ! nvidia-smi -L > "$OUT/gpus.txt" 2>&1; then
  echo "no NVIDIA GPU visible (nvidia-smi -L failed); this script is for machines with one"
  cat "$OUT/gpus.txt"
  exit 1
fi
cat "$OUT/gpus.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" 2>/dev/null || true

if want build && [ -z "${PREBUILT:-}" ]; then
  log "configure and build (CUDA arch $ARCH) in $BUILD"
  GEN=()
  command -v ninja > /dev/null && GEN=(-G Ninja)
  cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    -DTPO_BUILD_BENCH=OFF > "$OUT/configure.log"
  grep -E "tpo: CUDA" "$OUT/configure.log" || true
  grep -q "tpo: CUDA=1" "$OUT/configure.log" || { echo "CUDA not found by CMake"; exit 1; }
  cmake --build "$BUILD" -j "$JOBS" --target tpo tpo_gpu_tests > "$OUT/build.log" 2>&1 \
    || { tail -30 "$OUT/build.log"; exit 1; }
fi

if want test; then
  log "GPU tests: the CUDA kernels against the CPU ones"
  # A skipped GPU test (no device) is a failure here: this script is for machines with one.
  "$BUILD/tests/tpo_gpu_tests" | tee "$OUT/gpu-tests.txt"
fi

if want profile; then
  log "profile Llama-2-70B TP 8 and Llama-3.1-8B TP 2 shard shapes"
  "$TPO" profile --backend cuda --model llama2-70b --tp 8 --hardware h200x8 --quick --quiet \
    --out "$OUT/profile-llama2-70b-tp8.json" | tee "$OUT/profile-llama2-70b-tp8.txt"
  "$TPO" profile --backend cuda --model llama3.1-8b --tp 2 --hardware h200x8 --quick --quiet \
    --out "$OUT/profile-llama3.1-8b-tp2.json" | tee "$OUT/profile-llama3.1-8b-tp2.txt"
fi

VFAIL=0
if want validate; then
  log "validate on the GPU with EMULATED communication (8x RTX 4090 and 8x H100 links)"
  # Rank 0's shard runs here; each all-reduce is a copy kernel sized to the target machine's
  # all-reduce time. Two layers, 5 timed runs. Function-preserving strategies are checked
  # against none's output; ladder against the float64 host reference (slow: 2k tokens, one
  # target only).
  for model_tp in "llama2-70b 8" "llama3.1-8b 2"; do
    set -- $model_tp
    model=$1
    tp=$2
    for hw in rtx4090x8 h100x8; do
      tag="$model-tp$tp-$hw"
      "$TPO" plan --model "$model" --hardware "$hw" --tp "$tp" --seq 2048,4096,8192 --layers 2 \
        --strategies iso --max-chunks 2 --quiet --json "$OUT/plan-$tag.json" > "$OUT/plan-$tag.txt"
      "$TPO" validate --backend cuda --comm emulated --plan "$OUT/plan-$tag.json" --hardware "$hw" \
        --layers 2 --repeat 5 --json "$OUT/validate-plan-$tag.json" \
        --trace "$OUT/trace-validate-plan-$tag.json" | tee "$OUT/validate-plan-$tag.txt" || VFAIL=1
      for seq in 2048 4096 8192; do
        cases=("iso --split 0.5,0.5" "iso --split 0.65,0.35")
        if [ "$seq" = 2048 ] && [ "$hw" = h100x8 ]; then cases+=("ladder"); fi
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
fi

GIT_SHA=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
cat > "$OUT/README.md" <<EOM
# Device check $(date -u +%Y-%m-%d)

- git SHA: $GIT_SHA (the binaries report their own in every JSON)
- GPU: $(tail -n +2 "$OUT/nvidia-smi.csv" 2>/dev/null | head -1)
- command: PHASE=$PHASE validate/device-check.sh (ARCH=$ARCH)
- measured: kernel correctness (gpu-tests.txt), op profiles (profile-*.json, kind "measured"),
  validation runs (validate-*.json: measured on one GPU with EMULATED communication)
- predicted: the "predicted_us" fields (cost model named in each file)
- one GPU: multi-GPU NCCL all-reduces were not measured (skipped rows in the profiles)
EOM

log "summary"
for f in "$OUT"/profile-*.json; do
  [ -e "$f" ] || continue
  python3 - "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
s = j.get("analytical_vs_measured", {}).get("summary", {})
print(sys.argv[1].split("/")[-1], "-", j["device"].get("name", "?"), "(analytical h200x8 vs measured)")
for kind, v in s.items():
    print(f"  {kind:18s} {v['shapes']:4d} shapes  median {100*v['median_error']:6.1f}%  worst {100*v['worst_error']:6.1f}%")
PY
done
for f in "$OUT"/validate-*.json; do
  [ -e "$f" ] || continue
  python3 - "$f" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for c in j.get("cases", []):
    print(f"  {sys.argv[1].split('/')[-1][:46]:46s} {c['strategy']['name']:8s} {c['seq_len']:6d} "
          f"pred {c['predicted_us']/1e3:9.2f} ms  meas {c['measured_us']/1e3:9.2f} ms  "
          f"err {100*c['error']:+6.1f}%  {'ok' if c['correct'] else 'WRONG'}")
PY
done
tar -czf "$OUT/device-check.tar.gz" -C "$OUT" --exclude device-check.tar.gz . 2>/dev/null || true
echo "reports in $OUT (all of them in $OUT/device-check.tar.gz)"
[ "$VFAIL" = 0 ] || { echo "some validation failed (wrong result or CUDA error)"; exit 1; }
