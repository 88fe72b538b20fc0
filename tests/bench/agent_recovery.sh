#!/usr/bin/env bash
# agent_recovery: seconds from a kill -9 of one worker to the next training
# step logged by any rank of the restarted group, the same DDP job
# (tests/bench/recovery_ddp.py, 2 workers, CPU, gloo) under Debian's torchrun
# (--monitor_interval 0.1, upstream's default; -r 1 -t 1, which 1.13 needs)
# and under rover-run; median of BENCH_RUNS (5) runs each, interleaved so
# that noise on the shared machine hits both.  The worker is killed after
# warm-up: 20 steps logged and, for rover-run, its warm interpreter ready.
# Progress and where rover-run's time goes (from its log) on stderr; last
# line: bench=agent_recovery torchrun_s=N rover_s=N ratio=R.
# PYTHON_EXEC picks another Python with torch (both launchers then use it,
# torchrun as PYTHON_EXEC -m torch.distributed.run).
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
PY=${PYTHON_EXEC:-/usr/bin/python3}
if [ -z "${PYTHON_EXEC:-}" ] && [ -x /usr/bin/torchrun ]; then
	TORCHRUN=/usr/bin/torchrun
else
	TORCHRUN="$PY -m torch.distributed.run"
fi
export PYTHON_EXEC=$PY
exec "$PY" - "$BIN" "${BENCH_RUNS:-5}" "$TORCHRUN" < <(cat <<'EOF'
import glob, os, signal, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.abspath("tests/bench"))
from benchlib import PG, START, STEP, TS, host_pid, say, stop_launcher, ts_of  # noqa: E402

bin_dir, runs, torchrun = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
SCRIPT = os.path.abspath("tests/bench/recovery_ddp.py")
WARM_STEPS = 20


def cmd_of(kind, logs):
    common = ["--standalone", "-r", "1", "-t", "1"]
    if kind == "torchrun":
        return torchrun + common + ["--monitor_interval", "0.1", "--log_dir", logs,
                                    "--max_restarts", "3", "--nproc_per_node", "2", SCRIPT]
    return [bin_dir + "/rover-run"] + common + ["--monitor-interval", "0.1", "--log-dir", logs,
                                                "--max-restarts", "3", "--nproc-per-node", "2",
                                                SCRIPT]


def text(d):
    """Everything the job wrote: the console and the per-rank log files."""
    out = []
    for p in [d + "/out", d + "/err"] + glob.glob(d + "/logs/**/*.log", recursive=True):
        try:
            with open(p, errors="replace") as f:
                out.append(f.read())
        except OSError:
            pass
    return "\n".join(out)


def rover_breakdown(err, kill_t, first_step, pg_t, start_t):
    """Where rover-run's restart went (ms), one phase after the other: the
    kill to the death seen, the others stopped and the failure reported, the
    new round, every worker forked (after a warm rank 0, the others wait for
    its store to listen), every worker's first line (python running the
    script), every worker in the process group, the first step."""
    ev = {}
    started = []
    for line in err.splitlines():
        m = TS.match(line)
        if not m or ts_of(m.group(1)) < kill_t - 0.005:
            continue
        t, msg = ts_of(m.group(1)), m.group(2)
        if msg == "worker started":
            started.append((t, "start=warm" in m.group(3)))
        elif msg not in ev:
            ev[msg] = t
    need = ("worker failed", "restarting the workers", "starting workers")
    if any(k not in ev for k in need) or not started:
        return None
    spawned = max(t for t, _ in started)
    ms = lambda a, b: (b - a) * 1000
    return {
        "detect": ms(kill_t, ev["worker failed"]),
        "stop": ms(ev["worker failed"], ev["restarting the workers"]),
        "rendezvous": ms(ev["restarting the workers"], ev["starting workers"]),
        "spawn": ms(ev["starting workers"], spawned),
        "python": ms(spawned, start_t),
        "process_group": ms(start_t, pg_t),
        "first_step": ms(pg_t, first_step),
        "warm": all(w for _, w in started),
    }


def one(kind, i):
    d = tempfile.mkdtemp(prefix="rv-bench-recovery-")
    env = dict(os.environ)
    with open(d + "/out", "w") as o, open(d + "/err", "w") as e:
        p = subprocess.Popen(cmd_of(kind, d + "/logs"), stdout=o, stderr=e,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        until = time.time() + 180
        victim = None
        while time.time() < until:
            t = text(d)
            steps = [int(m.group(1)) for m in STEP.finditer(t) if m.group(3) == "0"]
            ready = kind == "torchrun" or "warm interpreter ready" in t
            if steps and max(steps) >= WARM_STEPS and ready:
                for m in START.finditer(t):
                    if m.group(1) == "1" and m.group(3) == "0":
                        victim = int(m.group(2))
                break
            if p.poll() is not None:
                raise RuntimeError("%s exited %s before warm-up:\n%s" % (kind, p.returncode, t[-3000:]))
            time.sleep(0.05)
        if not victim:
            raise RuntimeError("%s: no warm-up within 180 s:\n%s" % (kind, text(d)[-3000:]))
        victim = host_pid(p.pid, victim) or victim
        kill_t = time.time()
        os.kill(victim, signal.SIGKILL)
        first = None
        while time.time() < kill_t + 120:
            t = text(d)
            after = [float(m.group(4)) for m in STEP.finditer(t) if m.group(3) == "1"]
            if after:
                first = min(after)
                break
            time.sleep(0.02)
        if first is None:
            raise RuntimeError("%s: no step within 120 s of the kill:\n%s" % (kind, text(d)[-3000:]))
        t = text(d)
        # the group steps once its last rank is there
        start_t = max(float(m.group(4)) for m in START.finditer(t) if m.group(3) == "1")
        pg_t = max(float(m.group(3)) for m in PG.finditer(t) if m.group(2) == "1")
        # the first step may be logged before a slow rank's "pg" line
        pg_t = min(pg_t, first)
        s = first - kill_t
        bd = None
        if kind == "rover":
            with open(d + "/err", errors="replace") as f:
                bd = rover_breakdown(f.read(), kill_t, first, pg_t, start_t)
        say("run %d %-8s recovery_s=%.3f new_worker_first_line_s=%.3f process_group_s=%.3f%s" % (
            i, kind, s, start_t - kill_t, pg_t - kill_t,
            "" if not bd else " " + " ".join("%s=%s" % (k, ("%.0fms" % v) if k != "warm" else v)
                                              for k, v in bd.items())))
        return s, bd
    finally:
        stop_launcher(p)
        subprocess.run(["rm", "-rf", d])


res = {"torchrun": [], "rover": []}
bds = []
for i in range(runs):
    for kind in (("torchrun", "rover") if i % 2 == 0 else ("rover", "torchrun")):
        s, bd = one(kind, i)
        res[kind].append(s)
        if bd:
            bds.append(bd)
tr, rv = statistics.median(res["torchrun"]), statistics.median(res["rover"])
if bds:
    keys = [k for k in bds[0] if k != "warm"]
    say("rover-run's restart, median ms: " + " ".join(
        "%s=%.0f" % (k, statistics.median(b[k] for b in bds)) for k in keys) +
        " (warm restarts: %d of %d)" % (sum(b["warm"] for b in bds), len(bds)))
print("bench=agent_recovery torchrun_s=%.3f rover_s=%.3f ratio=%.3f" % (tr, rv, rv / tr))
EOF
)
