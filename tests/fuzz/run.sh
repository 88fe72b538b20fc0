#!/usr/bin/env bash
# Run libFuzzer harnesses: tests/fuzz/run.sh build/fuzz/fuzz_wire ...
# Each runs FUZZ_SECONDS (default 300) from its seeds in
# tests/fuzz/corpus/<name>/ (read only: new inputs go to a temp folder) and
# prints one "ok - ..." or "not ok - ..." line.  A crash leaves its input in
# build/fuzz/artifacts/ (the line names it).  Exit 1 when any failed.
set -u
secs=${FUZZ_SECONDS:-300}
artifacts=build/fuzz/artifacts
mkdir -p "$artifacts"
rc=0
for bin in "$@"; do
  name=$(basename "$bin")
  seeds="tests/fuzz/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  log="$artifacts/$name.log"
  # One process on a shared 2-core machine; inputs up to 64 KiB (larger
  # bodies add nothing the parsers do not already see in pieces).
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$name-" \
    -dict=tests/fuzz/json.dict "$work" "$seeds" >"$log" 2>&1
  st=$?
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  if [ "$st" -eq 0 ]; then
    echo "ok - $name: ${runs:-0} inputs in ${secs} s"
  else
    echo "not ok - $name: exit $st after ${runs:-?} inputs; see $log"
    grep -E "ERROR|SUMMARY|fuzz_wire:|Test unit written" "$log" | head -8 | sed 's/^/    /'
    rc=1
  fi
  rm -rf "$work"
done
exit $rc
