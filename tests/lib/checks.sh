# Sourced by the shell tests: a scratch folder removed on exit, `check NAME COMMAND...`
# (prints ok or FAIL with the command's output, and remembers a failure), `finish` (the
# summary line and the exit code), and MPIRUN, the mpirun command line for this machine.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
# DRY_RUN=1 (a GPU script on a machine without a GPU): a command that stopped only for want of
# the GPU, or of a file an earlier GPU command would have written, passes as "dry"; one that
# refused its arguments (exit 2: an option renamed, a value out of range) fails as ever.
dry_ok() {  # rc, output file
  [ -n "${DRY_RUN:-}" ] || return 1
  grep -q "No such file or directory" "$2" && return 0
  [ "$1" != 2 ] && grep -qE "no usable CUDA device|skipped: no CUDA device" "$2"
}
# Each check of a program runs under a time limit (CHECK_TIMEOUT seconds, default 300), so that
# one hang (an mpirun, an NCCL start-up) fails that check instead of eating every later one's
# time; a shell function runs as it is.
check() {  # name, command...
  local name=$1 rc=0
  shift
  if declare -F "$1" > /dev/null; then  # a shell function (timeout runs programs only)
    "$@" > "$TMP/out.txt" 2>&1 || rc=$?
  else
    timeout --kill-after=5 "${CHECK_TIMEOUT:-300}" "$@" < /dev/null > "$TMP/out.txt" 2>&1 || rc=$?
  fi
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "(timed out after ${CHECK_TIMEOUT:-300} s)" >> "$TMP/out.txt"
  if [ "$rc" = 0 ]; then
    echo "ok    $name"
  elif dry_ok "$rc" "$TMP/out.txt"; then
    echo "dry   $name (exit $rc: arguments accepted, no GPU here)"
  else
    echo "FAIL  $name (exit $rc)"
    sed 's/^/      /' "$TMP/out.txt"
    fail=1
  fi
}
finish() {
  local dry=""
  [ -n "${DRY_RUN:-}" ] && dry=" (DRY_RUN: arguments only, nothing ran on a GPU)"
  if [ "$fail" = 0 ]; then echo "all $1 checks passed$dry"; else echo "FAILED$dry"; fi
  exit "$fail"
}
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers often forbid CMA
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
