#!/bin/sh
# tests/gpu/run.sh: the checks that need an NVIDIA GPU and a PyTorch built
# with CUDA.  Not part of `make test` (CI machines have no GPU); run it by
# hand on a GPU machine after `make`:
#   tests/gpu/run.sh [OUTDIR]
# Environment: ROVER_BIN_DIR (default build/bin), PYTHON_EXEC (the python
# with torch; default python3), ROVER_BENCH_MIB (gpu_flash_ckpt size).
# Checks, each printed "ok" or "FAIL":
#   gpuinfo     rover-gpuinfo sees the GPUs the driver has (nvidia-smi -L)
#   util        with matrix products running on GPU 0, its util line (NVML)
#               says the GPU is busy (>= 50%)
#   train       rover-run --nproc-per-node gpu trains digits on cuda:N to
#               the accuracy target, workers forked from the warm
#               interpreter (CUDA must not be touched before the fork)
#   cold        the same with --no-warm
#   restart     a worker killed with -9 mid-run: the group restarts, loads
#               the GPU state from the in-memory checkpoint, bit for bit
#               (the digest logged at that save), and finishes
#   ckpt        tests/gpu/ckpt_gpu.py: a 1 GiB GPU state saved and loaded
#               exactly; its bench= line is the GPU checkpoint figure
#   netcheck    two rover-run nodes, one GPU each, --network-check: both
#               verdicts come from the collective on NCCL (backend=nccl,
#               verdict=ok); needs two GPUs (NCCL takes one per rank), else
#               printed "skip" with why
# Exit 0 when every check passed (a skip is not a failure).
set -u
BIN=${ROVER_BIN_DIR:-build/bin}
OUT=${1:-/tmp/rover-gpu}
export PYTHON_EXEC=${PYTHON_EXEC:-python3}
mkdir -p "$OUT"
fail=0
say() { printf '%s\n' "$*"; }
result() { if [ "$2" = 0 ]; then say "ok   $1"; else say "FAIL $1 ($3)"; fail=1; fi; }

# gpuinfo
"$BIN/rover-gpuinfo" >"$OUT/gpuinfo.txt" 2>&1
cat "$OUT/gpuinfo.txt"
want=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
got=$(sed -n 's/^count //p' "$OUT/gpuinfo.txt")
[ "${got:-0}" -ge 1 ] && [ "$got" = "$want" ]
result gpuinfo $? "count ${got:-?}, nvidia-smi lists $want"

# util: busy GPU 0 for a few seconds, read it in the middle
rm -f "$OUT/busy"
"$PYTHON_EXEC" -c '
import sys, time, torch
a = torch.rand(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
(a @ a).sum().item()
open(sys.argv[1], "w").close()
t = time.time()
while time.time() - t < 5:
    a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
' "$OUT/busy" &
busy=$!
i=0
while [ ! -e "$OUT/busy" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
sleep 2
"$BIN/rover-gpuinfo" >"$OUT/gpuinfo-busy.txt" 2>&1
wait $busy
cat "$OUT/gpuinfo-busy.txt"
pct=$(sed -n 's/^util 0 \([0-9]*\) .*/\1/p' "$OUT/gpuinfo-busy.txt")
[ "${pct:-0}" -ge 50 ]
result util $? "util of GPU 0 under load: ${pct:-no util line}"

# train (warm) and cold
for mode in train cold; do
	extra=""
	[ $mode = cold ] && extra=--no-warm
	ROVER_STANDALONE_DATASET=1437:16:3 timeout 300 "$BIN/rover-run" --standalone \
		--nproc-per-node gpu $extra examples/digits_rover.py --target 0.9 \
		>"$OUT/$mode.log" 2>&1
	rc=$?
	grep -E 'test_accuracy|warm' "$OUT/$mode.log"
	[ $rc = 0 ] && grep -q 'test_accuracy=' "$OUT/$mode.log"
	result $mode $? "rover-run exit $rc, see $OUT/$mode.log"
done

# restart: kill rank 0's worker after 40 saved steps
rm -rf "$OUT/ckpt" "$OUT/digest.log"
ROVER_STANDALONE_DATASET=1437:8:6 "$BIN/rover-run" --standalone \
	--nproc-per-node gpu --max-restarts 2 --ckpt-dir "$OUT/ckpt" --warm-import sklearn.datasets \
	examples/digits_rover.py --batch-size 8 --step-sleep 0.02 \
	--digest-log "$OUT/digest.log" --time-log "$OUT/time.log" >"$OUT/restart.log" 2>&1 &
run=$!
i=0
while [ $i -lt 600 ] && [ "$(cat "$OUT/digest.log" 2>/dev/null | wc -l)" -lt 40 ]; do
	sleep 0.1
	i=$((i + 1))
done
victim=""
for p in $(pgrep -P $run); do
	tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=0' && victim=$p
done
t0=$(date +%s.%N)
[ -n "$victim" ] && kill -9 "$victim"
wait $run
rc=$?
grep -E 'loaded step|test_accuracy|warm' "$OUT/restart.log"
line=$(grep -m1 -o 'loaded step=.*' "$OUT/restart.log")
step=$(printf '%s' "$line" | sed -n 's/^loaded step=\([0-9]*\) .*/\1/p')
dig=$(printf '%s' "$line" | sed -n 's/.*digest=\([0-9a-f]*\).*/\1/p')
saved=$(awk -v s="$step" '$1 == s { print $2 }' "$OUT/digest.log" | tail -n 1)
# kill -9 to the restarted worker's state loaded, and to its next step saved
# (time.log: "load STEP TIME" at each start, "STEP TIME" at each save)
t1=$(awk '$1 == "load" { n++ } n == 2 { print $3; exit }' "$OUT/time.log")
t2=$(awk '$1 == "load" { n++; next } n == 2 { print $2; exit }' "$OUT/time.log")
awk -v a="$t0" -v b="${t1:-0}" -v c="${t2:-0}" 'BEGIN {
	printf "restart: kill -9 to state loaded %.2f s, to the next step saved %.2f s\n", b - a, c - a }'
# The digest of the loaded step is logged unless the kill fell between that
# save and its log line: then the step must be the one after the last logged.
last=$(awk '$1 == "load" { n++ } n == 1 && $1 != "load" { s = $1 } END { print s }' "$OUT/time.log")
if [ -z "$saved" ] && [ "$step" = "$((last + 1))" ]; then
	saved=$dig
	echo "restart: step $step was saved but not yet logged at the kill: digest not compared"
fi
[ -n "$victim" ] && [ $rc = 0 ] && [ -n "$dig" ] && [ "$dig" = "$saved" ] &&
	printf '%s' "$line" | grep -q 'from=memory'
result restart $? "victim ${victim:-none}, exit $rc, step $step digest ${dig:-none} saved ${saved:-none}"

# ckpt: the GPU flash checkpoint figure
timeout 300 "$BIN/rover-run" --standalone --nproc-per-node 1 tests/gpu/ckpt_gpu.py \
	>"$OUT/ckpt.log" 2>&1
rc=$?
grep -E 'loaded|bench=' "$OUT/ckpt.log"
[ $rc = 0 ] && grep -q 'exact=1' "$OUT/ckpt.log"
result ckpt $? "exit $rc, see $OUT/ckpt.log"
# netcheck: the network check's collective on NCCL, a node per GPU
netcheck() {
	local d="$OUT/netcheck" port master i nodes rc=0
	rm -rf "$d" && mkdir -p "$d"
	echo '{"apiVersion":"elastic.rover.dev/v1alpha1","kind":"ElasticJob",
 "metadata":{"name":"gpu-netcheck"},"spec":{"distributionStrategy":"AllreduceStrategy",
 "optimizeMode":"manual","replicaSpecs":{"worker":{"replicas":2,"minReplicas":2,"maxReplicas":2}},
 "datasets":[{"name":"train","size":100,"shardSize":10,"epochs":1}]}}' >"$d/job.json"
	echo 'import os; print("W=" + os.environ["WORLD_SIZE"], flush=True)' >"$d/w.py"
	port=$("$PYTHON_EXEC" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"$BIN/rover-master" --job "$d/job.json" --state-dir "$d/state" --listen "127.0.0.1:$port" \
		--scheduler none --log-level warn >"$d/master.log" 2>&1 &
	master=$!
	nodes=""
	for i in 0 1; do
		CUDA_VISIBLE_DEVICES=$i ROVER_NODE_NAME=g$i timeout 300 "$BIN/rover-run" --nnodes 2 \
			--nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --network-check "$d/w.py" \
			>"$d/out$i" 2>"$d/err$i" &
		nodes="$nodes $!"
	done
	for i in $nodes; do wait "$i" || rc=$?; done
	kill $master 2>/dev/null
	wait $master 2>/dev/null
	grep -h 'network check done' "$d"/err0 "$d"/err1 | sed 's/.*check=/check=/'
	[ $rc = 0 ] && [ "$(grep -h 'network check done' "$d"/err0 "$d"/err1 |
		grep -c 'verdict=ok.*backend=nccl')" = 2 ]
}
if [ "${want:-0}" -ge 2 ]; then
	netcheck
	result netcheck $? "see $OUT/netcheck"
else
	say "skip netcheck (${want:-0} GPU: NCCL pairs need a GPU per node, two at least)"
fi
exit $fail
