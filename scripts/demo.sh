#!/usr/bin/env bash
# Rover demo (make demo runs it after installing packages and building):
# start rover-brain on its embedded PostgreSQL in var/demo, register
# examples/job.json, show its create-stage plan, post a few metrics samples,
# show the running-stage plan and the plan history, and leave the brain
# running in the background.
# Safe to run again: a brain already running from var/demo is reused, and a
# job left running by an earlier demo is finished first.  If the demo fails,
# it stops the brain it started (one it reused keeps running).
#   scripts/demo.sh stop   (make demo-stop) stops the demo's brain and its
#                          PostgreSQL, and waits until both are gone
#   ROVER_DEMO_PORT        port to listen on (default 8080)
# Needs curl and jq (scripts/install-deps.sh installs both).
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
die() {
	echo "demo: $*" >&2
	exit 1
}
now_ms() { date +%s%3N; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# stop_brain: SIGTERM the demo's brain (it stops its PostgreSQL), wait for
# it; if it does not go within 60 s, kill it and stop PostgreSQL directly.
stop_brain() {
	local pid pg i
	pid=$(cat "$pidfile" 2>/dev/null || true)
	if alive "$pid"; then
		kill -TERM "$pid"
		for i in $(seq 1 600); do
			alive "$pid" || break
			sleep 0.1
		done
		if alive "$pid"; then
			echo "demo: rover-brain (pid $pid) still running after 60 s: killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	pg=$(head -1 "$dir/pgdata/postmaster.pid" 2>/dev/null || true)
	if alive "$pg"; then
		kill -INT "$pg" 2>/dev/null || true # fast shutdown
		for i in $(seq 1 300); do
			alive "$pg" || break
			sleep 0.1
		done
	fi
	rm -f "$pidfile"
}

if [ "${1:-}" = stop ]; then
	if ! alive "$(cat "$pidfile" 2>/dev/null || true)" &&
		! alive "$(head -1 "$dir/pgdata/postmaster.pid" 2>/dev/null || true)"; then
		echo "demo: no demo brain running"
		rm -f "$pidfile"
		exit 0
	fi
	stop_brain
	echo "demo: stopped rover-brain and its PostgreSQL"
	exit 0
fi
[ $# -eq 0 ] || die "usage: scripts/demo.sh [stop]"

[ -x "$bin" ] || die "no $bin: run make first"
for tool in curl jq; do
	command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh installs it)"
done
mkdir -p "$dir"

resp=$(mktemp)
started=0
finish() {
	local rc=$?
	rm -f "$resp"
	[ "$rc" -eq 0 ] && return
	if [ "$started" = 1 ]; then
		echo "demo: failed; stopping the rover-brain it started (log: $log)" >&2
		stop_brain
	elif alive "$(cat "$pidfile" 2>/dev/null || true)"; then
		echo "demo: failed; the rover-brain from an earlier demo keeps running: stop it with make demo-stop" >&2
	fi
}
trap finish EXIT
trap 'exit 130' INT TERM HUP

if alive "$(cat "$pidfile" 2>/dev/null || true)"; then
	curl -sf --max-time 5 "$url/healthz" >/dev/null ||
		die "a brain from $pidfile (pid $(cat "$pidfile")) runs but does not answer on $url; stop it with: make demo-stop"
	say "rover-brain already running (pid $(cat "$pidfile")), reusing it"
else
	if curl -s --max-time 5 -o /dev/null "$url/healthz"; then
		die "something else already listens on $url; set ROVER_DEMO_PORT"
	fi
	say "starting rover-brain on $url (embedded PostgreSQL in $dir)"
	# The brain prints "listening on ..." on stdout and logs on stderr.
	nohup "$bin" --listen "127.0.0.1:$port" --data-dir "$dir" >>"$log" 2>&1 </dev/null &
	echo $! >"$pidfile"
	started=1
	for _ in $(seq 1 120); do
		curl -sf --max-time 5 "$url/healthz" >/dev/null && break
		alive "$(cat "$pidfile")" || {
			tail -20 "$log" >&2
			die "rover-brain exited, see $log"
		}
		sleep 0.5
	done
	curl -sf --max-time 5 "$url/healthz" >/dev/null || {
		tail -20 "$log" >&2
		die "rover-brain not healthy after 60 s, see $log"
	}
	echo "pid $(cat "$pidfile"), log $log"
fi

# get PATH: GET $url$PATH into $resp; prints the HTTP status.
get() { curl -s --max-time 30 -o "$resp" -w '%{http_code}' "$url$1"; }
# post PATH FILE|-: POST a JSON document into $resp; prints the HTTP status.
post() {
	curl -s --max-time 30 -o "$resp" -w '%{http_code}' -H 'Content-Type: application/json' \
		--data-binary "@$2" "$url$1"
}

say "GET /healthz"
[ "$(get /healthz)" = 200 ] || die "healthz: $(cat "$resp")"
jq . "$resp"

say "POST /v1/jobs  (register $job)"
code=$(post /v1/jobs "$job")
if [ "$code" = 409 ]; then
	# The name is taken by a job an earlier demo left running: finish it.
	name=$(jq -r .metadata.name "$job")
	[ "$(get "/v1/jobs?status=running&limit=1000")" = 200 ] || die "could not list jobs: $(cat "$resp")"
	old=$(jq -r --arg n "$name" '.jobs[] | select(.name == $n and .namespace == "default") | .uid' "$resp")
	[ -n "$old" ] || die "registration conflicts but no running job named $name was found"
	echo "a job named $name is still running ($old): finishing it"
	code=$(echo "{\"type\":\"job_finished\",\"ts\":$(now_ms)}" | post "/v1/jobs/$old/events" -)
	[ "$code" = 201 ] || [ "$code" = 200 ] || die "could not finish $old: HTTP $code $(cat "$resp")"
	code=$(post /v1/jobs "$job")
fi
[ "$code" = 201 ] || die "registration failed with HTTP $code: $(cat "$resp")"
uid=$(jq -r .uid "$resp")
echo "job uid: $uid"

say "create-stage plan (GET /v1/jobs/$uid/plan?stage=create)"
[ "$(get "/v1/jobs/$uid/plan?stage=create")" = 200 ] || die "no create-stage plan: $(cat "$resp")"
jq . "$resp"
echo "reason: $(jq -r .reason "$resp")"
cpu=$(jq -r .groups.worker.resource.cpu "$resp")
mem=$(jq -r .groups.worker.resource.memory_mb "$resp")

say "POST /v1/jobs/$uid/metrics  (2 workers at the planned ${cpu} CPU / ${mem} MiB, using less; 8 steps)"
t=$(now_ms)
for i in 0 1 2 3 4 5 6 7; do
	ts=$((t + i * 10000))
	printf '{"samples":[
 {"kind":"speed","ts":%d,"speed":%s,"step":%d,"workers":2,"ps":0},
 {"kind":"node","ts":%d,"node":"worker-0","role":"worker","rank":0,"cpu":1.6,"memory_mb":1400,"cpu_limit":%s,"memory_limit_mb":%s,"step_time":0.31},
 {"kind":"node","ts":%d,"node":"worker-1","role":"worker","rank":1,"cpu":1.5,"memory_mb":%d,"cpu_limit":%s,"memory_limit_mb":%s,"step_time":0.33}]}' \
		"$ts" "41$i.5" $((100 * (i + 1))) "$ts" "$cpu" "$mem" "$ts" $((1300 + 20 * i)) "$cpu" "$mem" >"$resp.body"
	code=$(post "/v1/jobs/$uid/metrics" "$resp.body")
	rm -f "$resp.body"
	[ "$code" = 200 ] || [ "$code" = 201 ] || die "metrics rejected with HTTP $code: $(cat "$resp")"
	cat "$resp"
	echo
done

# The planner runs after each batch; planned_ts says which samples it has seen.
for _ in $(seq 1 100); do
	[ "$(get "/v1/jobs/$uid")" = 200 ] && [ "$(jq -r .planned_ts "$resp")" -ge "$ts" ] && break
	sleep 0.1
done
say "running-stage plan (GET /v1/jobs/$uid/plan?stage=running)"
code=$(get "/v1/jobs/$uid/plan?stage=running")
if [ "$code" = 200 ] && [ "$(jq -r .stage "$resp")" = running ]; then
	jq -r '"algorithm: \(.algorithm)",
		"workers:   \(.groups.worker.count) x \(.groups.worker.resource.cpu) CPU, \(.groups.worker.resource.memory_mb) MiB",
		"reason:    \(.reason)"' "$resp"
else
	echo "no running plan yet (HTTP $code): $(cat "$resp")"
fi

say "plan history (GET /v1/jobs/$uid/plans)"
[ "$(get "/v1/jobs/$uid/plans")" = 200 ] || die "no plan history: $(cat "$resp")"
jq -r '.plans[] | [.id, .stage, .algorithm, .reason] | @tsv' "$resp" |
	awk -F'\t' '{ printf "  plan %s  %-8s %-20s %s\n", $1, $2, $3, $4 }'

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
  make demo-stop
EOF
