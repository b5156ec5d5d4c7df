#!/usr/bin/env bash
# `make test`: every test but the speed-measuring ones (`timing`, tests/tiers.py) on pytest-xdist workers, and
# the speed-measuring ones beside them in one process at real-time priority (`chrt -f 1`, inherited by the
# servers, clients and the sshd they start), so that the rest of the suite cannot stall a server or a client
# between two tokens. Where real-time priority is refused (not root, no CAP_SYS_NICE), they run alone afterwards.
# The timing tier is pinned to the last core (TOOLKIT_TEST_TIMING_CPU): its real-time start-ups then never take
# every core at once, and the few tests of the rest that judge speed (the notebooks' verdicts) pin themselves to the
# other cores. TIMING_JOBS > 1 runs the timing tier on that many xdist workers, a file to each, unpinned: two
# real-time trees beside each other failed a fan-out and a diagnosis test, so `make test` passes 1.
# Usage: scripts/test_tiers.sh PYTHON JOBS TIMING_JOBS. Exit status: the worse of the two runs.
set -u
python=$1 jobs=$2 timing_jobs=$3
rest=("$python" -m pytest -n "$jobs" --dist loadgroup -m "not timing")
timing=("$python" -m pytest -m timing -p no:cacheprovider)

if ! chrt -f 1 true 2>/dev/null; then
  echo "test_tiers: real-time priority is refused here: the timing tests run after the others, alone"
  "${rest[@]}"; rc=$?
  "${timing[@]}" || rc=$?
  exit "$rc"
fi

log=$(mktemp "${TMPDIR:-/tmp}/timing-tier.XXXXXX.log")
[ "$timing_jobs" -gt 1 ] && timing+=(-n "$timing_jobs" --dist loadfile)
# The timing tier on the last core: its real-time start-ups (a simulator's imports, 0.3 s of CPU each) then never
# take every core at once; the notebooks that judge speed run on the others (TOOLKIT_TEST_TIMING_CPU).
pin=()
cpus=$(nproc)
if [ "$cpus" -gt 1 ] && [ "$timing_jobs" -eq 1 ] && command -v taskset >/dev/null; then
  pin=(taskset -c "$((cpus - 1))")
  export TOOLKIT_TEST_TIMING_CPU=$((cpus - 1))
fi
"${pin[@]}" chrt -f 1 "${timing[@]}" >"$log" 2>&1 &
timing_pid=$!
# Ctrl-C or a kill of make ends both runs (pytest tears down on SIGINT: its servers stop).
trap 'kill -INT "$timing_pid" 2>/dev/null; wait "$timing_pid"; cat "$log"; exit 130' INT TERM
echo "test_tiers: the timing tests run beside these, at real-time priority; their output follows (live: $log)"
"${rest[@]}"; rc=$?
wait "$timing_pid"; timing_rc=$?
trap - INT TERM
echo; echo "test_tiers: the timing tests, run beside the others (chrt -f 1):"
cat "$log"
rm -f "$log"
[ "$rc" -ne 0 ] || rc=$timing_rc
exit "$rc"
