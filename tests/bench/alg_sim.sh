#!/usr/bin/env bash
# alg_sim: play every shipped trace (tests/sim/traces) against a fresh
# rover-brain (embedded PostgreSQL in a temp dir, planner debounce 0) and
# under DLRover's baseline rules, plus the cluster run; then replay every
# job against a fresh brain under each noise seed of ALG_SIM_ROBUST_SEEDS
# (default "1 2 3 4 5"; empty: none).  The last line is
#   bench=alg_sim jobs=N throughput_ratio_min=R ... noise_robust=F
# where noise_robust is the fraction of those replays meeting every target.
# Per-job figures go to stderr and to $ALG_SIM_JSON when set; ALG_SIM_TRACES
# picks another trace folder, ALG_SIM_SEED another noise seed, ALG_SIM_SETTLE
# how many rounds without a plan end a job (rover-sim --settle, default 3).
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$B/bin}
TRACES=${ALG_SIM_TRACES:-tests/sim/traces}
ROBUST_SEEDS=${ALG_SIM_ROBUST_SEEDS-1 2 3 4 5}
tmp=$(mktemp -d /tmp/alg_sim.XXXXXX)
brain_pid=
brain_stop() {
  if [ -n "$brain_pid" ]; then
    kill -TERM "$brain_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$brain_pid" 2>/dev/null || break; sleep 0.1; done
    brain_pid=
  fi
}
cleanup() {
  brain_stop
  rm -rf "$tmp"
}
trap cleanup EXIT
# The embedded PostgreSQL refuses to run as root: the brain handles that
# itself (initdb and pg_ctl run as postgres), but the folder must be
# writable by it.
chmod 755 "$tmp"

# brain_start NAME: a fresh brain in $tmp/NAME (every run sees the same
# empty history); sets url and brain_pid.  rover-sim reports its cluster
# once, so the brain keeps those nodes for the whole run (on a loaded
# machine a play outlasts the default cluster.node_ttl_s and late jobs
# would lose the node-size cap).
brain_start() {
  local dir=$tmp/$1 line
  mkdir -p "$dir"
  chmod 755 "$dir"
  mkfifo "$dir/out"
  "$BIN/rover-brain" --listen 127.0.0.1:0 --data-dir "$dir/brain" --plan-debounce-ms 0 \
    --plan-interval-s 86400 --cluster-node-ttl-s 31536000 \
    --log-level warn >"$dir/out" 2>"$dir/brain.log" &
  brain_pid=$!
  url=
  exec 3<"$dir/out"
  while IFS= read -r -t 120 line <&3; do
    case "$line" in
      "listening on "*) url=${line#listening on }; break ;;
    esac
  done
  if [ -z "$url" ]; then
    echo "alg_sim: rover-brain did not start; its log:" >&2
    cat "$dir/brain.log" >&2
    exit 1
  fi
  # Keep draining the brain's stdout so it never blocks on a full pipe.
  cat <&3 >/dev/null &
  exec 3<&-
}

brain_errors() {
  if grep -q 'level=error' "$tmp/$1/brain.log"; then
    echo "alg_sim: brain errors:" >&2
    grep 'level=error' "$tmp/$1/brain.log" | tail -5 >&2
  fi
}

brain_start main
echo "alg_sim: brain at $url, traces $TRACES" >&2
json=${ALG_SIM_JSON:-$tmp/alg_sim.json}
start=$(date +%s.%N)
rc=0
"$BIN/rover-sim" --trace "$TRACES" --brain "$url" --policy both --cluster --json "$json" \
  ${ALG_SIM_SEED:+--seed "$ALG_SIM_SEED"} ${ALG_SIM_SETTLE:+--settle "$ALG_SIM_SETTLE"} --bench alg_sim >"$tmp/line" || rc=$?
end=$(date +%s.%N)
echo "alg_sim: rover-sim exit $rc in $(echo "$end - $start" | bc) s" >&2
brain_errors main
brain_stop
line=$(tail -n 1 "$tmp/line")

# Noise robustness: the same jobs under other noise seeds, Rover only.
met=0
runs=0
for seed in $ROBUST_SEEDS; do
  brain_start "seed$seed"
  echo "alg_sim: noise seed $seed, brain at $url" >&2
  "$BIN/rover-sim" --trace "$TRACES" --brain "$url" --policy rover --seed "$seed" \
    ${ALG_SIM_SETTLE:+--settle "$ALG_SIM_SETTLE"} >"$tmp/line.$seed" 2>"$tmp/rows.$seed" || rc=$?
  brain_errors "seed$seed"
  brain_stop
  m=$(tail -n 1 "$tmp/line.$seed" | sed -n 's/.* jobs_meeting_all=\([0-9]*\)\/\([0-9]*\).*/\1 \2/p')
  if [ -z "$m" ]; then
    echo "alg_sim: no summary for noise seed $seed" >&2
    rc=1
    continue
  fi
  echo "alg_sim: noise seed $seed jobs_meeting_all=${m% *}/${m#* }" >&2
  grep 'misses targets' "$tmp/rows.$seed" | grep -v '^ *baseline' | sed "s/^/seed$seed /" >&2 || true
  met=$((met + ${m% *}))
  runs=$((runs + ${m#* }))
done
if [ "$runs" -gt 0 ]; then
  line="$line noise_robust=$(echo "scale=3; $met / $runs" | bc | sed 's/^\./0./') noise_runs=$met/$runs"
fi
echo "$line"
exit $rc
