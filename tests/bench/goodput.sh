#!/usr/bin/env bash
# goodput: examples/digits_rover.py (2 workers, CPU, gloo) under rover-run
# with a flash checkpoint every step (--ckpt-dir: persisted as well) for
# BENCH_GOODPUT_S seconds (default 300), a worker killed with SIGKILL every
# BENCH_KILL_EVERY_S (default 30; alternating ranks 0 and 1).  Rank 0 logs
# each step's end and each load (--time-log).  goodput: the time of the
# steps that were kept (a step's time runs from the previous step's end, or
# from the load, to its own end; the steps after the one a restart loaded
# are not kept) over the wall time from the first load to the end, so the
# one cold start is left out and every restart is in.  steps_lost_max: the
# most steps a fault cost (last step logged before it - step loaded after).
# Last line: bench=goodput seconds=N faults=N goodput=P steps_lost_max=N.
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
exec /usr/bin/python3 - "$BIN" "${BENCH_GOODPUT_S:-300}" "${BENCH_KILL_EVERY_S:-30}" < <(cat <<'PYEOF'
import os, re, shutil, signal, subprocess, sys, tempfile, time

bin_dir, seconds, every = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
d = tempfile.mkdtemp(prefix="rover-goodput-")
tlog = d + "/time.log"
env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3", ROVER_JOB_NAME="goodput-%d" % os.getpid(),
           ROVER_STANDALONE_DATASET="1437:16:1000", ROVER_LOG_LEVEL="info")
cmd = [bin_dir + "/rover-run", "--standalone", "--nproc-per-node", "2", "--max-restarts", "100000",
       "--ckpt-dir", d + "/ckpt", "--ckpt-keep", "2", "examples/digits_rover.py",
       "--batch-size", "16", "--log-every", "1000000", "--time-log", tlog]
err = open(d + "/err", "w")
run = subprocess.Popen(cmd, env=env, stdout=err, stderr=err, start_new_session=True)
STARTED = re.compile(r'msg="worker started" rank=(\d+) local_rank=\d+ pid=(\d+)')


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def lines():
    try:
        with open(tlog) as f:
            return f.read().splitlines()
    except OSError:
        return []


def host_pid(pid):
    """The pid here of the process below rover-run whose pid in the job's PID
    namespace (the one rover-run logs) is pid: the last of NSpid."""
    kids = {}
    for s in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % s) as f:
                kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(s))
        except (OSError, IndexError, ValueError):
            continue
    todo = [run.pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            try:
                with open("/proc/%d/status" % c) as f:
                    ns = [l.split()[1:] for l in f if l.startswith("NSpid:")]
            except OSError:
                continue
            if ns and ns[0] and int(ns[0][-1]) == pid:
                return c
            todo.append(c)
    return None


def worker(rank):
    with open(d + "/err") as f:
        pids = [int(m.group(2)) for m in STARTED.finditer(f.read()) if int(m.group(1)) == rank]
    return host_pid(pids[-1]) if pids else None


# the first load: the job is up (the one cold start is not measured)
while not lines():
    if run.poll() is not None:
        sys.exit("rover-run exited: see " + d + "/err")
    time.sleep(0.1)
t0 = time.time()
faults, nxt = 0, t0 + every
while time.time() < t0 + seconds:
    time.sleep(min(0.2, max(0.0, nxt - time.time())))
    if time.time() >= nxt and time.time() < t0 + seconds - 1:
        rank = faults % 2
        pid = worker(rank)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
                faults += 1
                say("killed rank %d pid %d at %.0f s" % (rank, pid, time.time() - t0))
            except ProcessLookupError:
                pass
        nxt += every
os.killpg(run.pid, signal.SIGTERM)
run.wait(timeout=60)

kept, prev, last, lost_max, loads, first_t, end_t = {}, None, None, 0, 0, None, None
for ln in lines():
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
        prev, last, end_t = t, s, t
wall = end_t - first_t
good = sum(kept.values()) / wall
say("wall %.1f s, %d steps kept, %d loads" % (wall, len(kept), loads))
shutil.rmtree(d, ignore_errors=True)
print("bench=goodput seconds=%.0f faults=%d goodput=%.4f steps_lost_max=%d"
      % (wall, faults, good, lost_max))
PYEOF
)
