#!/usr/bin/env bash
# Rover demo (make demo runs it after installing packages and building):
# start rover-brain on its embedded PostgreSQL in var/demo, register
# examples/job.json, show its create-stage plan, post a few metrics samples,
# show the plan history, and leave the brain running in the background.
# Safe to run again: a brain already running from var/demo is reused, and a
# job left running by an earlier demo is finished first.
#   ROVER_DEMO_PORT  port to listen on (default 8080)
set -euo pipefail
cd "$(dirname "$0")/.."

port=${ROVER_DEMO_PORT:-8080}
dir=var/demo
url=http://127.0.0.1:$port
bin=build/bin/rover-brain
pidfile=$dir/brain.pid
log=$dir/brain.log
job=examples/job.json

say() { printf '\n== %s\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }
pretty() { python3 -m json.tool; }
# json FIELD: read a JSON document on stdin, print one field (dotted path).
json() {
	python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$1"
}
now_ms() { date +%s%3N; }

[ -x "$bin" ] || die "no $bin: run make first"
command -v curl >/dev/null || die "curl is missing (scripts/install-deps.sh installs it)"
mkdir -p "$dir"

running=0
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
	if curl -sf "$url/healthz" >/dev/null; then
		running=1
		say "rover-brain already running (pid $(cat "$pidfile")), reusing it"
	else
		die "a brain from $pidfile (pid $(cat "$pidfile")) runs but does not answer on $url; stop it with: kill $(cat "$pidfile")"
	fi
fi

if [ "$running" = 0 ]; then
	if curl -s -o /dev/null "$url/healthz"; then
		die "something else already listens on $url; set ROVER_DEMO_PORT"
	fi
	say "starting rover-brain on $url (embedded PostgreSQL in $dir)"
	# The brain prints "listening on ..." on stdout and logs on stderr.
	nohup "$bin" --listen "127.0.0.1:$port" --data-dir "$dir" >>"$log" 2>&1 </dev/null &
	echo $! >"$pidfile"
	for _ in $(seq 1 120); do
		curl -sf "$url/healthz" >/dev/null && break
		kill -0 "$(cat "$pidfile")" 2>/dev/null || { tail -20 "$log" >&2; die "rover-brain exited, see $log"; }
		sleep 0.5
	done
	curl -sf "$url/healthz" >/dev/null || { tail -20 "$log" >&2; die "rover-brain not healthy after 60 s, see $log"; }
	echo "pid $(cat "$pidfile"), log $log"
fi

say "GET /healthz"
curl -s "$url/healthz" | pretty

say "POST /v1/jobs  (register $job)"
resp=$(mktemp)
trap 'rm -f "$resp"' EXIT
code=$(curl -s -o "$resp" -w '%{http_code}' -H 'Content-Type: application/json' \
	--data-binary "@$job" "$url/v1/jobs")
if [ "$code" = 409 ]; then
	# The name is taken by a job an earlier demo left running: finish it.
	name=$(json metadata.name <"$job")
	old=$(curl -s "$url/v1/jobs?status=running" |
		python3 -c 'import json, sys
for j in json.load(sys.stdin)["jobs"]:
    if j["name"] == sys.argv[1] and j["namespace"] == "default":
        print(j["uid"])' "$name")
	[ -n "$old" ] || die "registration conflicts but no running job named $name was found"
	echo "a job named $name is still running ($old): finishing it"
	curl -sf -H 'Content-Type: application/json' \
		-d "{\"type\":\"job_finished\",\"ts\":$(now_ms)}" "$url/v1/jobs/$old/events" >/dev/null
	code=$(curl -s -o "$resp" -w '%{http_code}' -H 'Content-Type: application/json' \
		--data-binary "@$job" "$url/v1/jobs")
fi
[ "$code" = 201 ] || { cat "$resp" >&2; echo >&2; die "registration failed with HTTP $code"; }
uid=$(json uid <"$resp")
echo "job uid: $uid"

say "create-stage plan (GET /v1/jobs/$uid/plan?stage=create)"
curl -s "$url/v1/jobs/$uid/plan?stage=create" | pretty
echo "reason: $(curl -s "$url/v1/jobs/$uid/plan?stage=create" | json reason)"

cpu=$(curl -s "$url/v1/jobs/$uid/plan?stage=create" | json groups.worker.resource.cpu)
mem=$(curl -s "$url/v1/jobs/$uid/plan?stage=create" | json groups.worker.resource.memory_mb)
say "POST /v1/jobs/$uid/metrics  (2 workers at the planned ${cpu} CPU / ${mem} MiB, using less; 8 steps)"
t=$(now_ms)
for i in 0 1 2 3 4 5 6 7; do
	ts=$((t + i * 10000))
	body=$(printf '{"samples":[
 {"kind":"speed","ts":%d,"speed":%s,"step":%d,"workers":2,"ps":0},
 {"kind":"node","ts":%d,"node":"worker-0","role":"worker","rank":0,"cpu":1.6,"memory_mb":1400,"cpu_limit":%s,"memory_limit_mb":%s,"step_time":0.31},
 {"kind":"node","ts":%d,"node":"worker-1","role":"worker","rank":1,"cpu":1.5,"memory_mb":%d,"cpu_limit":%s,"memory_limit_mb":%s,"step_time":0.33}]}' \
		"$ts" "41$i.5" $((100 * (i + 1))) "$ts" "$cpu" "$mem" "$ts" $((1300 + 20 * i)) "$cpu" "$mem")
	curl -s -H 'Content-Type: application/json' -d "$body" "$url/v1/jobs/$uid/metrics"
	echo
done

# The planner runs after each batch; planned_ts says which samples it has seen.
for _ in $(seq 1 100); do
	planned=$(curl -s "$url/v1/jobs/$uid" | json planned_ts)
	[ "$planned" -ge "$ts" ] 2>/dev/null && break
	sleep 0.1
done
say "running-stage plan (GET /v1/jobs/$uid/plan?stage=running)"
plan=$(curl -s "$url/v1/jobs/$uid/plan?stage=running")
if printf '%s' "$plan" | grep -q '"stage":"running"'; then
	echo "algorithm: $(printf '%s' "$plan" | json algorithm)"
	echo "workers:   $(printf '%s' "$plan" | json groups.worker.count) x $(printf '%s' "$plan" | json groups.worker.resource.cpu) CPU, $(printf '%s' "$plan" | json groups.worker.resource.memory_mb) MiB"
	echo "reason:    $(printf '%s' "$plan" | json reason)"
else
	echo "no running plan yet: $plan"
fi

say "plan history (GET /v1/jobs/$uid/plans)"
curl -s "$url/v1/jobs/$uid/plans" | python3 -c 'import json, sys
for p in json.load(sys.stdin)["plans"]:
    print("  plan %s  %-8s %-20s %s" % (p["id"], p["stage"], p["algorithm"], p["reason"]))'

sockdir=$(cd "$dir" && pwd)
# The embedded cluster runs as postgres when the brain runs as root.
pguser=$([ "$(id -u)" = 0 ] && echo postgres || id -un)
say "where to look"
cat <<EOF
  REST API        $url/v1/jobs   $url/v1/jobs/$uid   $url/v1/jobs/$uid/plans
  health          $url/healthz
  Prometheus      $url/metrics
  OpenAPI         $url/v1/openapi.json
  brain log       $log
  PostgreSQL log  $dir/postgres.log
  psql            psql "host=$sockdir dbname=rover user=$pguser"
                  (e.g. -c 'SELECT * FROM v_job_utilisation'; see sql/README.md)
  long-poll       curl "$url/v1/jobs/$uid/plan?stage=running&after=1&wait=30"

rover-brain keeps running in the background (pid $(cat "$pidfile")).
Stop it (and its PostgreSQL) with:
  kill \$(cat $pidfile)
EOF
