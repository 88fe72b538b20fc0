#!/usr/bin/env bash
# slurm_relaunch: rover-master's slurm scheduler on a private Slurm cluster
# (tests/slurm/slurmfix.sh: 4 nodes of 8 CPUs, each in a network namespace
# of its own): a job of 8 nodes (each a 1-CPU Slurm job running sleep) runs,
# 4 of their Slurm jobs are cancelled at once (scancel), and the seconds
# until all 4 run again (squeue says RUNNING for the 4 relaunched
# instances), against the seconds Slurm itself takes from sbatch to RUNNING
# for 4 such jobs submitted at once in the same run.  Median of BENCH_RUNS
# (3) rounds; slurm.poll_ms is BENCH_POLL_MS (the default, 500).  Needs
# root.  Last line:
#   bench=slurm_relaunch nodes=8 cancelled=4 seconds=N slurm_submit_s=N ratio=R
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
runs=${BENCH_RUNS:-3}
poll=${BENCH_POLL_MS:-500}
tmp=$(mktemp -d /tmp/rover-bench-slurm.XXXXXX)
chmod 755 "$tmp"
mpid=
cleanup() {
	[ -n "$mpid" ] && kill -KILL "$mpid" 2>/dev/null && wait "$mpid" 2>/dev/null || true
	tests/slurm/slurmfix.sh stop "$tmp/cluster" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
out=$(SLURMFIX_CPUS=8 tests/slurm/slurmfix.sh start "$tmp/cluster" 4 netns $$)
eval "$out"
export SLURM_CONF
now() { date +%s.%N; }
# running N PATTERN: wait until N jobs whose name matches PATTERN run
running() {
	for _ in $(seq 600); do
		[ "$(squeue -h -t R -o '%j' | grep -c -E "$2")" -ge "$1" ] && return 0
		sleep 0.05
	done
	echo "bench: timed out waiting for $1 running jobs like $2" >&2
	return 1
}
mkdir -p "$tmp/state"
cat >"$tmp/job.json" <<JOB
{"apiVersion":"elastic.rover.dev/v1alpha1","kind":"ElasticJob","metadata":{"name":"bench"},
 "spec":{"distributionStrategy":"AllreduceStrategy","optimizeMode":"manual",
 "replicaSpecs":{"worker":{"replicas":8,"minReplicas":8,"maxReplicas":8,"restartCount":1000,
  "resources":{"cpu":1,"memory":"64Mi"},"command":["/bin/sleep","3600"]}},
 "datasets":[{"name":"d","size":1000,"shardSize":10}]}}
JOB
"$BIN/rover-master" --job "$tmp/job.json" --state-dir "$tmp/state" --listen "$SLURMFIX_HOSTIP:0" \
	--scheduler slurm --slurm-url "unix:$SLURMFIX_REST" --slurm-workdir /tmp \
	--slurm-poll-ms "$poll" --rdzv-max-wait-s 0 >"$tmp/master.log" 2>&1 &
mpid=$!
running 8 '^rover-bench-worker-[0-9]+$'
rover=() slurm=()
for r in $(seq "$runs"); do
	# the Slurm jobs of the 4 lowest ranks' current instances, in one scancel
	ids=$(squeue -h -t R -o '%i %j' | awk '$2 ~ /^rover-bench-worker-[0-3](\.[0-9]+)?$/ { print $1 }')
	t0=$(now)
	# shellcheck disable=SC2086
	scancel $ids
	running 4 "^rover-bench-worker-[0-3]\\.$r\$"
	t1=$(now)
	rover+=("$(echo "$t1 - $t0" | bc)")
	t0=$(now)
	ids=
	for i in 1 2 3 4; do
		ids+=" $(sbatch --parsable -J "plain-$r-$i" -c 1 --mem 64 -o /dev/null --wrap 'sleep 3600')"
	done
	running 4 "^plain-$r-"
	t1=$(now)
	slurm+=("$(echo "$t1 - $t0" | bc)")
	# shellcheck disable=SC2086
	scancel $ids
	echo "round $r: rover ${rover[-1]} s, slurm ${slurm[-1]} s" >&2
	sleep 1
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
rs=$(median "${rover[@]}")
ss=$(median "${slurm[@]}")
printf 'bench=slurm_relaunch nodes=8 cancelled=4 seconds=%.2f slurm_submit_s=%.2f ratio=%.2f\n' \
	"$rs" "$ss" "$(echo "$rs / $ss" | bc -l)"
