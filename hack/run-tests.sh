#!/usr/bin/env bash
# Run the test suites in two lanes side by side: the differential suite then the Kueue
# suite (both mostly wait for their operators to settle, so on two cores they cost the
# others little), beside everything else. The side lane's output goes to side-lane.log and
# is printed after the main lane's. Fails if any run fails; a run that selected no test
# (pytest's exit 5: PYTEST_ARGS chose only other kinds) counts as passed, unless all did.
#   usage: hack/run-tests.sh PYTHON [PYTEST_ARGS...]
set -uo pipefail
python=$1
shift
# every process the suites start inherits this mark: what still carries it once the lanes
# have ended was left running (testbed/leftovers.py names it, stops it, and fails the run)
TRAINOP_TEST_RUN="$(date +%s%N)-$$"
export TRAINOP_TEST_RUN
# interrupted (Ctrl-C, killed by a runner's TERM): what the suites started stops too
trap '"$python" -m testbed.leftovers >&2' EXIT
trap 'exit 130' INT TERM
log=side-lane.log
side=("differential" "kueue and not node and not differential")
main="not differential and not (kueue and not node)"
(
  codes=()
  for marks in "${side[@]}"; do
    echo "---- pytest -m '$marks' ----"
    "$python" -m pytest -ra -m "$marks" -p no:cacheprovider "$@"
    codes+=($?)
  done
  echo "${codes[*]}" >"$log.codes"
) >"$log" 2>&1 &
lane=$!
"$python" -m pytest -ra -m "$main" "$@"
codes=($?)
wait "$lane"
codes+=($(cat "$log.codes" 2>/dev/null || echo 1))
rm -f "$log.codes"
echo "---- the side lane (run beside the others; $log) ----"
cat "$log"
"$python" -m testbed.leftovers
left=$?
trap - EXIT
echo "exit codes (main, differential, kueue): ${codes[*]}; left running: $left"
[[ $left -eq 0 ]] || exit 1
all_none=1
for code in "${codes[@]}"; do
  [[ $code -eq 0 || $code -eq 5 ]] || exit 1
  [[ $code -eq 5 ]] || all_none=0
done
[[ $all_none -eq 0 ]] || exit 5
