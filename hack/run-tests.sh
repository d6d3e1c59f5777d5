#!/usr/bin/env bash
# Run the test suites, the differential one beside the others: it mostly waits for its
# operators to settle, so on two cores it costs the others little and saves its own time.
# Its output goes to differential.log and is printed after theirs. Fails if either run
# fails; a run that selected no test (pytest's exit 5: PYTEST_ARGS chose only the other
# kind) counts as passed, unless both selected none.
#   usage: hack/run-tests.sh PYTHON [PYTEST_ARGS...]
set -uo pipefail
python=$1
shift
log=differential.log
"$python" -m pytest -ra -m differential -p no:cacheprovider "$@" >"$log" 2>&1 &
differential=$!
"$python" -m pytest -ra -m "not differential" "$@"
rest=$?
wait "$differential"
diff=$?
echo "---- the differential suite (run beside the others; $log) ----"
cat "$log"
if [[ $rest -eq 5 && $diff -eq 5 ]]; then
  exit 5
fi
for code in "$rest" "$diff"; do
  [[ $code -eq 0 || $code -eq 5 ]] || exit 1
done
