#!/usr/bin/env bash
# GPU test (label gpu): the CUDA runtime and profiler end to end through the CLI, on the tiny
# test model. Every strategy runs on the GPU with emulated communication and must match its
# reference (strategies that change the model) or none's output (the others; validate exits 1 on
# a wrong result); a CUDA profile must be usable by simulate.
# Without a CUDA device: "skipped: no CUDA device", exit 77 (CTest: skipped).
#   cli_gpu.sh TPO_BINARY TEST_DATA_DIR
set -u
TPO=$1
DATA=$2
# DRY_RUN=1: run every command anyway on a machine without a GPU, to catch arguments the CLI
# refuses before device time is spent (tests/lib/checks.sh).
gpus() { [ -n "${DRY_RUN:-}" ] && echo 1 || nvidia-smi -L | grep -c '^GPU'; }
if [ -z "${DRY_RUN:-}" ] && ! nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: no CUDA device"
  exit 77
fi
# Each check well under the device check's limit for this script (one hang fails its check only).
CHECK_TIMEOUT=${CHECK_TIMEOUT:-90}
. "$(dirname "$0")/../lib/checks.sh"
M="$DATA/tiny_model.json"
for s in "none" "iso --split 0.4,0.6" "iso --chunks 3" "ladder" "ladder --ladder-layers 1" \
  "gemm-split" "parallel-block" "iso+ladder"; do
  check "validate cuda emulated: $s" "$TPO" validate --backend cuda --comm emulated --model "$M" \
    --hardware h100x8 --tp 2 --seq 192 --layers 2 --repeat 2 --strategy $s
done
check "validate cuda emulated: microbatch, batch 2" "$TPO" validate --backend cuda --comm emulated \
  --model "$M" --hardware h100x8 --tp 2 --batch 2 --seq 96 --layers 2 --repeat 2 --strategy microbatch
check "validate cuda emulated: decode" "$TPO" validate --backend cuda --comm emulated --model "$M" \
  --hardware h100x8 --tp 2 --phase decode --batch 4 --seq 160 --layers 2 --repeat 2 --strategy gemm-split
check "validate cuda emulated: prefill after a cached prefix" "$TPO" validate --backend cuda \
  --comm emulated --model "$M" --hardware h100x8 --tp 2 --seq 128 --context 64 --layers 2 \
  --repeat 2 --strategy iso --json "$TMP/v.json"
check "validate json says emulated" grep -q "EMULATED COMMUNICATION" "$TMP/v.json"
# Gemma's shape of layer on the GPU: GeGLU, and a sliding window of 48 on the first layer that
# the prompt and context reach past (both ran on the CPU only before 2026-12-03).
W="$TMP/tiny-gelu-window.json"
sed -e 's/"vocab_size": 1000,/"vocab_size": 1000, "hidden_act": "gelu", "sliding_window": 48, "layer_types": ["sliding_attention", "full_attention"],/' \
  "$M" > "$W"
check "validate cuda emulated: GeGLU and a sliding window, iso after a prefix" "$TPO" validate \
  --backend cuda --comm emulated --model "$W" --hardware h100x8 --tp 2 --seq 128 --context 64 \
  --layers 2 --repeat 2 --strategy iso
check "validate cuda emulated: GeGLU and a sliding window, decode" "$TPO" validate --backend cuda \
  --comm emulated --model "$W" --hardware h100x8 --tp 2 --phase decode --batch 3 --seq 100 \
  --layers 2 --repeat 2 --strategy none
check "validate cuda emulated: GeGLU and a sliding window, cuBLAS attention" "$TPO" validate \
  --backend cuda --comm emulated --model "$W" --hardware h100x8 --tp 2 --seq 128 --context 64 \
  --layers 2 --repeat 2 --strategy iso --attention cublas
check "validate cuda emulated: a sliding window in decode, cuBLAS attention" "$TPO" validate \
  --backend cuda --comm emulated --model "$W" --hardware h100x8 --tp 2 --phase decode --batch 3 \
  --seq 100 --layers 2 --repeat 2 --strategy none --attention cublas
# With cuDNN required (device-check.sh, where the build found it), its window path must run:
# --attention auto would fall back to cuBLAS quietly if cuDNN could not plan a windowed shape.
if [ "${TPO_REQUIRE_CUDNN:-0}" = 1 ]; then
  check "validate cuda emulated: a sliding window, cuDNN attention" "$TPO" validate \
    --backend cuda --comm emulated --model "$W" --hardware h100x8 --tp 2 --seq 128 --context 64 \
    --layers 2 --repeat 2 --strategy iso --attention cudnn
fi
# Gemma's attention scores (since 2026-12-04): its own scale and Gemma-2's soft cap, tight
# enough to bite on these scores, with the window above; each kernel against the reference.
G="$TMP/tiny-gemma2-scores.json"
sed -e 's/"vocab_size": 1000,/"vocab_size": 1000, "query_pre_attn_scalar": 100, "attn_logit_softcapping": 0.5,/' \
  "$W" > "$G"
check "validate cuda emulated: Gemma's scale and soft cap, cuBLAS attention" "$TPO" validate \
  --backend cuda --comm emulated --model "$G" --hardware h100x8 --tp 2 --seq 128 --context 64 \
  --layers 2 --repeat 2 --strategy iso --attention cublas
if [ "${TPO_REQUIRE_CUDNN:-0}" = 1 ]; then
  check "validate cuda emulated: Gemma's scale and soft cap, cuDNN attention" "$TPO" validate \
    --backend cuda --comm emulated --model "$G" --hardware h100x8 --tp 2 --seq 128 --context 64 \
    --layers 2 --repeat 2 --strategy iso --attention cudnn
fi
# The rest of a layer as users run it (since 2026-12-04): biases on every GEMM (the cuBLASLt
# epilogue; o_proj's and down's on rank 0), per-head query and key norms (Qwen3), Gemma's
# post-norms, and half of each head rotated (partial rotary).
X="$TMP/tiny-everything.json"
sed -e 's/"vocab_size": 1000,/"vocab_size": 1000, "attention_bias": true, "mlp_bias": true, "qk_norm": true, "post_norms": true, "partial_rotary_factor": 0.5,/' \
  "$M" > "$X"
check "validate cuda emulated: biases, q/k norms, post-norms, partial rotary; iso after a prefix" \
  "$TPO" validate --backend cuda --comm emulated --model "$X" --hardware h100x8 --tp 2 --seq 128 \
  --context 64 --layers 2 --repeat 2 --strategy iso
check "validate cuda emulated: the same in decode, parallel block" "$TPO" validate --backend cuda \
  --comm emulated --model "$X" --hardware h100x8 --tp 2 --phase decode --batch 3 --seq 100 \
  --layers 2 --repeat 2 --strategy parallel-block
# The add and norm apart (two kernels), and the all-reduce that adds and normalizes (the add
# after the collective on the comm stream), with post-norms: written 2026-12-04, never run.
check "validate cuda emulated: the add and norm apart, iso" "$TPO" validate --backend cuda \
  --comm emulated --model "$X" --hardware h100x8 --tp 2 --seq 128 --layers 2 --repeat 2 \
  --strategy iso --add-norm separate
check "validate cuda emulated: all-reduces that add and normalize, iso" "$TPO" validate \
  --backend cuda --comm emulated --model "$X" --hardware h100x8 --tp 2 --seq 128 --layers 2 \
  --repeat 2 --strategy iso --allreduce-fusion add-norm
check "validate cuda emulated: the same, ladder on the last layer" "$TPO" validate --backend cuda \
  --comm emulated --model "$X" --hardware h100x8 --tp 2 --seq 128 --layers 2 --repeat 2 \
  --strategy ladder --ladder-layers 1 --allreduce-fusion add-norm
# The embedding and LM head (--embed-head): token ids in, each request's logits out. On the GPU
# only strategies that change the model are checked against the float64 reference (the others
# against none's output, which shares these kernels): ladder and parallel-block here, so a wrong
# lookup, final norm, LM head or gather fails. Emulated: rank 0's vocabulary slice, the gather a
# copy.
check "validate cuda emulated: embedding and LM head, ladder, batch 3" "$TPO" validate \
  --backend cuda --comm emulated --model "$M" --hardware h100x8 --tp 2 --batch 3 --seq 96 \
  --layers 2 --repeat 2 --strategy ladder --embed-head
check "validate cuda emulated: embedding and LM head whole on the GPU, decode, parallel block" \
  "$TPO" validate --backend cuda --comm emulated --model "$M" --hardware h100x8 --tp 2 \
  --phase decode --batch 4 --seq 100 --layers 2 --repeat 2 --strategy parallel-block \
  --embed-head --vocab replicated
check "validate cuda nccl: embedding and LM head at TP 1, the norm apart, ladder" "$TPO" validate \
  --backend cuda --comm nccl --model "$M" --hardware h100x8 --tp 1 --batch 2 --seq 64 --layers 2 \
  --repeat 2 --strategy ladder --embed-head --add-norm separate
# The NCCL embedding all-reduce and logits all-gather need two GPUs.
if [ "$(gpus)" -ge 2 ]; then
  check "validate cuda nccl: embedding and LM head at TP 2, ladder" "$TPO" validate \
    --backend cuda --comm nccl --model "$M" --hardware h100x8 --tp 2 --batch 3 --seq 96 \
    --layers 2 --repeat 2 --strategy ladder --embed-head
fi
check "validate cuda nccl: TP 1 (one GPU, no all-reduce)" "$TPO" validate --backend cuda \
  --comm nccl --model "$M" --hardware h100x8 --tp 1 --seq 128 --layers 2 --repeat 2 --strategy iso
# More ranks than GPUs: exit 1 with a message saying what to do, not a crash.
nccl_tp2_refused() {
  local out rc=0
  out=$("$TPO" validate --backend cuda --comm nccl --model "$M" --hardware h100x8 --tp 2 \
    --seq 128 --strategy iso 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = 1 ] && grep -q "needs 2 GPUs" <<< "$out"
}
if [ "$(gpus)" -lt 2 ]; then
  check "validate cuda nccl: TP 2 on one GPU is refused" nccl_tp2_refused
fi
# One process per rank under mpirun: the NCCL unique id goes over MPI (one GPU: TP 1).
if command -v mpirun > /dev/null && "$TPO" --version | grep -q " mpi"; then
  check "mpirun -np 1 validate cuda nccl --mpi: TP 1" "${MPIRUN[@]}" -np 1 "$TPO" validate \
    --backend cuda --comm nccl --mpi --model "$M" --hardware h100x8 --tp 1 --seq 128 \
    --layers 2 --repeat 2 --strategy iso
fi
# A profile is labelled with this GPU's hardware file (tpo refuses another GPU's): HOST_HW, else
# by the GPU's name.
HW=${HOST_HW:-$("$(dirname "$0")/../../validate/host-hardware.sh")}
if [ -n "$HW" ]; then
  check "profile cuda (tiny, quick) as $HW" "$TPO" profile --backend cuda --model "$M" --tp 2 \
    --hardware "$HW" --quick --max-tokens 256 --reps 3 --quiet --out "$TMP/p.json"
  check "simulate with the cuda profile" "$TPO" simulate --model "$M" --hardware "$HW" --tp 2 \
    --seq 256 --strategy iso --profile "$TMP/p.json"
else
  echo "SKIPPED: profile cuda: no shipped hardware file for this GPU; set HOST_HW to one"
fi
finish "GPU CLI"
