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
echo "exit codes (main, differential, kueue): ${codes[*]}"
all_none=1
for code in "${codes[@]}"; do
  [[ $code -eq 0 || $code -eq 5 ]] || exit 1
  [[ $code -eq 5 ]] || all_none=0
done
[[ $all_none -eq 0 ]] || exit 5
