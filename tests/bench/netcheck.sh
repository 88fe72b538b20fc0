#!/usr/bin/env bash
# netcheck: rover-run --network-check (the collective: gloo all-gather and a
# matmul in pairs, two rounds) with BENCH_NODES (default 8) nodes on this
# machine, one of them
# slowed: a rover-master (--scheduler none) and 8 `rover-run --nnodes 8
# --network-check`, the slow one (BENCH_SLOW, default the 6th, n5) in a
# cgroup v1 CPU quota of BENCH_QUOTA_US (1000 of 100000: 1 % of a core)
# set once its warm interpreter is ready, then the 7 others.  Each node's
# warm interpreter starts with rover-run (its import of torch overlaps the
# rendezvous) and the check forks its collective from it.  seconds: the
# check's own time, from the moment every member's interpreter is ready and
# the world is complete (the latest "warm interpreter ready" and "joined
# the rendezvous" of the 8) to the last node's verdict (the latest "network
# check done", the slowed node's own at its 1 %); first_verdict_s: the same
# to the first node's verdict; world_to_verdict_s: from the world's
# completion to the last verdict, the 7 imports of torch on this 2-core machine included (on real
# machines each node imports on its own cores, during the rendezvous);
# the nodes wait up to 120 s for their interpreters (netcheck_round_timeout)
# and the master as long for a member's round (netcheck.timeout_ms): a
# loaded machine imports slowly; found: the stragglers the nodes name;
# rounds: the master's rounds (GET
# /v1/netcheck).  BENCH_RUNS (default 3) checks one after another, each
# with its own master and nodes: the slowed node's own time varies from run
# to run (at 1 % of a core every call it makes waits for its share), so the
# line gives the median of the runs and the worst (seconds_max); found is
# the stragglers every run named alike (else each run's, "|" between).
# Needs root and a writable /sys/fs/cgroup/cpu; without
# them it says so and prints found=skipped.  Last line:
# bench=netcheck nodes=8 found=NODE truth=NODE rounds=N seconds=N first_verdict_s=N
#   world_to_verdict_s=N runs=N seconds_max=N
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
export PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3}
N=${BENCH_NODES:-8}
SLOW=${BENCH_SLOW:-5}
QUOTA=${BENCH_QUOTA_US:-1000}
if [ "$(id -u)" != 0 ] || [ ! -w /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
	echo "netcheck: no writable cgroup v1 cpu hierarchy (root needed)" >&2
	echo "bench=netcheck nodes=$N found=skipped truth=n$SLOW rounds=0 seconds=0 first_verdict_s=0 world_to_verdict_s=0 runs=0 seconds_max=0"
	exit 0
fi
RUNS=${BENCH_RUNS:-3}
D= CG=
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
	# what still runs at the quota ends at full speed in the root group
	for _ in $(seq 50); do
		[ -z "$CG" ] || rmdir "$CG" 2>/dev/null && break
		while read -r p; do echo "$p" >/sys/fs/cgroup/cpu/cgroup.procs || true; done 2>/dev/null <"$CG/cgroup.procs" || true
		sleep 0.1
	done
	[ -z "$D" ] || rm -rf "$D"
}
trap cleanup EXIT
# one_run K: one check with a master and N nodes of its own; prints
# "found rounds seconds first_verdict_s world_to_verdict_s".
one_run() {
D=$(mktemp -d /tmp/rover-bench-netcheck.XXXXXX)
CG=/sys/fs/cgroup/cpu/rover-bench-netcheck-$$-$1
cat >"$D/job.json" <<EOF
{"apiVersion":"elastic.rover.dev/v1alpha1","kind":"ElasticJob","metadata":{"name":"bench-netcheck"},
 "spec":{"distributionStrategy":"AllreduceStrategy","optimizeMode":"manual",
 "replicaSpecs":{"worker":{"replicas":$N,"minReplicas":$N,"maxReplicas":$N}},
 "datasets":[{"name":"train","size":1000,"shardSize":10,"epochs":1}]}}
EOF
echo 'import os; print("W=" + os.environ["WORLD_SIZE"], flush=True)' >"$D/w.py"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ROVER_NETCHECK_TIMEOUT_MS=120000 "$BIN/rover-master" --job "$D/job.json" --state-dir "$D/state" --listen "127.0.0.1:$PORT" \
	--scheduler none --journal-nosync --log-level warn >"$D/master.out" 2>"$D/master.log" &
pids+=($!)
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
	sleep 0.1
done
node() { # node I [wrapper...]
	local i=$1
	shift
	ROVER_NODE_NAME=n$i "$@" "$BIN/rover-run" --nnodes "$N" --nproc-per-node 1 \
		--rdzv-endpoint "127.0.0.1:$PORT" --network-check \
		--rdzv-conf netcheck_round_timeout=120,netcheck_timeout=600 "$D/w.py" \
		>"$D/out$i" 2>"$D/err$i" &
	pids+=($!)
}
mkdir -p "$CG"
node "$SLOW" sh -c "echo \$\$ > $CG/cgroup.procs && exec \"\$@\"" sh
for _ in $(seq 1200); do
	grep -q 'warm interpreter ready' "$D/err$SLOW" 2>/dev/null && break
	sleep 0.1
done
echo 100000 >"$CG/cpu.cfs_period_us"
echo "$QUOTA" >"$CG/cpu.cfs_quota_us"
echo "netcheck: n$SLOW slowed to $QUOTA/100000 of a core; starting the others" >&2
for i in $(seq 0 $((N - 1))); do
	[ "$i" = "$SLOW" ] || node "$i"
done
for _ in $(seq 3000); do
	done_n=$({ grep -l 'msg="network check done"' "$D"/err* 2>/dev/null || true; } | wc -l)
	[ "$done_n" -ge "$N" ] && break
	sleep 0.1
done
rounds=$(curl -sf "http://127.0.0.1:$PORT/v1/netcheck" |
	python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["round"] + 1 if d["state"] != "running" else 0)' ||
	echo 0)
lines=$(grep -h 'msg="network check done"' "$D"/err* || true)
echo "$lines" | sed 's/.*check=/check=/' | cut -c1-400 >&2
found=$(echo "$lines" | head -1 | sed -n 's/.*stragglers="\([^"]*\)".*/\1/p' | sed 's/:[0-9.-]*//g')
# the times, from the nodes' log lines (ts=...Z, one clock)
read -r seconds first w2v < <(python3 - "$D" "$N" <<'PY'
import datetime, re, sys
d, n = sys.argv[1], int(sys.argv[2])
def ts(line):
    t = re.search(r"ts=(\S+)Z", line).group(1)
    return datetime.datetime.fromisoformat(t).timestamp()
def first(path, msg):  # the first: a node joins again after the check
    hits = [ts(l) for l in open(path) if 'msg="%s"' % msg in l]
    return min(hits) if hits else None
ready, joined, done = [], [], []
for i in range(n):
    p = "%s/err%d" % (d, i)
    ready.append(first(p, "warm interpreter ready"))
    joined.append(first(p, "joined the rendezvous"))
    done.append(first(p, "network check done"))
if None in joined or None in done:
    print("0 0 0")
    sys.exit()
world = max(joined)
start = max([world] + [r for r in ready if r is not None])
end = max(done)
print("%.3f %.3f %.3f" % (end - start, min(done) - start, end - world))
PY
) || true
echo "netcheck: run $1: found=${found:-none} rounds=$rounds seconds=$seconds first_verdict_s=$first world_to_verdict_s=$w2v" >&2
echo "${found:-none} $rounds $seconds $first $w2v"
cleanup
}

RES=$(mktemp /tmp/rover-bench-netcheck-runs.XXXXXX)
for k in $(seq "$RUNS"); do
	one_run "$k" >>"$RES"
done
trap - EXIT
python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin if l.strip()]
found = sorted(set(r[0] for r in rows))
med = lambda i: statistics.median(float(r[i]) for r in rows)
print("bench=netcheck nodes=%s found=%s truth=n%s rounds=%d seconds=%.3f first_verdict_s=%.3f "
      "world_to_verdict_s=%.3f runs=%d seconds_max=%.3f"
      % (sys.argv[1], found[0] if len(found) == 1 else "|".join(r[0] for r in rows), sys.argv[2],
         max(int(r[1]) for r in rows), med(2), med(3), med(4), len(rows),
         max(float(r[2]) for r in rows)))' "$N" "$SLOW" <"$RES"
rm -f "$RES"
