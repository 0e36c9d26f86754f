#!/usr/bin/env bash
# CLI test: `tpo validate --mpi` under mpirun on the CPU — one process per TP rank, MPI
# all-reduce — for several strategies, each checked against its reference by validate
# itself (exit 1 on a wrong result); a process count that is not TP is refused (exit 2).
# Skipped (exit 77) where mpirun cannot start two processes here.
#   mpi_cpu.sh TPO_BINARY TEST_DATA_DIR
set -u
TPO=$1
DATA=$2
M="$DATA/tiny_model.json"
. "$(dirname "$0")/../lib/checks.sh"
if ! command -v mpirun > /dev/null || ! timeout 60 "${MPIRUN[@]}" -np 2 true > /dev/null 2>&1; then
  echo "skipped: mpirun cannot start 2 processes on this machine"
  exit 77
fi
for s in "iso --split 0.25,0.75" "ladder" "parallel-block" "gemm-split"; do
  check "mpirun -np 2 validate --mpi: $s" "${MPIRUN[@]}" -np 2 "$TPO" validate --backend cpu --mpi \
    --model "$M" --hardware cpu-host --tp 2 --seq 128 --repeat 2 --strategy $s
done
check "mpirun -np 2 validate --mpi: decode, microbatch" "${MPIRUN[@]}" -np 2 "$TPO" validate \
  --backend cpu --mpi --model "$M" --hardware cpu-host --tp 2 --phase decode --batch 4 \
  --seq 64 --repeat 2 --strategy microbatch --json "$TMP/v.json"
# The embedding and LM head: the embedding's all-reduce and the logits' MPI_Allgather.
for ph in "--phase decode --batch 3 --seq 40 --strategy ladder" "--seq 64 --batch 2 --strategy iso"; do
  # shellcheck disable=SC2086
  check "mpirun -np 2 validate --mpi --embed-head: $ph" "${MPIRUN[@]}" -np 2 "$TPO" validate \
    --backend cpu --mpi --model "$M" --hardware cpu-host --tp 2 $ph --repeat 2 --embed-head
done
report_ok() {
  grep -q '"measured_on": ".*under MPI (2 processes)' "$TMP/v.json" &&
    grep -q '"comm": "mpi"' "$TMP/v.json" && grep -q '"mpi": true' "$TMP/v.json" &&
    grep -q '"all_correct": true' "$TMP/v.json" && grep -q '"correct": true' "$TMP/v.json"
}
check "the report says MPI and is correct" report_ok
wrong_count() {  # 3 processes for TP 2: exit 2 and a message naming --mpi
  local out rc=0
  out=$("${MPIRUN[@]}" -np 3 "$TPO" validate --backend cpu --mpi --model "$M" --hardware cpu-host \
    --tp 2 --seq 64 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = 2 ] && grep -q -- "--mpi 3 processes: TP is 2" <<< "$out"
}
check "mpirun -np 3 at TP 2 is refused" wrong_count
# Two processes given different arguments after the shared ones (rank 0's, rank 1's): exit 2
# with the message, and no memory corruption or MPI abort.
mixed_refused() {  # message, rank 0's arguments, rank 1's arguments
  local out rc=0
  # shellcheck disable=SC2086
  out=$("${MPIRUN[@]}" -np 1 "$TPO" validate --backend cpu --mpi --hardware cpu-host --tp 2 $2 \
    : -np 1 "$TPO" validate --backend cpu --mpi --hardware cpu-host --tp 2 $3 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = 2 ] && grep -q -- "$1" <<< "$out" && ! grep -q "corruption\|MPI_ABORT" <<< "$out"
}
check "processes given different runs are refused (exit 2), no corruption or hang" \
  mixed_refused "--mpi: the 2 processes were not given the same run" "--model $M --seq 128" \
  "--model $M --seq 64"
without_mpi() {  # mpirun without --mpi: each process would run every rank
  local out rc=0
  out=$("${MPIRUN[@]}" -np 2 "$TPO" validate --backend cpu --model "$M" --hardware cpu-host \
    --tp 2 --seq 64 --json "$TMP/twice.json" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = 2 ] && grep -q -- "but --mpi is not given" <<< "$out" && [ ! -e "$TMP/twice.json" ]
}
check "mpirun without --mpi is refused" without_mpi
check "a file missing on one process: exit 2, said by that rank, no MPI abort" \
  mixed_refused "tpo: rank 1: $TMP/missing.json: cannot open file" "--model $M --seq 64" \
  "--model $TMP/missing.json --seq 64"
resumes() {  # stopped after 2 of a plan's 4 cases, then the same command: 2 read back
  "$TPO" plan --model "$M" --hardware cpu-host --tp 2 --seq 128:256 --layers 1 \
    --json "$TMP/rp.json" > /dev/null || return 1
  local cmd=(validate --backend cpu --mpi --plan "$TMP/rp.json" --alternatives 1 --repeat 1
    --warmup 0 --json "$TMP/r.json")
  "${MPIRUN[@]}" -np 2 -x TPO_VALIDATE_STOP_AFTER=2 "$TPO" "${cmd[@]}" 2>&1
  [ -e "$TMP/r.json.partial" ] && [ ! -e "$TMP/r.json" ] || return 1
  local out
  out=$("${MPIRUN[@]}" -np 2 "$TPO" "${cmd[@]}" 2>&1) || return 1
  echo "$out"
  grep -q "2 of 4 cases measured by an earlier run" <<< "$out" &&
    grep -q '"resumed_cases": 2' "$TMP/r.json" && [ ! -e "$TMP/r.json.partial" ]
}
check "a stopped MPI run resumes where it stopped" resumes
finish MPI
