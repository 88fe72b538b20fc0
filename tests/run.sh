#!/usr/bin/env bash
# Run every check binary (or tests/scripts/check_*.sh suite) given, print
# one line per suite, each skip under its suite, and a total:
# "N passed, N failed, N skipped".
# Logs of each suite go to $B/test-logs/<suite>.log.  Exit 1 if any test failed.
#
# A test that cannot run here prints a line "SKIP: what: why" (check suites
# through RV_TEST_SKIP, tests/lib/testutil.h; shell suites through skip in
# tests/web/lib.sh, with an "ok - # SKIP" line).  Each distinct such line
# is one skipped test: counted as skipped, not passed, and shown as
# "    SKIP: suite: what: why".  Under CI=true the skips of what CI
# installs fail in the suite itself (see README.md, Tests).  A failing
# check suite also shows the lines its tests printed starting "diag: "
# (where the time went, what a daemon said): the log may not outlive CI.
set -u
B=${B:-build}
logdir="$B/test-logs"
mkdir -p "$logdir"
passed=0 failed=0 skipped=0
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-60}
export ROVER_BIN_DIR=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
export ROVER_SQL_DIR=${ROVER_SQL_DIR:-$(pwd)/sql}
export B

# count N BAD SKIPS: add a suite's N checks, BAD of them failed and SKIPS
# skipped, to the totals.  A test that printed SKIP and then failed is a
# failure, so skips never eat into the failures.
count() {
  local n=$1 bad=$2 sk=$3
  [ "$sk" -gt $((n - bad)) ] && sk=$((n - bad))
  [ "$sk" -lt 0 ] && sk=0
  passed=$((passed + n - bad - sk)); failed=$((failed + bad)); skipped=$((skipped + sk))
}

# show_skips NAME LOG: each distinct skip of the suite, under its line.
show_skips() {
  grep -E '^SKIP: ' "$2" | sort -u | while IFS= read -r l; do
    printf '    SKIP: %s: %s\n' "$1" "${l#SKIP: }"
  done
}

for t in "$@"; do
  name=${t#"$B"/tests/}
  name=${name#tests/}
  log="$logdir/${name//\//_}.log"
  start=$(date +%s)
  "$t" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  sk=$(grep -E '^SKIP: ' "$log" | sort -u | wc -l)
  note=
  [ "$sk" -gt 0 ] && note=", $sk skipped"
  if [[ $t == *.sh ]]; then
    # A shell suite: one "ok - ..." or "not ok - ..." line per check.
    n=$(grep -c -E '^(not )?ok ' "$log")
    bad=$(grep -c -E '^not ok ' "$log")
    count "$n" "$bad" "$sk"
    if [ "$bad" -gt 0 ] || [ "$rc" -ne 0 ] || [ "$n" -eq 0 ]; then
      echo "FAIL $name: $bad of $n checks failed (exit $rc, ${secs}s)"
      { grep -E '^not ok ' "$log" || tail -20 "$log"; } | head -20 | sed 's/^/    /'
      [ "$bad" -eq 0 ] && failed=$((failed + 1))
    else
      echo "ok   $name: $n checks$note (${secs}s)"
    fi
    show_skips "$name" "$log"
    continue
  fi
  line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$log" | tail -1)
  if [ -z "$line" ]; then
    echo "FAIL $name: no check summary (exit $rc), see $log"
    tail -20 "$log" | sed 's/^/    /'
    failed=$((failed + 1))
    continue
  fi
  n=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
  f=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")
  e=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")
  bad=$((f + e))
  count "$n" "$bad" "$sk"
  if [ "$bad" -gt 0 ] || [ "$rc" -ne 0 ]; then
    echo "FAIL $name: $line (${secs}s)"
    grep -E ':[EF]:' "$log" | head -20 | sed 's/^/    /'
    grep -E '^diag: ' "$log" | head -20 | sed 's/^/    /'
    [ "$bad" -eq 0 ] && failed=$((failed + 1))
  else
    echo "ok   $name: $n checks$note (${secs}s)"
  fi
  show_skips "$name" "$log"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
