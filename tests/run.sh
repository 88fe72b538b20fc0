#!/usr/bin/env bash
# Run every check binary (or tests/scripts/check_*.sh suite) given, print
# one line per suite and a total.
# Logs of each suite go to $B/test-logs/<suite>.log.  Exit 1 if any test failed.
set -u
B=${B:-build}
logdir="$B/test-logs"
mkdir -p "$logdir"
passed=0 failed=0 broken=0
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60}
export ROVER_BIN_DIR=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
export ROVER_SQL_DIR=${ROVER_SQL_DIR:-$(pwd)/sql}
export B
for t in "$@"; do
  name=${t#"$B"/tests/}
  name=${name#tests/}
  log="$logdir/${name//\//_}.log"
  start=$(date +%s)
  "$t" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [[ $t == *.sh ]]; then
    # A shell suite: one "ok - ..." or "not ok - ..." line per check.
    n=$(grep -c -E '^(not )?ok ' "$log")
    bad=$(grep -c -E '^not ok ' "$log")
    passed=$((passed + n - bad)); failed=$((failed + bad))
    if [ "$bad" -gt 0 ] || [ "$rc" -ne 0 ] || [ "$n" -eq 0 ]; then
      echo "FAIL $name: $bad of $n checks failed (exit $rc, ${secs}s)"
      { grep -E '^not ok ' "$log" || tail -20 "$log"; } | head -20 | sed 's/^/    /'
      [ "$bad" -eq 0 ] && failed=$((failed + 1))
    else
      echo "ok   $name: $n checks (${secs}s)"
    fi
    # A suite that could not test something says so here, not only in its log.
    grep -E '^SKIP: ' "$log" | sort -u | sed 's/^/    /'
    continue
  fi
  line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$log" | tail -1)
  if [ -z "$line" ]; then
    echo "FAIL $name: no check summary (exit $rc), see $log"
    tail -20 "$log" | sed 's/^/    /'
    broken=$((broken + 1)); failed=$((failed + 1))
    continue
  fi
  n=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
  f=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")
  e=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")
  bad=$((f + e))
  passed=$((passed + n - bad)); failed=$((failed + bad))
  if [ "$bad" -gt 0 ] || [ "$rc" -ne 0 ]; then
    echo "FAIL $name: $line (${secs}s)"
    grep -E ':[EF]:' "$log" | head -20 | sed 's/^/    /'
    [ "$bad" -eq 0 ] && failed=$((failed + 1))
  else
    echo "ok   $name: $n checks (${secs}s)"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
