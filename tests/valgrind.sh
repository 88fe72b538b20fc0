#!/usr/bin/env bash
# Run rover-brain under valgrind memcheck on its embedded PostgreSQL, drive
# every route with good and bad input, stop it with SIGTERM and fail on any
# memcheck error or definite leak.  Usage: tests/valgrind.sh (after make).
set -euo pipefail
B=${B:-build}
dir=$(mktemp -d /tmp/rover-vg-XXXXXX)
chmod 755 "$dir"
log="$dir/valgrind.log"
out="$dir/stdout"
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
  for b in /usr/lib/postgresql/*/bin; do
    [ -f "$dir/data/pgdata/postmaster.pid" ] && runuser -u postgres -- "$b/pg_ctl" -D "$dir/data/pgdata" -m immediate stop >/dev/null 2>&1 || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
  --show-leak-kinds=definite --log-file="$log" \
  "$B/bin/rover-brain" --listen 127.0.0.1:0 --data-dir "$dir/data" --sql-dir sql \
  --plan-debounce-ms 0 --log-level warn >"$out" 2>"$dir/stderr" &
pid=$!
for _ in $(seq 1 600); do grep -q 'listening on' "$out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$out")
[ -n "$url" ] || { echo "valgrind: brain did not start"; cat "$dir/stderr"; exit 1; }
c() { curl -s -o /dev/null -w '%{http_code} ' --max-time 30 "$@"; }
uid=$(curl -s --max-time 30 -X POST --data-binary @examples/job.json "$url/v1/jobs" | sed -n 's/.*"uid":"\([^"]*\)".*/\1/p')
[ -n "$uid" ] || { echo "valgrind: could not register the example job"; exit 1; }
c "$url/v1/jobs"; c "$url/v1/jobs/$uid"; c "$url/v1/jobs/nope"
for i in 1 2 3; do
  c -X POST "$url/v1/jobs/$uid/metrics" --data "{\"samples\":[{\"kind\":\"speed\",\"ts\":${i}000,\"speed\":10,\"step\":$i,\"workers\":2,\"ps\":0},{\"kind\":\"node\",\"ts\":${i}000,\"node\":\"worker-0\",\"role\":\"worker\",\"rank\":0,\"cpu\":1.5,\"memory_mb\":900,\"cpu_limit\":2,\"memory_limit_mb\":2048,\"step_time\":0.2}]}"
done
c -X POST "$url/v1/jobs/$uid/metrics" --data '{"samples":[{"kind":"speed","ts":1,"speed":"x"}]}'
c -X POST "$url/v1/jobs/$uid/metrics" --data '{"samples":['
c -X POST "$url/v1/jobs" --data '{"kind":"ElasticJob","metadata":{"name":"Bad"}}'
c -X POST "$url/v1/jobs/$uid/events" --data '{"type":"node_oom","ts":5000,"node":"worker-1","memory_mb":2048,"peak_memory_mb":2040}'
c "$url/v1/jobs/$uid/plan?stage=running&after=999&wait=1"
c "$url/v1/jobs/$uid/plan?stage=oom"; c "$url/v1/jobs/$uid/plans"
c -X POST "$url/v1/cluster/nodes" --data '{"nodes":[{"name":"n1","ts":1,"cpu":8,"memory_mb":1024}]}'
c "$url/v1/cluster"; c "$url/healthz"; c "$url/metrics"; c "$url/v1/openapi.json"
echo
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=
# Valgrind 3.19 does not know pidfd_open (434): common/proc then falls back
# to polling waitpid, and valgrind says so in five lines; anything else fails.
grep -v -e 'unhandled amd64-linux syscall: 434' -e 'write your own handler' \
  -e 'README_MISSING_SYSCALL_OR_IOCTL' -e 'Nevertheless we consider this a bug' \
  -e 'bug_reports.html' "$log" >"$log.errors" || true
if [ "$rc" -ne 0 ] || [ -s "$log.errors" ]; then
  echo "valgrind: rover-brain exit $rc"; cat "$log.errors"; exit 1
fi
echo "valgrind: rover-brain clean (no memcheck errors, no definite leaks)"
