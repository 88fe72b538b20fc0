#!/usr/bin/env bash
# Run benchmarks: tests/bench/run.sh [name].  Each prints progress on stderr
# and ends with one line "bench=<name> key=value ...".
set -euo pipefail
B=${B:-build}
export ROVER_BIN_DIR=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
export ROVER_SQL_DIR=${ROVER_SQL_DIR:-$(pwd)/sql}
names=()
if [ -n "${1:-}" ]; then
  names=("$1")
else
  for f in tests/bench/*.c tests/bench/*.sh; do
    n=$(basename "$f"); n=${n%.*}
    [ "$n" = run ] && continue
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
