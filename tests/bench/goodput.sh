#!/usr/bin/env bash
# goodput: examples/digits_rover.py (2 workers, CPU, gloo) under rover-run
# with a flash checkpoint every step (--ckpt-dir: persisted as well) for
# BENCH_GOODPUT_S seconds (default 300), a worker killed with SIGKILL every
# BENCH_KILL_EVERY_S (default 30; alternating ranks 0 and 1).  Two runs, one
# after the other: the example's own model (~10,000 parameters, a checkpoint
# costs next to nothing), then the same with BENCH_GOODPUT_STATE_MIB (default
# 256; 0 skips the run) MiB of extra state in each worker (--pad-mib), saved
# every step like the rest.  Rank 0 logs each step's end and each load
# (--time-log).  goodput: the time of the steps that were kept (a step's time
# runs from the previous step's end, or from the load, to its own end; the
# steps after the one a restart loaded are not kept) over the wall time from
# the first load to the end of the window (when rover-run is stopped, not
# its last step: a restart still loading then is lost time), so the one cold
# start is left out and every restart is in; a step's time holds its (blocking) save.  save_share: the
# kept steps' save time (rank 0's) over the same wall time, so goodput -
# save_share is the share with saving counted as lost.  steps_lost_max: the
# most steps a fault cost (last step logged before it - step loaded after).
# steps: the steps kept.  BENCH_GOODPUT_OVERLAP=1: the workers' saves
# overlap the next step (digits_rover.py --overlap); BENCH_KEEP=1 keeps each
# run's folder (rover-run's log, the time log) and says where.  Last line:
#   bench=goodput seconds=N faults=N goodput=P steps_lost_max=N steps=N
#   save_share=S state_mib=M big_seconds=N big_faults=N big_goodput=P
#   big_steps_lost_max=N big_steps=N big_save_share=S
# (the big_ keys: the run with M MiB of state per worker).
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
exec /usr/bin/python3 - "$BIN" "${BENCH_GOODPUT_S:-300}" "${BENCH_KILL_EVERY_S:-30}" \
  "${BENCH_GOODPUT_STATE_MIB:-256}" < <(cat <<'PYEOF'
import os, re, shutil, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.abspath("tests/bench"))
from benchlib import host_pid  # noqa: E402

bin_dir, seconds, every = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
state_mib = int(sys.argv[4])
STARTED = re.compile(r'msg="worker started" rank=(\d+) local_rank=\d+ pid=(\d+)')


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def lines(tlog):
    try:
        with open(tlog) as f:
            return f.read().splitlines()
    except OSError:
        return []


def worker(d, rank, root):
    with open(d + "/err", errors="replace") as f:  # workers may print any bytes
        pids = [int(m.group(2)) for m in STARTED.finditer(f.read()) if int(m.group(1)) == rank]
    return host_pid(root, pids[-1]) if pids else None


def run(pad_mib):
    """One run with pad_mib MiB of extra state per worker: its keys."""
    d = tempfile.mkdtemp(prefix="rover-goodput-")
    tlog = d + "/time.log"
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3",
               ROVER_JOB_NAME="goodput-%d-%d" % (os.getpid(), pad_mib),
               ROVER_STANDALONE_DATASET="1437:16:1000", ROVER_LOG_LEVEL="info")
    cmd = [bin_dir + "/rover-run", "--standalone", "--nproc-per-node", "2", "--max-restarts",
           "100000", "--ckpt-dir", d + "/ckpt", "--ckpt-keep", "2", "examples/digits_rover.py",
           "--batch-size", "16", "--log-every", "1000000", "--time-log", tlog,
           "--pad-mib", str(pad_mib)] + (["--overlap"] if os.environ.get("BENCH_GOODPUT_OVERLAP") == "1" else [])
    err = open(d + "/err", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=err, stderr=err, start_new_session=True)
    # the first load: the job is up (the one cold start is not measured)
    while not lines(tlog):
        if proc.poll() is not None:
            sys.exit("rover-run exited: see " + d + "/err")
        time.sleep(0.1)
    t0 = time.time()
    faults, nxt = 0, t0 + every
    while time.time() < t0 + seconds:
        time.sleep(min(0.2, max(0.0, nxt - time.time())))
        if time.time() >= nxt and time.time() < t0 + seconds - 1:
            rank = faults % 2
            pid = worker(d, rank, proc.pid)
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                    faults += 1
                    say("killed rank %d pid %d at %.0f s" % (rank, pid, time.time() - t0))
                except ProcessLookupError:
                    pass
            nxt += every
    stop_t = time.time()  # the window's end: a stall before it is lost time too
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)

    kept, saves = {}, {}
    prev, last, lost_max, loads, first_t, end_t = None, None, 0, 0, None, None
    for ln in lines(tlog):
        f = ln.split()
        if f[0] == "load":
            s, t = int(f[1]), float(f[2])
            if first_t is None:
                first_t = t
            for k in [k for k in kept if k > s]:
                del kept[k]
            if last is not None:
                lost_max = max(lost_max, last - s)
            loads += 1
            prev, last = t, s
        else:
            s, t = int(f[0]), float(f[1])
            kept[s] = t - prev
            saves[s] = float(f[2]) if len(f) > 2 else 0.0
            prev, last, end_t = t, s, t
    wall = max(end_t, stop_t) - first_t
    good = sum(kept.values()) / wall
    save = sum(saves[k] for k in kept) / wall
    say("pad %d MiB: wall %.1f s, %d steps kept, %d loads" % (pad_mib, wall, len(kept), loads))
    if os.environ.get("BENCH_KEEP") == "1":
        say("kept " + d)
    else:
        shutil.rmtree(d, ignore_errors=True)
    return "seconds=%.0f faults=%d goodput=%.4f steps_lost_max=%d steps=%d save_share=%.4f" % (
        wall, faults, good, lost_max, len(kept), save)


small = run(0)
line = "bench=goodput " + small
if state_mib > 0:
    big = run(state_mib)
    line += " state_mib=%d " % state_mib + " ".join("big_" + kv for kv in big.split())
print(line)
PYEOF
)
