#!/usr/bin/env bash
# Rover demo (make demo runs it after installing packages and building): the
# whole stack on one machine.
#   1. rover-brain on its embedded PostgreSQL in var/demo (reused when an
#      earlier demo left it running);
#   2. rover-master for examples/demo-job.json in cluster mode (plans from
#      that brain) with its local scheduler: it starts two nodes, each
#      `build/bin/rover-run --nproc-per-node 2 examples/digits_ddp.py ...`,
#      so four PyTorch workers train one DDP model on scikit-learn's digits;
#   3. once training is under way, kill -9 of one worker of node worker-1:
#      rover-run restarts that node's workers, both nodes re-form the world
#      and training goes on from the last checkpoint;
#   4. progress lines (steps, samples/s, plans from the brain, the fault and
#      the recovery), then a summary: accuracy, restarts, time lost to the
#      fault, where the data and dashboards are.
# The brain and the master keep running afterwards (the master answers
# /v1/job for 10 minutes once the job ended, then exits).
#   scripts/demo.sh stop   (make demo-stop) stops the master, its nodes, the
#                          brain and its PostgreSQL, and waits until all are gone
#   ROVER_DEMO_PORT        the brain's port (default 8080)
#   ROVER_DEMO_MASTER_PORT the master's port (default 7070)
#   PYTHON_EXEC            the workers' Python (default /usr/bin/python3,
#                          Debian's, with torch and sklearn)
# Needs curl and jq (scripts/install-deps.sh installs them and PyTorch).
set -euo pipefail
cd "$(dirname "$0")/.."

port=${ROVER_DEMO_PORT:-8080}
mport=${ROVER_DEMO_MASTER_PORT:-7070}
dir=var/demo
url=http://127.0.0.1:$port
murl=http://127.0.0.1:$mport
bin=build/bin/rover-brain
mbin=build/bin/rover-master
pidfile=$dir/brain.pid
mpidfile=$dir/master.pid
log=$dir/brain.log
run=$dir/run # this run's master state, node logs and checkpoints
mlog=$run/master.log
nodelogs=$run/master/nodes
job=examples/demo-job.json
export PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3}

say() { printf '\n== %s\n' "$*"; }
die() {
	echo "demo: $*" >&2
	exit 1
}
now_ms() { date +%s%3N; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.1f", ms / 1000 }'; }

# stop_pid PID SECONDS: SIGTERM, wait, then SIGKILL.
stop_pid() {
	local pid=$1
	alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 $(($2 * 10))); do
		alive "$pid" || return 0
		sleep 0.1
	done
	echo "demo: pid $pid still running after $2 s: killing it" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

# stop_master: SIGTERM the demo's master; it stops its nodes (and they die
# with it: the demo runs it with --node-survive-master false).
stop_master() {
	stop_pid "$(cat "$mpidfile" 2>/dev/null || true)" 40
	rm -f "$mpidfile"
}

# stop_brain: SIGTERM the demo's brain (it stops its PostgreSQL), wait for
# it; if it does not go within 60 s, kill it and stop PostgreSQL directly.
stop_brain() {
	local pg
	stop_pid "$(cat "$pidfile" 2>/dev/null || true)" 60
	pg=$(head -1 "$dir/pgdata/postmaster.pid" 2>/dev/null || true)
	if alive "$pg"; then
		kill -INT "$pg" 2>/dev/null || true # fast shutdown
		for _ in $(seq 1 300); do
			alive "$pg" || break
			sleep 0.1
		done
	fi
	rm -f "$pidfile"
}

if [ "${1:-}" = stop ]; then
	m=$(cat "$mpidfile" 2>/dev/null || true)
	b=$(cat "$pidfile" 2>/dev/null || true)
	pg=$(head -1 "$dir/pgdata/postmaster.pid" 2>/dev/null || true)
	if ! alive "$m" && ! alive "$b" && ! alive "$pg"; then
		echo "demo: nothing of the demo is running"
		rm -f "$pidfile" "$mpidfile"
		exit 0
	fi
	stop_master
	stop_brain
	echo "demo: stopped rover-master (and its nodes), rover-brain and its PostgreSQL"
	exit 0
fi
[ $# -eq 0 ] || die "usage: scripts/demo.sh [stop]"

for b in "$bin" "$mbin" build/bin/rover-run; do
	[ -x "$b" ] || die "no $b: run make first"
done
for tool in curl jq; do
	command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh installs it)"
done
"$PYTHON_EXEC" -c 'import torch, numpy' 2>/dev/null ||
	die "$PYTHON_EXEC cannot import torch (scripts/install-deps.sh installs python3-torch and python3-sklearn)"
mkdir -p "$dir"

resp=$(mktemp)
started=0
finish() {
	local rc=$?
	rm -f "$resp"
	[ "$rc" -eq 0 ] && return
	echo "demo: failed; stopping its master (log: $mlog)" >&2
	stop_master
	if [ "$started" = 1 ]; then
		echo "demo: stopping the rover-brain it started (log: $log)" >&2
		stop_brain
	elif alive "$(cat "$pidfile" 2>/dev/null || true)"; then
		echo "demo: the rover-brain from an earlier demo keeps running: stop it with make demo-stop" >&2
	fi
}
trap finish EXIT
trap 'exit 130' INT TERM HUP

# get URL: GET it into $resp; prints the HTTP status.
get() { curl -s --max-time 10 -o "$resp" -w '%{http_code}' "$1" || true; }
# post URL FILE|-: POST a JSON document into $resp; prints the HTTP status.
post() {
	curl -s --max-time 30 -o "$resp" -w '%{http_code}' -H 'Content-Type: application/json' \
		--data-binary "@$2" "$1" || true
}

# ---- 1. the brain ----
if alive "$(cat "$pidfile" 2>/dev/null || true)"; then
	curl -sf --max-time 5 "$url/healthz" >/dev/null ||
		die "a brain from $pidfile (pid $(cat "$pidfile")) runs but does not answer on $url; stop it with: make demo-stop"
	say "rover-brain already running on $url (pid $(cat "$pidfile")), reusing it"
else
	if curl -s --max-time 5 -o /dev/null "$url/healthz"; then
		die "something else already listens on $url; set ROVER_DEMO_PORT"
	fi
	say "starting rover-brain on $url (the planner; embedded PostgreSQL in $dir)"
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

# The job's name is taken while an earlier demo's job still runs in the
# brain (a demo stopped midway): finish it.
name=$(jq -r .metadata.name "$job")
[ "$(get "$url/v1/jobs?status=running&limit=1000")" = 200 ] || die "could not list the brain's jobs: $(cat "$resp")"
for old in $(jq -r --arg n "$name" '.jobs[] | select(.name == $n and .namespace == "default") | .uid' "$resp"); do
	echo "job $name ($old) still running in the brain from an earlier demo: finishing it"
	code=$(echo "{\"type\":\"job_finished\",\"ts\":$(now_ms)}" | post "$url/v1/jobs/$old/events" -)
	[ "$code" = 201 ] || [ "$code" = 200 ] || die "could not finish $old: HTTP $code $(cat "$resp")"
done

# ---- 2. the master and its nodes ----
if alive "$(cat "$mpidfile" 2>/dev/null || true)"; then
	say "stopping the rover-master of an earlier demo (pid $(cat "$mpidfile"))"
	stop_master
fi
if curl -s --max-time 5 -o /dev/null "$murl/v1/job"; then
	die "something else already listens on $murl; set ROVER_DEMO_MASTER_PORT"
fi
rm -rf "$run"
mkdir -p "$run/ckpt"
say "starting rover-master on $murl for $job"
echo "cluster mode (plans from the brain), local scheduler: it runs 2 nodes, each"
jq -r '"  " + (.spec.replicaSpecs.worker.command | join(" "))' "$job"
echo "with PYTHON_EXEC=$PYTHON_EXEC: 2 nodes x 2 workers = one DDP world of 4 ranks"
t_start=$(now_ms)
nohup "$mbin" --job "$job" --listen "127.0.0.1:$mport" --brain "$url" --scheduler local \
	--node-limits none --node-survive-master false --state-dir "$run/master" \
	--linger-s 600 >"$mlog" 2>&1 </dev/null &
echo $! >"$mpidfile"
mpid=$(cat "$mpidfile")

# ---- 3. progress, the fault, the end ----
# Lines of interest in the node logs (each node's rover-run and its
# workers), printed as they come; /v1/job each second for plans and the
# job's state.
declare -A seen=()
step=0
speed=""
kill_ms=0
next_ms=0
restart_ms=0
plans=0
kill_step=0
resumed=""
accuracy=""
victim=""
state=running
kill_at=100
last_poll=0
deadline=$(($(now_ms) + 150000))

# show LINE NODE: print what a newcomer needs from one node log line.
show() {
	local l=$1 node=$2 s
	case $l in
	*'comp=master msg="plan applied"'*)
		plans=$((plans + 1))
		echo "  [master] plan $(sed 's/.* plan=\([0-9]*\) stage=\([a-z]*\).*/\1 (\2 stage)/' <<<"$l") from the brain applied: ${l##*reason=}"
		;;
	*'comp=master msg="node relaunched with new resources"'*)
		echo "  [master] $(sed 's/.* node=\([^ ]*\) instance=\([^ ]*\).*/node \1 relaunched (as \2) with the plan'"'"'s resources/' <<<"$l")"
		;;
	*'comp=master msg="node relaunched"'* | *'comp=master msg="node given up"'*)
		echo "  [master] ${l#*msg=}"
		;;
	*'comp=master'*) ;;
	*'msg="stopping on a signal"'*) ;; # the master relaunching or stopping the node
	"[rank0]:step="*)
		s=${l#*step=}
		step=${s%% *}
		speed=${l##*samples_per_s=}
		[ "$kill_ms" -gt 0 ] && [ "$next_ms" = 0 ] && next_ms=$(now_ms)
		printf '  step %3s  loss %-7s %6s samples/s\n' "$step" "$(sed 's/.*loss=\([^ ]*\).*/\1/' <<<"$l")" \
			"${l##*samples_per_s=}"
		;;
	"[rank0]:resumed from"*)
		resumed=${l##*step=}
		echo "  [$node] workers resumed from the checkpoint at step $resumed"
		;;
	"[rank0]:test_accuracy="*)
		accuracy=$(sed 's/.*test_accuracy=\([^ ]*\).*/\1/' <<<"$l")
		echo "  test accuracy $accuracy (target $(sed 's/.*target=//' <<<"$l"))"
		;;
	*'msg="starting workers"'*)
		[ "$kill_ms" -gt 0 ] && [ "$restart_ms" = 0 ] && restart_ms=$(now_ms)
		echo "  [$node] rendezvous $(sed 's/.*round=\([0-9]*\).*/round \1/' <<<"$l"): $(sed 's/.*group_rank=\([0-9]*\).*/node rank \1/' <<<"$l"), world size $(sed 's/.*world_size=\([0-9]*\).*/\1/' <<<"$l"), starting its 2 workers"
		;;
	*'msg="worker failed"'*)
		echo "  [$node] rover-run saw $(sed 's/.* rank=\([0-9]*\).*pid_status="\([^"]*\)".*/rank \1 \2/' <<<"$l")"
		;;
	*'msg="restarting the workers"'*)
		echo "  [$node] restarting its workers ($(sed 's/.*restart=\([0-9]*\) max_restarts=\([0-9]*\).*/restart \1 of \2/' <<<"$l"))"
		;;
	*'level=error'* | *'level=warn'*)
		echo "  [$node] ${l#*msg=}"
		;;
	esac
}

while :; do
	for f in "$mlog" "$nodelogs"/*.log; do
		[ -f "$f" ] || continue
		n=${seen[$f]:-0}
		node=$(basename "$f" .log)
		node=${node%%.*}
		while IFS= read -r line; do
			n=$((n + 1))
			show "$line" "$node"
		done < <(tail -n +$((n + 1)) "$f")
		seen[$f]=$n
	done
	t=$(now_ms)
	if [ "$t" -ge $((last_poll + 1000)) ]; then
		last_poll=$t
		if [ "$(get "$murl/v1/job")" = 200 ]; then
			state=$(jq -r '.job_state // "running"' "$resp")
		fi
	fi
	if [ "$kill_ms" = 0 ] && [ "$step" -ge "$kill_at" ]; then
		[ "$(get "$murl/v1/job")" = 200 ] || die "no /v1/job from the master: $(cat "$resp")"
		node1=$(jq -r '.nodes[] | select(.name == "worker-1") | .pid' "$resp")
		# a worker: a child of that node's rover-run running the script
		victim=$(pgrep -P "$node1" -f digits_ddp.py | sort -n | tail -1 || true)
		[ -n "$victim" ] || die "no worker process of node worker-1 (pid $node1) to kill"
		kill_step=$step
		say "kill -9 of a worker of node worker-1 (pid $victim) at step $step"
		kill -KILL "$victim"
		kill_ms=$(now_ms)
	fi
	[ "$state" = running ] || break
	alive "$mpid" || break
	[ "$(now_ms)" -lt "$deadline" ] || die "the job did not end within 150 s; see $nodelogs and $mlog"
	sleep 0.2
done
t_end=$(now_ms)
[ "$state" != running ] || die "rover-master exited before the job ended; see $mlog"

# ---- 4. the summary ----
[ "$(get "$murl/v1/job")" = 200 ] || die "no /v1/job from the master: $(cat "$resp")"
reason=$(jq -r .job_reason "$resp")
relaunches=$(jq '[.nodes[].restarts] | add' "$resp")
uid=$(jq -r .brain.uid "$resp")
bstatus=unknown
for _ in $(seq 1 20); do # the master tells the brain the job's end
	[ "$(get "$url/v1/jobs/$uid")" = 200 ] && bstatus=$(jq -r .status "$resp")
	[ "$bstatus" != running ] && break
	sleep 0.2
done
group_restarts=$(cat "$nodelogs"/*.log | grep -c 'msg="restarting the workers"' || true)
sockdir=$(cd "$dir" && pwd)
# The embedded cluster runs as postgres when the brain runs as root.
pguser=$([ "$(id -u)" = 0 ] && echo postgres || id -un)
lost="no fault injected"
if [ "$kill_ms" -gt 0 ] && [ "$next_ms" -gt 0 ]; then
	lost="$(secs $((next_ms - kill_ms))) s from the kill to the next logged step"
	steps=$(jq -r '.spec.replicaSpecs.worker.command | index("--log-every") as $i | .[$i + 1]' "$job")
	# Workers restarted warm were forked from an interpreter that had
	# imported torch already; cold ones import it again.
	if [ "$(cat "$nodelogs"/*.log | grep -c 'msg="worker started".*start=warm' || true)" -gt 0 ]; then
		how="forked warm: torch already imported; the rest is
                   loading the checkpoint, joining the process group and $steps steps)"
	else
		how="cold; the rest is Python importing torch,
                   joining the process group and $steps steps)"
	fi
	[ "$restart_ms" -gt 0 ] && lost="$lost
                   (new workers started after $(secs $((restart_ms - kill_ms))) s, $how"
	[ -n "$resumed" ] && lost="$lost
                   training resumed from the checkpoint at step $resumed"
fi

say "summary"
cat <<EOF
  job              $name: $state ($reason), in $(secs $((t_end - t_start))) s
  what ran         2 nodes (rover-run) x 2 workers = 4 DDP ranks on CPU, one model
  accuracy         ${accuracy:-not reported} on the 360 held-out digits (target 0.90)
  speed            ${speed:-?} samples/s at the last logged step (4 ranks together)
  fault            kill -9 of worker pid ${victim:-none} of node worker-1 at step $kill_step
  recovery         $group_restarts worker-group restart(s) by rover-run, $relaunches node relaunch(es) by the master
  time lost        $lost
  brain            $plans plan(s) from the brain applied; the brain holds job ${uid:-none} as $bstatus

where to look
  master           $murl/v1/job  (job state, nodes, world, datasets, brain link, plan)
                   answers for 10 minutes after the job ended
  brain            $url/v1/jobs/$uid   $url/v1/jobs/$uid/plans
                   $url/metrics (Prometheus)   $url/v1/openapi.json
  PostgreSQL       psql "host=$sockdir dbname=rover user=$pguser"
                   (e.g. -c 'SELECT * FROM v_job_utilisation'; see sql/README.md)
  logs             $nodelogs/<node>.log (rover-run and its workers), $mlog,
                   $log, $dir/postgres.log

The brain and the master keep running in the background.
Stop them (and the brain's PostgreSQL) with:
  make demo-stop
EOF
[ "$state" = succeeded ] || die "the job $state: $reason"
