#!/usr/bin/env bash
# make test: every suite, each with its own closing line, then one total.
#   unit (swift test), integration (pytest against Bumble's controllers, and
#   beside it, at the same time, the scenarios marked for both controllers on
#   Root Canal: its ~45 ms per command leaves the CPU idle), kernel (qemu VM),
#   fuzz smoke (every libFuzzer harness for a few seconds, when built).
set -uo pipefail
cd "$(dirname "$0")/.."
VPY=${VPY:-.venv/bin/python}
LOGS=.build/test-logs
mkdir -p "$LOGS"
pass=0; fail=0; rc=0

count() { # suite-name log exit-code
    local name=$1 log=$2 st=$3 p=0 f=0 line
    case $name in
    unit)
        line=$(grep -E "Test run with [0-9]+ tests" "$log" | tail -n 1)
        p=$(echo "$line" | sed -nE 's/.*Test run with ([0-9]+) tests.*/\1/p'); p=${p:-0}
        f=$(grep -cE "^✘ Test " "$log" || true)
        p=$((p - f)) ;;
    integration*)
        line=$(grep -E "[0-9]+ (passed|failed)" "$log" | tail -n 1)
        p=$(echo "$line" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+" || true); p=${p:-0}
        f=$(echo "$line" | grep -oE "[0-9]+ (failed|errors?)" | awk '{s+=$1} END {print s+0}') ;;
    fuzz)
        # one line per harness: "NAME  ok ..." or "NAME  FAILED ..."
        p=$(grep -aE "^[a-z0-9-]+ +ok " "$log" | wc -l)
        f=$(grep -aE "^[a-z0-9-]+ +FAILED " "$log" | wc -l) ;;
    *)
        line=$(grep -E "^[0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
        p=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p'); p=${p:-0}
        f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p'); f=${f:-0} ;;
    esac
    # A suite that failed without saying so still counts as a failure.
    if [ "$st" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    pass=$((pass + p)); fail=$((fail + f))
    [ "$st" = 0 ] || rc=1
    echo "-- $name: $p passed, $f failed (exit $st)"
}

suite() { # name command...
    local name=$1; shift
    echo "== $name: $*"
    "$@" >"$LOGS/$name.log" 2>&1
    local st=$?
    tail -n 12 "$LOGS/$name.log" | grep -av "^grep: "
    count "$name" "$LOGS/$name.log" "$st"
}

suite unit swift test
# Root Canal's half in the background, its report after Bumble's.
integration() { env ATTLED_BIN="$PWD/.build/debug/attled" "$VPY" -m pytest -q -p no:cacheprovider "$@" Tests/integration; }
integration -k rootcanal >"$LOGS/integration-rootcanal.log" 2>&1 &
rc_pid=$!
suite integration-bumble integration -k "not rootcanal"
wait $rc_pid
rc_st=$?
echo "== integration-rootcanal: pytest -k rootcanal Tests/integration (run beside integration-bumble)"
tail -n 12 "$LOGS/integration-rootcanal.log" | grep -av "^grep: "
count integration-rootcanal "$LOGS/integration-rootcanal.log" "$rc_st"
suite kernel Tools/kernelvm/run.sh
if [ -x Fuzz/run.sh ]; then suite fuzz Fuzz/run.sh smoke; fi

echo
echo "logs in $LOGS/"
echo "$pass passed, $fail failed"
exit $rc
