#!/usr/bin/env bash
# monitor_overhead: what rover-monitor costs the node it watches.  It samples
# this host every second (CPU, memory, PSI, the job scan of every process,
# GPUs through rover-gpuinfo at its default interval) and reports to a real
# rover-brain for ROVER_BENCH_MONITOR_S seconds (default 60); its CPU time
# (its own and its children's, from /proc/PID/stat, from ready to the end)
# as a share of one core, and its resident memory at the end.
# Target: cpu_pct < 1, rss_mb < 20.
# Prints: bench=monitor_overhead cpu_pct=N rss_mb=N samples=N
set -euo pipefail
B=${B:-build}
bin=${ROVER_BIN_DIR:-$B/bin}
dur=${ROVER_BENCH_MONITOR_S:-60}
tmp=$(mktemp -d /tmp/rover-bench-monitor-XXXXXX)
brain_pid='' mon_pid=''
cleanup() {
  [ -n "$mon_pid" ] && kill "$mon_pid" 2>/dev/null && wait "$mon_pid" 2>/dev/null || true
  [ -n "$brain_pid" ] && kill "$brain_pid" 2>/dev/null && wait "$brain_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# wait_url FILE: the url on its "listening on" line (30 s at most)
wait_url() {
  for _ in $(seq 300); do
    if grep -q '^listening on ' "$1" 2>/dev/null; then
      sed -n 's/^listening on //p' "$1"; return 0
    fi
    sleep 0.1
  done
  echo "error: no listening line in $1" >&2; return 1
}
# ticks PID: utime + stime + cutime + cstime (fields 14-17 after the command)
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13 + $14 + $15}'; }

"$bin/rover-brain" --listen 127.0.0.1:0 --data-dir "$tmp/brain" >"$tmp/brain.out" 2>"$tmp/brain.err" &
brain_pid=$!
url=$(wait_url "$tmp/brain.out") || { cat "$tmp/brain.err" >&2; exit 1; }
"$bin/rover-monitor" --brain "$url" --listen 127.0.0.1:0 --interval-ms 1000 \
  >"$tmp/mon.out" 2>"$tmp/mon.err" &
mon_pid=$!
murl=$(wait_url "$tmp/mon.out") || { cat "$tmp/mon.err" >&2; exit 1; }
echo "monitor_overhead: sampling every 1 s for $dur s (brain $url, monitor $murl)" >&2
hz=$(getconf CLK_TCK)
t0=$(ticks "$mon_pid")
s0=$(date +%s.%N)
sleep "$dur"
t1=$(ticks "$mon_pid")
s1=$(date +%s.%N)
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$mon_pid/status")
samples=$(curl -s "$murl/metrics" | awk '/^rover_monitor_samples_total / {print $2}')
sent=$(curl -s "$murl/metrics" | awk '/^rover_monitor_samples_sent_total / {print $2}')
echo "monitor_overhead: $samples samples, $sent acknowledged by the brain" >&2
awk -v t="$((t1 - t0))" -v hz="$hz" -v s0="$s0" -v s1="$s1" -v rss="$rss_kb" -v n="$samples" \
  'BEGIN { printf "bench=monitor_overhead cpu_pct=%.2f rss_mb=%.1f samples=%d\n", \
           t / hz / (s1 - s0) * 100, rss / 1024, n }'
