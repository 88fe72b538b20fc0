#!/usr/bin/env bash
# alg_sim: play every shipped trace (tests/sim/traces) against a fresh
# rover-brain (embedded PostgreSQL in a temp dir, planner debounce 0) and
# under DLRover's baseline rules, plus the cluster run; the last line is
#   bench=alg_sim jobs=N throughput_ratio_min=R ... baseline_resource_ratio_max=R
# Per-job figures go to stderr and to $ALG_SIM_JSON when set; ALG_SIM_TRACES
# picks another trace folder, ALG_SIM_SEED another noise seed, ALG_SIM_SETTLE
# how many rounds without a plan end a job (rover-sim --settle, default 3).
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$B/bin}
TRACES=${ALG_SIM_TRACES:-tests/sim/traces}
tmp=$(mktemp -d /tmp/alg_sim.XXXXXX)
brain_pid=
cleanup() {
  if [ -n "$brain_pid" ]; then
    kill -TERM "$brain_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$brain_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# The embedded PostgreSQL refuses to run as root: the brain handles that
# itself (initdb and pg_ctl run as postgres), but the folder must be
# writable by it.
chmod 755 "$tmp"
mkfifo "$tmp/out"
"$BIN/rover-brain" --listen 127.0.0.1:0 --data-dir "$tmp/brain" --plan-debounce-ms 0 \
  --plan-interval-s 86400 \
  --log-level warn >"$tmp/out" 2>"$tmp/brain.log" &
brain_pid=$!
url=
exec 3<"$tmp/out"
while IFS= read -r -t 120 line <&3; do
  case "$line" in
    "listening on "*) url=${line#listening on }; break ;;
  esac
done
if [ -z "$url" ]; then
  echo "alg_sim: rover-brain did not start; its log:" >&2
  cat "$tmp/brain.log" >&2
  exit 1
fi
# Keep draining the brain's stdout so it never blocks on a full pipe.
cat <&3 >/dev/null &
echo "alg_sim: brain at $url, traces $TRACES" >&2
json=${ALG_SIM_JSON:-$tmp/alg_sim.json}
start=$(date +%s.%N)
rc=0
"$BIN/rover-sim" --trace "$TRACES" --brain "$url" --policy both --cluster --json "$json" \
  ${ALG_SIM_SEED:+--seed "$ALG_SIM_SEED"} ${ALG_SIM_SETTLE:+--settle "$ALG_SIM_SETTLE"} --bench alg_sim >"$tmp/line" || rc=$?
end=$(date +%s.%N)
echo "alg_sim: rover-sim exit $rc in $(echo "$end - $start" | bc) s" >&2
if grep -q 'level=error' "$tmp/brain.log"; then
  echo "alg_sim: brain errors:" >&2
  grep 'level=error' "$tmp/brain.log" | tail -5 >&2
fi
tail -n 1 "$tmp/line"
exit $rc
