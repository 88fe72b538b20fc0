#!/usr/bin/env bash
# Suite: docker/grafana/rover-dashboard.json against a real database.  A
# brain (embedded PostgreSQL, migrations applied) gets a job, node and speed
# samples and failure events through REST; then every panel's SQL runs in
# psql as Grafana would send it (its time macros replaced by the last 6 h)
# without error, and the panels return what the views hold.  Also: every
# dashboard view of sql/ is on the dashboard, and every panel reads the
# dashboard's PostgreSQL data source variable.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/web/lib.sh
DASH=docker/grafana/rover-dashboard.json

check "the dashboard is JSON with panels" test "$(jq '.panels | length' "$DASH" 2>/dev/null || echo 0)" -gt 0
for v in $(grep -o 'CREATE VIEW v_[a-z_]*' sql/*.sql | awk '{print $3}'); do
  check "the dashboard shows $v" grep -q "FROM $v\b" "$DASH"
done
check "every panel and query reads the \${ds} PostgreSQL data source" test "$(jq '[.panels[] |
  (.datasource, .targets[].datasource) | select(.type != "grafana-postgresql-datasource" or
  .uid != "${ds}")] | length' "$DASH")" = 0

start_brain || { notok "rover-brain starts"; exit 1; }
uid=$(curl -fsS --max-time 10 -X POST "$BRAIN/v1/jobs" --data-binary @examples/job.json | jq -r .uid)
now=$(date +%s%3N)
batch=$(jq -nc --argjson now "$now" '{samples: (
  ([range(0; 6)] | map({kind: "speed", ts: ($now - (6 - .) * 10000), speed: 50, step: ., workers: 2})) +
  ([range(0; 6)] | map({kind: "node", ts: ($now - (6 - .) * 10000), node: "worker-0", role: "worker",
    rank: 0, cpu: 1, memory_mb: 2048, cpu_limit: 4, memory_limit_mb: 8192})))}')
check "samples are stored" test "$(curl -fsS --max-time 10 -X POST "$BRAIN/v1/jobs/$uid/metrics" \
  --data-binary "$batch" | jq .accepted)" = 12
ev=$(jq -nc --argjson now "$now" '{type: "node_failed", ts: $now, node: "worker-1", role: "worker",
  rank: 1, exit_code: 137}')
check "a failure event is stored" curl -fsS --max-time 10 -o /dev/null -X POST "$BRAIN/v1/jobs/$uid/events" --data-binary "$ev"

user=$(id -un)
[ "$(id -u)" -eq 0 ] && user=postgres
db="host=$WEB_TMP/brain dbname=rover user=$user"
to=$(date +%s)
from=$((to - 6 * 3600))
n=$(jq '.panels | length' "$DASH")
for i in $(seq 0 $((n - 1))); do
  title=$(jq -r ".panels[$i].title" "$DASH")
  sql=$(jq -r ".panels[$i].targets[0].rawSql" "$DASH" |
    sed -e "s/\\\$__unixEpochFrom()/$from/g" -e "s/\\\$__unixEpochTo()/$to/g")
  if out=$(psql "$db" -X -q -A -t -v ON_ERROR_STOP=1 -c "$sql" 2>&1); then
    rows=$(printf '%s' "$out" | grep -c .)
    check "panel \"$title\": its SQL runs and returns rows ($rows)" test "$rows" -gt 0
  else
    notok "panel \"$title\": its SQL runs: $out"
  fi
done
check "the speed panel plots the job's 6 samples" test "$(psql "$db" -X -A -t -c "$(jq -r \
  '.panels[] | select(.title == "Samples/s per job") | .targets[0].rawSql' "$DASH" |
  sed -e "s/\\\$__unixEpochFrom()/$from/g" -e "s/\\\$__unixEpochTo()/$to/g")" | grep -c .)" = 6
check "the waste panel says 3 cores unused" test "$(psql "$db" -X -A -t -c "$(jq -r \
  '.panels[] | select(.title | startswith("CPU allocated but unused")) | .targets[0].rawSql' "$DASH")")" = 3.00
exit $failed
