#!/usr/bin/env bash
# One command for a machine with a GPU (the project's lent H200 or H100, or your own): build with
# CUDA, run the GPU tests, profile a fixed set of shard shapes, validate planned schedules
# with emulated communication, and print predicted against measured. Every step runs under a
# time limit and the script goes on after a failed step, so one run shows every problem;
# it exits non-zero when any step failed (a CUDA error, a wrong result, a timeout).
#
#   validate/device-check.sh                      # everything
#   PHASE=build|test|profile|validate|calibrate    # one phase
#   PREBUILT=build-gpu validate/device-check.sh   # binaries built elsewhere (same ARCH):
#       cmake -S . -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 -DTPO_BUILD_BENCH=OFF \
#         -DTPO_CUDNN_FRONTEND_DIR=$PWD/build/_deps/cudnn-frontend/include
#       cmake --build build-gpu --target tpo tpo-gpu tpo_gpu_tests tpo_attention_bench
#       mkdir -p build-gpu/lib && cp /usr/lib/x86_64-linux-gnu/libbenchmark.so.1* build-gpu/lib/
#       then carry build-gpu/cli/tpo and tpo-gpu (tpo hands CUDA work to tpo-gpu beside it),
#       build-gpu/tests/tpo_gpu_tests and build-gpu/lib
#       (a build with MPI needs the GPU machine's libmpi.so.40; `tpo --version` lists the parts)
#   With the project's device tool (15 minutes of device time, 600 s per command): build
#       build-gpu here first as above, then one run with
#       carry: build-gpu/cli/tpo build-gpu/cli/tpo-gpu build-gpu/tests/tpo_gpu_tests
#              build-gpu/tests/tpo_attention_bench build-gpu/lib build/_deps/cudnn-frontend
#       command: PREBUILT=build-gpu REPORTS=/tmp/dc SKIP="calibrate- validate-llama2-70b
#              plan-llama2-70b profile-llama2-70b" validate/device-check.sh
#              (timeout_s 590; BUDGET is 480 there; after every step steps.txt and
#              partial.tar.gz are copied to $OUT, so a command cut at the tool's limit still
#              returns what was measured; carried binaries that lack a library there are
#              rebuilt there, in build-device-check)
#       The same command on an H100 (the kind a plain `run` gets) or an H200: the script finds
#       the GPU's hardware file (HOST_HW below; the H100 path dry-run only, with HOST_HW=h100x8).
#       Order: GPU tests, the 8B profile, the steps that run code never run on a GPU, the
#       attention benchmark, then the 8B validations; a step cut or skipped for the budget is
#       listed as such, not as a failure.
#   A machine without network cannot fetch the cudnn-frontend headers: copy this checkout's
#       build/_deps/cudnn-frontend along (the project's device tool: carry it), else the build
#       leaves cuDNN's fused attention out and the configure step says so.
#   DRY_RUN=1 PREBUILT=build REPORTS=/tmp/dry validate/device-check.sh
#       # no GPU needed: every step runs with binaries built here and passes when it stopped
#       # only for want of the GPU; a command whose arguments tpo refuses fails (run it before
#       # spending device time)
#   ARCH=80 validate/device-check.sh              # another GPU architecture
#   HOST_HW=my-gpu.json validate/device-check.sh  # the hardware file of the GPU it runs on
#       (default: by the GPU's name, validate/host-hardware.sh: an H200 SXM h200x8, an H100 SXM
#       h100x8, A100/A800 SXM4 80GB and RTX 4090 theirs; any other GPU needs one: a copy of the
#       nearest file with its datasheet numbers, docs/hardware-file.md).
#       Profiles are labelled with it, and the validations predicted with it (the profile's
#       time where this run's profile measured an op, the file's model for the rest).
#       The contention model is h200x8's alone (fitted on an H200): on another GPU the runs are
#       predicted with the slowdown factors this run's profile measured (without one, the
#       file's fixed factors), and the calibrate steps check h200x8's block on this GPU's runs
#       (held out entirely; as shipped and with the comm draw measured here), beside fits made
#       on them; without this run's profiles they are skipped there
#   BUDGET=420 validate/device-check.sh           # seconds; a step whose limit exceeds what is
#       left runs with what is left and, if cut there, is listed "CUT (budget ...)"; once
#       under 20 s are left the rest are skipped; neither counts as a failure
#       (default 1800; 480 where $OUT is set, under the project's device tool, whose commands
#       end at 600 s: a command cut there returns only what $OUT holds, so steps.txt and
#       partial.tar.gz are copied there after every step)
#   SKIP="calibrate- validate-llama2-70b-tp8-h100x8-4096" validate/device-check.sh
#       # steps whose names start with any of these words are skipped (listed as such in
#       # steps.txt, not counted as failures): `calibrate-` runs on the CPU afterwards just
#       # as well (tpo calibrate --reports DIR/validate-*.json ...), saving device time
#
# Reports go to REPORTS (default results/device/<date>) and, all of them, into
# device-check.tar.gz there; where $OUT is set (the device tool), the tarball and the
# summary are copied to $OUT.
#
# Validation runs use EMULATED communication: this GPU computes rank 0's shard, and each
# all-reduce is a copy kernel lasting the target machine's all-reduce (8x RTX 4090 or
# 8x H100). A single GPU cannot measure a multi-GPU NCCL all-reduce; the profile skips those
# rows and says so.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
ARCH=${ARCH:-90}
REPORTS=${REPORTS:-results/device/$(date -u +%Y-%m-%d)}
BUILD=${PREBUILT:-${BUILD:-build-gpu}}
PHASE=${PHASE:-all}
BUDGET=${BUDGET:-$([ -n "${OUT:-}" ] && echo 480 || echo 1800)}
JOBS=${JOBS:-$(nproc)}
# A whole run (PHASE=all) into a folder holding an earlier run's reports moves that folder
# aside, so that the summary and the tarball hold this run's only (a rerun on a warm machine
# writes to the same place); one phase reads and adds to the folder as it is.
REPORTS=${REPORTS%/}
[ "${PHASE:-all}" = all ] && [ -e "$REPORTS/steps.txt" ] && mv "$REPORTS" "$REPORTS.earlier-$(date +%s)"
mkdir -p "$REPORTS"
R=$REPORTS
TPO="$BUILD/cli/tpo"
export TPO_CONFIG_DIR="$PWD/configs"  # binaries built in another checkout find the configs
if [ -n "${PREBUILT:-}" ] && [ -d "$PREBUILT/lib" ]; then
  export LD_LIBRARY_PATH="$PWD/$PREBUILT/lib:${LD_LIBRARY_PATH:-}"
fi
want() { [ "$PHASE" = all ] || [ "$PHASE" = "$1" ]; }
# cuDNN (opened by tpo at run time): the library path's libcudnn.so.9, else a Python wheel's
# (nvidia-cudnn-cu*, as PyTorch installs it). Its folder goes on LD_LIBRARY_PATH, where cuDNN
# finds its engine libraries.
# (grep without -q: reading ldconfig's whole list, so it never dies of SIGPIPE under pipefail)
if [ -z "${TPO_CUDNN_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep 'libcudnn.so.9' > /dev/null; then
  cudnn_dir=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$cudnn_dir" ] && [ -e "$cudnn_dir/libcudnn.so.9" ] || \
    cudnn_dir=$(dirname "$(find /usr /opt /root -name 'libcudnn.so.9' 2>/dev/null | head -1)" 2>/dev/null)
  if [ -n "$cudnn_dir" ] && [ -e "$cudnn_dir/libcudnn.so.9" ]; then
    export TPO_CUDNN_LIB="$cudnn_dir/libcudnn.so.9"
    export LD_LIBRARY_PATH="$cudnn_dir:${LD_LIBRARY_PATH:-}"
  fi
fi
cudnn_lib=${TPO_CUDNN_LIB:-$(ldconfig -p 2>/dev/null | grep -m1 'libcudnn.so.9' | sed 's/.*=> //')}
cudnn_version=$(python3 -c 'import ctypes, sys; v = ctypes.CDLL(sys.argv[1]).cudnnGetVersion(); print(f"{v // 10000}.{v // 100 % 100}.{v % 100}")' "${cudnn_lib:-none}" 2>/dev/null)
echo "cuDNN: ${cudnn_lib:-not found} (version ${cudnn_version:-unknown}; file $([ -e "${cudnn_lib:-/nonexistent}" ] && readlink -f "$cudnn_lib" || echo -))" \
  | tee "$R/cudnn.txt"
# The build needs cudnn.h (CUDA's, or beside a wheel's library) and the cudnn-frontend headers:
# `make` fetches them into build/_deps, which a machine without network gets carried over.
CUDNN_CMAKE=()
FRONTEND_DIR=${TPO_CUDNN_FRONTEND_DIR:-$PWD/build/_deps/cudnn-frontend/include}
[ -e "$FRONTEND_DIR/cudnn_frontend.h" ] && CUDNN_CMAKE+=(-DTPO_CUDNN_FRONTEND_DIR="$FRONTEND_DIR")
if [ -n "${cudnn_lib:-}" ] && [ -e "$(dirname "$cudnn_lib")/../include/cudnn.h" ]; then
  CUDNN_CMAKE+=(-DTPO_CUDNN_INCLUDE_DIR="$(cd "$(dirname "$cudnn_lib")/../include" && pwd)")
fi
log() { printf '\n== %s (%ss)\n' "$*" "$(($(date +%s) - START))"; }
: > "$R/steps.txt"
FAILED=0
BUDGET_SKIPPED=0  # steps skipped or cut for the time budget (not failures of their code)
# step NAME LIMIT_SECONDS COMMAND...: output to $R/NAME.log; status line in steps.txt.
step() {
  local name=$1 limit=$2 prefix
  shift 2
  for prefix in ${SKIP:-}; do
    if [[ "$name" == "$prefix"* ]]; then
      printf '%-52s SKIPPED (SKIP=%s)\n' "$name" "$prefix" | tee -a "$R/steps.txt"
      return 0
    fi
  done
  local left=$((BUDGET - ($(date +%s) - START)))
  if [ "$left" -lt 20 ]; then
    # Not a failure of the step's code: counted apart (BUDGET_SKIPPED), listed as such.
    printf '%-52s SKIPPED (budget spent)\n' "$name" | tee -a "$R/steps.txt"
    BUDGET_SKIPPED=$((BUDGET_SKIPPED + 1))
    return 1
  fi
  local cut_by_budget=""
  [ "$limit" -gt "$left" ] && { limit=$left; cut_by_budget=1; }
  local t0=$(date +%s) rc=0
  # Line-buffered, so a step killed by its limit leaves its output up to where it stopped.
  timeout --kill-after=5 "$limit" stdbuf -oL -eL "$@" > "$R/$name.log" 2>&1 || rc=$?
  local what=ok
  # DRY_RUN: a step stopped only for want of the GPU (or of a file a GPU step would have
  # written) passes; one that refused its arguments (exit 2) fails, as it would on the GPU.
  if [ -n "${DRY_RUN:-}" ] && [ "$rc" != 0 ] &&
    { grep -q "No such file or directory" "$R/$name.log" ||
      { [ "$rc" != 2 ] && grep -qE "no usable CUDA device|no CUDA device" "$R/$name.log"; }; }; then
    what="dry (no GPU; arguments accepted)"
    rc=0
  fi
  if [ "$rc" != 0 ] && [ -n "$cut_by_budget" ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then
    # Its own limit was longer than the budget left: cut by the budget, not failed.
    what="CUT (budget spent after ${limit}s)"
    BUDGET_SKIPPED=$((BUDGET_SKIPPED + 1))
  elif [ "$rc" != 0 ]; then
    what="FAILED (exit $rc$([ "$rc" = 124 ] || [ "$rc" = 137 ] && echo ", timed out after ${limit}s"))"
    FAILED=1
  fi
  printf '%-52s %-34s %4ss\n' "$name" "$what" "$(($(date +%s) - t0))" | tee -a "$R/steps.txt"
  [ "$rc" = 0 ] || tail -15 "$R/$name.log" | sed 's/^/    /'
  save_partial
  return "$rc"
}

# Under the device tool ($OUT set), what exists so far is copied there after every step: a
# command cut at the tool's limit returns what $OUT holds, and nothing else.
save_partial() {
  [ -n "${OUT:-}" ] && [ "$OUT" != "$R" ] || return 0
  cp "$R/steps.txt" "$OUT/steps.txt" 2>/dev/null
  tar -czf "$OUT/partial.tar.gz.tmp" -C "$R" --exclude=device-check.tar.gz . 2>/dev/null &&
    mv "$OUT/partial.tar.gz.tmp" "$OUT/partial.tar.gz"
  return 0
}

finish() {
  local sha
  [ -n "${CLOCKS_PID:-}" ] && kill "$CLOCKS_PID" 2>/dev/null
  sha=$("$TPO" --version 2>/dev/null | sed -n "s/^[^(]*(\([^)]*\)).*/\1/p")
  cat > "$R/README.md" <<EOM
# Device check $(date -u +%Y-%m-%d)

- git SHA of the binaries: ${sha:-unknown} (tpo --version; also git_sha in every JSON)
- GPU: $(tail -n +2 "$R/nvidia-smi.csv" 2>/dev/null | head -1); its hardware file: ${HOST_HW:-none}
- command: PHASE=$PHASE BUDGET=$BUDGET SKIP="${SKIP:-}" validate/device-check.sh (ARCH=$ARCH)
- measured: kernel correctness (gpu-tests.log, gpu-cli.log), op profiles (profile-*.json,
  kind "measured"), validation runs (validate-*.json: measured on ONE GPU with EMULATED
  communication: each all-reduce is a copy kernel lasting the cost model's PREDICTED
  all-reduce time on the target machine, so only compute and overlap are measured)
- predicted: the "predicted_us" fields, by the cost model each file names
- one GPU: multi-GPU NCCL all-reduces were not measured (skipped rows in the profiles)
EOM
  log "summary"
  {
    echo "steps:"
    cat "$R/steps.txt"
    # cuDNN's plan building (per shape when dynamic shapes are unavailable) costs device time.
    notes=$(cat "$R"/*.log 2>/dev/null | grep -E 'tpo: cuDNN attention|--attention auto' | sort | uniq -c | sort -rn | head -6)
    [ -n "$notes" ] && { echo "cuDNN notes in the step logs (count, text):"; echo "$notes"; }
    python3 validate/device_check_summary.py "$R"
    # The SM clock while the GPU was busy (utilization >= 50%), from clocks.csv.
    if [ -s "$R/clocks.csv" ]; then
      awk -F', *' '$6 + 0 >= 50 { print $2 }' "$R/clocks.csv" | sort -n | awk '
        { v[NR] = $1 } END { if (NR) printf "\nSM clock while busy (clocks.csv, %d samples): median %d MHz, range %d-%d MHz\n", NR, v[int((NR + 1) / 2)], v[1], v[NR] }'
    fi
    # Against the previous H200 run (the same cases, on an H200 only): the whole comparison in
    # its own file, its totals here.
    prev=results/h200/2026-11-29
    if [ "$(basename "$HOST_HW" .json)" = h200x8 ] && [ -d "$prev" ] && ls "$R"/validate-*.json > /dev/null 2>&1; then
      if python3 results/h200/compare_runs.py "$prev" "$R" > "$R/compare-2026-11-29.txt" 2>&1; then
        echo; echo "against $prev (compare-2026-11-29.txt):"; sed -n '/^3\./,/^$/p' "$R/compare-2026-11-29.txt"
      else
        echo "compare_runs.py failed; see compare-2026-11-29.txt"
      fi
    fi
  } 2>&1 | tee "$R/summary.txt"
  tar -czf "/tmp/device-check.tar.gz" -C "$R" --exclude=device-check.tar.gz . 2>/dev/null && mv /tmp/device-check.tar.gz "$R/"
  if [ -n "${OUT:-}" ] && [ "$OUT" != "$R" ]; then
    cp "$R/device-check.tar.gz" "$R/summary.txt" "$OUT/" 2>/dev/null && rm -f "$OUT/partial.tar.gz"
  fi
  echo "reports in $R (all of them in $R/device-check.tar.gz)"
  local dry="" budget=""
  [ -n "${DRY_RUN:-}" ] && dry=" (DRY RUN: arguments only, nothing ran on a GPU)"
  [ "$BUDGET_SKIPPED" != 0 ] && budget="; $BUDGET_SKIPPED skipped or cut for the time budget (BUDGET=$BUDGET s)"
  [ "$FAILED" = 0 ] && echo "device check: all steps that ran passed$budget$dry" ||
    echo "device check: SOME STEPS FAILED$budget$dry"
}

# DRY_RUN=1 PREBUILT=build validate/device-check.sh: every step on a machine without a GPU,
# with binaries built here, to catch a command the CLI refuses before device time is spent.
if [ -n "${DRY_RUN:-}" ]; then
  [ -n "${PREBUILT:-}" ] || { echo "DRY_RUN needs PREBUILT (binaries built here)"; exit 2; }
  export DRY_RUN
  echo "DRY RUN: no GPU; each step's arguments are checked, nothing is measured" | tee "$R/gpus.txt"
# Fail fast where there is no GPU, before a long build.
elif ! nvidia-smi -L > "$R/gpus.txt" 2>&1; then
  echo "no NVIDIA GPU visible (nvidia-smi -L failed); this script is for machines with one"
  cat "$R/gpus.txt"
  exit 1
fi
cat "$R/gpus.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
  > "$R/nvidia-smi.csv" 2>/dev/null || true
# The SM clock, power and temperature once a second for the whole run (clocks.csv): which clock
# the profiles' kernels ran at, which no profile records (results/independent/README.md, first
# section: whether a fitted GEMM efficiency holds some boost clock). Stopped in finish.
CLOCKS_PID=""
if [ -z "${DRY_RUN:-}" ]; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv,noheader,nounits -lms 1000 > "$R/clocks.csv" 2>/dev/null &
  CLOCKS_PID=$!
fi
# The hardware file of the GPU this runs on: HOST_HW, else by the GPU's name
# (validate/host-hardware.sh); a dry run, having no GPU, takes the H200's.
gpu_name=$(tail -n +2 "$R/nvidia-smi.csv" 2>/dev/null | head -1 | cut -d, -f1)
if [ -z "${HOST_HW:-}" ]; then
  HOST_HW=$(validate/host-hardware.sh "$gpu_name")
  [ -z "$HOST_HW" ] && [ -n "${DRY_RUN:-}" ] && HOST_HW=h200x8
fi
# The GPU CLI test profiles with it too.
export HOST_HW
if [ -z "$HOST_HW" ]; then
  echo "this GPU ('$gpu_name') has no hardware file here: set HOST_HW to one (a copy of the"
  echo "  nearest configs/hardware file with its datasheet numbers; docs/hardware-file.md)" \
    | tee "$R/host-hardware.txt"
  FAILED=1; finish; exit 2
fi
echo "hardware file of this GPU: $HOST_HW (HOST_HW)" | tee "$R/host-hardware.txt"

if want build && [ -z "${PREBUILT:-}" ]; then
  log "configure and build (CUDA arch $ARCH) in $BUILD"
  GEN=()
  command -v ninja > /dev/null && GEN=(-G Ninja)
  step configure 300 cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DTPO_BUILD_BENCH=OFF "${CUDNN_CMAKE[@]}"
  grep -q "tpo: CUDA=1" "$R/configure.log" || { echo "CUDA not found by CMake"; FAILED=1; }
  grep -q "cuDNN=1" "$R/configure.log" || {
    echo "cuDNN's fused attention NOT built (cudnn.h or the cudnn-frontend headers not found;"
    echo "  carry build/_deps/cudnn-frontend or set TPO_CUDNN_FRONTEND_DIR / TPO_CUDNN_INCLUDE_DIR)"
    FAILED=1
  }
  step build 900 cmake --build "$BUILD" -j "$JOBS" --target tpo tpo-gpu tpo_gpu_tests \
    tpo_attention_bench
fi
"$TPO" --version > "$R/version.txt" 2>&1 || { echo "$TPO does not run:"; cat "$R/version.txt"; FAILED=1; finish; exit 1; }
# `tpo` loads no GPU library and hands CUDA work to tpo-gpu beside it.
[ -x "$BUILD/cli/tpo-gpu" ] || { echo "$BUILD/cli/tpo-gpu is missing (tpo hands CUDA work to it)"; FAILED=1; finish; exit 1; }
# Binaries built on another machine may link a library this one lacks (libmpi, libnccl,
# libbenchmark): every GPU step would then fail at load time. Say which, once, and stop.
missing=$(ldd "$BUILD/cli/tpo-gpu" "$BUILD/tests/tpo_gpu_tests" "$BUILD/tests/tpo_attention_bench" 2>/dev/null \
  | grep 'not found' | sort -u)
[ -d /usr/local/cuda/bin ] && PATH=$PATH:/usr/local/cuda/bin
if [ -n "$missing" ] && [ -z "${DRY_RUN:-}" ] && [ -n "${PREBUILT:-}" ] && command -v cmake > /dev/null &&
  command -v nvcc > /dev/null; then
  # Rather than lose the run: build here (minutes on a GPU machine's cores), with what this
  # machine has (MPI only if it has it).
  echo "libraries the carried binaries need and this machine lacks:"
  echo "$missing"
  BUILD=build-device-check
  TPO="$BUILD/cli/tpo"
  log "building here instead, in $BUILD"
  GEN=()
  command -v ninja > /dev/null && GEN=(-G Ninja)
  step configure-here 180 cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DTPO_BUILD_BENCH=OFF "${CUDNN_CMAKE[@]}"
  step build-here 420 cmake --build "$BUILD" -j "$JOBS" --target tpo tpo-gpu tpo_gpu_tests \
    tpo_attention_bench
  "$TPO" --version > "$R/version.txt" 2>&1 || { echo "the build here does not run either"; FAILED=1; finish; exit 1; }
  missing=$(ldd "$BUILD/cli/tpo-gpu" "$BUILD/tests/tpo_gpu_tests" "$BUILD/tests/tpo_attention_bench" 2>/dev/null \
    | grep 'not found' | sort -u)
fi
if [ -n "$missing" ]; then
  echo "libraries the binaries need and this machine lacks (build here, or without MPI:"
  echo "  -DTPO_ENABLE_MPI=OFF, or carry the library in $BUILD/lib):"
  echo "$missing"
  FAILED=1; finish; exit 1
fi

# HOST_HW must load (a mistyped name or a broken copy would fail every step after the build).
if ! "$TPO" simulate --model llama3.1-8b --hardware "$HOST_HW" --tp 2 --seq 256 --layers 1 \
  > "$R/host-hardware-check.log" 2>&1; then
  echo "HOST_HW=$HOST_HW does not load:"; tail -3 "$R/host-hardware-check.log"
  FAILED=1; finish; exit 2
fi
# A build with cuDNN must run it: the GPU test then fails instead of skipping the fused checks.
grep -q cudnn "$R/version.txt" && export TPO_REQUIRE_CUDNN=1
# cudnn-frontend opens the CUDA runtime itself: the one tpo-gpu links, not another one found first.
cudart=$(ldd "$BUILD/cli/tpo-gpu" 2>/dev/null | awk '/libcudart\.so/ {print $1; exit}')
[ -n "$cudart" ] && export CUDNN_FRONTEND_CUDART_LIB_NAME="$cudart"
echo "cuDNN required by the GPU test: ${TPO_REQUIRE_CUDNN:-no}; CUDA runtime for the frontend: ${cudart:-default}" \
  | tee -a "$R/cudnn.txt"

if want test; then
  log "GPU tests: the CUDA kernels against the CPU ones; the runtime and profiler on a tiny model"
  # A skipped GPU test (exit 77, no device) counts as a failure here.
  # cuDNN logs its errors (only) into the step log, should a fused check fail.
  step gpu-tests 120 env CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr "$BUILD/tests/tpo_gpu_tests"
  step gpu-cli 180 tests/gpu/cli_gpu.sh "$TPO" tests/data
fi

# Steps that exercise code never run on a GPU before (the comm SM budget, eager launches and
# CUDA graph capture): run right after the first shard's profile, so a short budget does not
# skip them.
never_run_steps() {
  local prof="$R/profile-llama3.1-8b-tp2.json" popt=() ctas ex
  [ -s "$prof" ] && popt=(--profile "$prof")
  # The comm SM budget: one case at several --comm-ctas (the copy kernel's CTAs), predicted
  # with the host file's contention model (h200x8's fitted block; fixed factors on a GPU
  # without one) and measured.
  for ctas in 4 8 32; do
    step "validate-ctas-$ctas" 60 "$TPO" validate --backend cuda --comm emulated \
      --model llama3.1-8b --hardware "$HOST_HW" --emulate rtx4090x8 --tp 2 --seq 4096 "${popt[@]}" \
      --layers 2 --repeat 5 --strategy iso --split 2048,2048 --comm-ctas "$ctas" \
      --json "$R/validate-ctas-$ctas.json"
  done
  # Execution modes: short prefill and decode cases (where launches matter) run queued, eager
  # and as a CUDA graph, each predicted in its mode (launch costs from this run's profile).
  # Named exec-*.json so calibration (fitted on queued runs) does not take them in.
  for ex in queued eager graph; do
    step "exec-$ex-decode" 60 "$TPO" validate --backend cuda --comm emulated \
      --model llama3.1-8b --hardware "$HOST_HW" --tp 2 --phase decode --seq 4096 --batch 8 \
      "${popt[@]}" --layers 4 --repeat 5 --strategy none --exec "$ex" \
      --json "$R/exec-$ex-decode.json"
    step "exec-$ex-prefill" 60 "$TPO" validate --backend cuda --comm emulated \
      --model llama3.1-8b --hardware "$HOST_HW" --tp 2 --seq 512 "${popt[@]}" --layers 4 \
      --repeat 5 --strategy iso --split 256,256 --exec "$ex" --json "$R/exec-$ex-prefill.json"
  done
  # The embedding and LM head (written 2026-12-04): a decode step and a prefill with them, the
  # LM head predicted from this run's profile (which timed lm_head rows). Checked against the
  # float64 reference (ladder changes the model). Named head-*.json: out of calibration.
  step "head-decode" 60 "$TPO" validate --backend cuda --comm emulated --model llama3.1-8b \
    --hardware "$HOST_HW" --tp 2 --phase decode --seq 4096 --batch 8 "${popt[@]}" --layers 2 \
    --repeat 5 --strategy ladder --embed-head --json "$R/head-decode.json"
  step "head-prefill" 60 "$TPO" validate --backend cuda --comm emulated --model llama3.1-8b \
    --hardware "$HOST_HW" --tp 2 --seq 1024 --batch 2 "${popt[@]}" --layers 2 --repeat 5 \
    --strategy iso --split 512,512 --embed-head --json "$R/head-prefill.json"
  # A generation as `plan --scenario generate` prices it (written 2026-12-04): each strategy's
  # prefill and decode step at the middle context, both with the embedding and LM head, the
  # tokens/s speedups predicted against measured (validate --plan of the generate report).
  step "gen-plan" 60 "$TPO" plan --scenario generate --model llama3.1-8b --hardware "$HOST_HW" \
    --tp 2 --prompt 1024 --new-tokens 64 --batch 2 "${popt[@]}" --layers 2 \
    --strategies iso,ladder --json "$R/gen-plan.json"
  step "gen-validate" 100 "$TPO" validate --backend cuda --comm emulated \
    --plan "$R/gen-plan.json" --alternatives 2 --repeat 5 --json "$R/gen-validate.json"
  # The residual add fused with the next norm (add_rmsnorm_bf16, written 2026-12-04) against the
  # two kernels apart: the same case both ways, each predicted from this run's profile (which
  # timed add_rmsnorm rows). Named addnorm-*.json: calibration takes validate-*.json only.
  for an in fused separate; do
    step "addnorm-$an" 60 "$TPO" validate --backend cuda --comm emulated \
      --model llama3.1-8b --hardware "$HOST_HW" --tp 2 --seq 4096 "${popt[@]}" --layers 4 \
      --repeat 5 --strategy iso --split 2048,2048 --add-norm "$an" --json "$R/addnorm-$an.json"
  done
  # The ladder paper's generation setting (Llama-3-70B, TP 8, prompt 1024 + 512 new tokens): its
  # generate report planned for 8xH100, run here on 2 of its 80 layers with this GPU's compute
  # and 8xH100 all-reduces emulated, batch 1 and 4: tokens/s speedups predicted (HOST_HW's
  # analytical model: there is no Llama-3-70B profile) against measured. The report's own speedup
  # (H100 compute) is another prediction: "-" in tpo's text, None in the summary.
  step "gen-ladder-plan" 60 "$TPO" plan --scenario generate --model llama3-70b \
    --hardware h100x8 --tp 8 --prompt 1024 --new-tokens 512 --batch 1,4 --layers 2 \
    --strategies ladder --json "$R/gen-ladder-plan.json"
  step "gen-ladder-validate" 150 "$TPO" validate --backend cuda --comm emulated \
    --plan "$R/gen-ladder-plan.json" --hardware "$HOST_HW" --emulate h100x8 --repeat 5 \
    --json "$R/gen-ladder-validate.json"
}

# The shards: Llama-3.1-8B TP 2 first (smaller), then Llama-2-70B TP 8.
SHARDS=("llama3.1-8b 2" "llama2-70b 8")
for shard in "${SHARDS[@]}"; do
  read -r model tp <<< "$shard"
  prof="$R/profile-$model-tp$tp.json"
  if want profile; then
    log "profile $model TP $tp on this GPU"
    step "profile-$model-tp$tp" 200 "$TPO" profile --backend cuda --model "$model" --tp "$tp" \
      --hardware "$HOST_HW" --quiet --out "$prof"
    # A profile cut short leaves no file: the validations below then predict with the
    # analytical model, which their reports name; say so here too.
    [ -s "$prof" ] || printf '%-52s %s\n' "  (no $(basename "$prof"))" \
      "the $model validations predict without a profile" | tee -a "$R/steps.txt"
  fi
  if [ "$model" = llama3.1-8b ]; then
    want validate && never_run_steps
    # Attention TFLOP/s, cuDNN's fused kernel and the cuBLAS one side by side (after the
    # never-run steps: the profile above already timed the fused kernel at this model's shapes).
    want test && step attention-bench 180 "$BUILD/tests/tpo_attention_bench" \
      "$R/attention-bench.json"
  fi
  if want validate; then
    log "validate $model TP $tp on this GPU with EMULATED communication"
    # Predicted with this GPU's measured profile when there is one (compute, interference),
    # and the target machine's links for the all-reduce; else HOST_HW's analytical model.
    popt=()
    [ -s "$prof" ] && popt=(--profile "$prof")
    for target in rtx4090x8 h100x8; do
      tag="$model-tp$tp-$target"
      # The planner's ISO split for the target machine (its analytical model).
      step "plan-$tag" 60 "$TPO" plan --model "$model" --hardware "$target" --tp "$tp" \
        --seq 2048,4096,8192 --layers 2 --strategies iso --quiet --json "$R/plan-$tag.json"
      step "validate-$tag-plan" 150 "$TPO" validate --backend cuda --comm emulated \
        --plan "$R/plan-$tag.json" --hardware "$HOST_HW" --emulate "$target" "${popt[@]}" \
        --alternatives 2 --repeat 5 --json "$R/validate-$tag-plan.json" \
        --trace "$R/trace-$tag-plan.json"
      for seq in 2048 4096 8192; do
        cases=("iso --split 0.5,0.5" "iso --split 0.65,0.35")
        # Ladder is checked against the float64 host reference (host work, 40 s at 8k
        # tokens): one target, up to 4k tokens.
        [ "$target" = h100x8 ] && [ "$seq" -le 4096 ] && cases+=("ladder")
        for s in "${cases[@]}"; do
          name=$(echo "$s" | sed -e 's/--split //' -e 's/[^a-z0-9.]\+/-/g')
          # shellcheck disable=SC2086
          step "validate-$tag-$seq-$name" 150 "$TPO" validate --backend cuda --comm emulated \
            --model "$model" --hardware "$HOST_HW" --emulate "$target" --tp "$tp" --seq "$seq" \
            "${popt[@]}" --layers 2 --repeat 5 --strategy $s \
            --json "$R/validate-$tag-$seq-$name.json"
        done
      done
    done
  fi
done

# The contention model fitted on this run's Llama-3.1-8B schedules, tested on Llama-2-70B's
# (and the other way round): errors on the cases kept out of each fit, and decisions.
if want calibrate; then
  log "calibrate the contention model on this run's measured schedules"
  profs=()
  for p in "$R"/profile-*.json; do [ -s "$p" ] && profs+=("$p"); done
  # Without this run's profiles only a dry run or an H200 run can take the committed H200 ones
  # (another GPU's runs replayed with an H200's op times would test nothing).
  if [ "${#profs[@]}" = 0 ] && { [ -n "${DRY_RUN:-}" ] || [ "$(basename "$HOST_HW" .json)" = h200x8 ]; }; then
    profs=(configs/profiles/h200-llama3.1-8b-tp2.json configs/profiles/h200-llama2-70b-tp8.json)
  fi
  [ "${#profs[@]}" = 0 ] && SKIP="${SKIP:-} calibrate-" &&
    echo "no profile of this run (and this GPU is no H200): the calibrate steps are skipped" \
      | tee -a "$R/steps.txt"
  # A dry run has no reports of its own: its calibrate steps read the committed 2026-11-29 ones,
  # so that their options are parsed and run for real.
  CAL_REPORTS=$R
  if [ -n "${DRY_RUN:-}" ] && ! ls "$R"/validate-*.json > /dev/null 2>&1; then
    CAL_REPORTS=results/h200/2026-11-29
  fi
  for m in llama3.1-8b llama2-70b; do
    step "calibrate-fit-on-$m" 120 "$TPO" calibrate --reports "$CAL_REPORTS"/validate-*.json \
      --profile "${profs[@]}" --fit-on "$m" --out "$R/calibration-fit-on-$m.json"
    # Jointly with this run's pairwise microbenchmarks and in-schedule fragments.
    step "calibrate-joint-fit-on-$m" 120 "$TPO" calibrate --reports "$CAL_REPORTS"/validate-*.json \
      --profile "${profs[@]}" --fit-on "$m" --fit-microbenchmarks \
      --out "$R/calibration-joint-fit-on-$m.json"
    # On the op durations by class too, with the extra-wave rule (the physical fit of
    # results/h200/calibration/README.md): does it hold on a new run?
    step "calibrate-ops-fit-on-$m" 120 "$TPO" calibrate --reports "$CAL_REPORTS"/validate-*.json \
      --profile "${profs[@]}" --fit-on "$m" --fit-ops --wave-rule extra-wave \
      --out "$R/calibration-ops-fit-on-$m.json"
    # The shipped recipe (2026-12-04): the comm kernel's HBM draw measured in the profile.
    step "calibrate-measured-hbm-fit-on-$m" 120 "$TPO" calibrate --reports "$CAL_REPORTS"/validate-*.json \
      --profile "${profs[@]}" --fit-on "$m" --fit-ops --wave-rule extra-wave \
      --comm-hbm-per-cta profile --out "$R/calibration-measured-hbm-fit-on-$m.json"
  done
  # h200x8's shipped block, nothing fitted, on every case of this run (none was in its fit):
  # as shipped, and with the comm kernel's HBM draw measured in this run's profiles. (The
  # committed reports of a dry run need their untimed copies fitted: on the 8B cases, as the
  # block was.)
  chk=()
  [ "$CAL_REPORTS" = "$R" ] || chk=(--fit-on llama3.1-8b)
  step "calibrate-check-h200x8-block" 120 "$TPO" calibrate --reports "$CAL_REPORTS"/validate-*.json \
    --profile "${profs[@]}" --params-from h200x8 "${chk[@]}" --ops \
    --out "$R/calibration-check-h200x8-block.json"
  step "calibrate-check-h200x8-block-measured-hbm" 120 "$TPO" calibrate \
    --reports "$CAL_REPORTS"/validate-*.json --profile "${profs[@]}" --params-from h200x8 \
    "${chk[@]}" --comm-hbm-per-cta profile --out "$R/calibration-check-h200x8-block-measured-hbm.json"
fi

finish
[ "$FAILED" = 0 ]
