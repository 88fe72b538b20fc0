#!/usr/bin/env bash
# Run benchmarks: tests/bench/run.sh [name|all].  Each prints progress on
# stderr and ends with one line "bench=<name> key=value ...".  With no name,
# every benchmark but the long ones (LONG, named on stderr); "all" runs those
# too.
set -euo pipefail
B=${B:-build}
export ROVER_BIN_DIR=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
export ROVER_SQL_DIR=${ROVER_SQL_DIR:-$(pwd)/sql}
LONG=" soak " # 30 minutes and more: only by name, or with "all"
names=()
if [ -n "${1:-}" ] && [ "$1" != all ]; then
  names=("$1")
else
  for f in tests/bench/*.c tests/bench/*.sh; do
    n=$(basename "$f"); n=${n%.*}
    [ "$n" = run ] && continue
    if [ -z "${1:-}" ] && [[ $LONG == *" $n "* ]]; then
      echo "bench: $n not run (long): make bench BENCH=$n, or BENCH=all" >&2
      continue
    fi
    names+=("$n")
  done
fi
status=0
for n in "${names[@]}"; do
  if [ -x "$B/bench/$n" ]; then
    "$B/bench/$n" || status=1
  elif [ -f "tests/bench/$n.sh" ]; then
    bash "tests/bench/$n.sh" || status=1
  else
    echo "error: no benchmark named \"$n\" (have: $(ls tests/bench | grep -v run.sh | sed 's/\..*//' | sort -u | tr '\n' ' '))" >&2
    exit 2
  fi
done
exit $status
