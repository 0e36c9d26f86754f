# Sourced by the shell tests: a scratch folder removed on exit, `check NAME COMMAND...`
# (prints ok or FAIL with the command's output, and remembers a failure), `finish` (the
# summary line and the exit code), and MPIRUN, the mpirun command line for this machine.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() {  # name, command...
  local name=$1 rc=0
  shift
  "$@" > "$TMP/out.txt" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "ok    $name"
  else
    echo "FAIL  $name (exit $rc)"
    sed 's/^/      /' "$TMP/out.txt"
    fail=1
  fi
}
finish() {
  if [ "$fail" = 0 ]; then echo "all $1 checks passed"; else echo "FAILED"; fi
  exit "$fail"
}
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers often forbid CMA
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
