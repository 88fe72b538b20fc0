#!/usr/bin/env bash
# agent_recovery_nodes: two nodes on this machine, one worker each, the DDP
# job of agent_recovery (tests/bench/recovery_ddp.py, gloo, CPU): seconds
# from a kill -9 of node B's worker (group rank 1: B joins after A) to the
# first training step of the re-formed world (the first step logged after
# both ranks' new process groups).  rover-run: a rover-master
# (--scheduler none) and two `rover-run --nnodes 2 --monitor-interval 0.1`;
# torchrun: two `torchrun --nnodes 2 --rdzv_backend c10d
# --monitor_interval 0.1` (-r 1 -t 1, which Debian's 1.13 needs).
# BENCH_RUNS (3) alternating pairs, median.  Where rover-run's time goes
# (from the logs of both nodes: node A's stop, the new round, the workers'
# first line, their process groups; with TORCH_CPP_LOG_LEVEL=INFO and
# TORCH_DISTRIBUTED_DEBUG=DETAIL in the environment, retries= counts
# torch's connect retries) on stderr.  Last line:
# bench=agent_recovery_nodes torchrun_s=N rover_s=N ratio=R node_loss_s=N
# (node_loss_s: kill -9 of node B's rover-run, its workers dying with it,
# to the first step of the world that a third rover-run, a warm spare,
# completes in B's place; in each of the BENCH_RUNS rounds, median).
# BENCH_ONLY=rover (or torchrun, or spare for node_loss_s) times that one
# alone.
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
exec "$PY" - "$BIN" "${BENCH_RUNS:-3}" "$TORCHRUN" < <(cat <<'EOF'
import glob, json, os, signal, socket, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.abspath("tests/bench"))
from benchlib import PG, START, STEP, TS, free_port, host_pid, say, stop_run, ts_of  # noqa: E402

bin_dir, runs, torchrun = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
SCRIPT = os.path.abspath("tests/bench/recovery_ddp.py")
WARM_STEPS = 20
SPEC = {"apiVersion": "elastic.rover.dev/v1alpha1", "kind": "ElasticJob",
        "metadata": {"name": "bench-nodes"},
        "spec": {"distributionStrategy": "AllreduceStrategy", "optimizeMode": "manual",
                 "replicaSpecs": {"worker": {"replicas": 2, "minReplicas": 2,
                                             "maxReplicas": 2}},
                 "datasets": [{"name": "train", "size": 1000, "shardSize": 10, "epochs": 1}]}}


def text(d):
    out = []
    for p in glob.glob(d + "/*.out") + glob.glob(d + "/*.err") + \
            glob.glob(d + "/logs*/**/*.log", recursive=True):
        try:
            with open(p, errors="replace") as f:
                out.append(f.read())
        except OSError:
            pass
    return "\n".join(out)


def events(path, kill_t):
    """rover-run's first log line of each msg after the kill."""
    ev = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = TS.match(line)
                if m and ts_of(m.group(1)) >= kill_t - 0.005 and m.group(2) not in ev:
                    ev[m.group(2)] = ts_of(m.group(1))
    except OSError:
        pass
    return ev


def spawn(cmd, d, name, env):
    o = open("%s/%s.out" % (d, name), "w")
    e = open("%s/%s.err" % (d, name), "w")
    p = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=env,
                         start_new_session=True)
    o.close()
    e.close()
    return p


def wait_for(d, needle, path, procs, secs):
    until = time.time() + secs
    while time.time() < until:
        try:
            with open(path, errors="replace") as f:
                if needle in f.read():
                    return
        except OSError:
            pass
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError("exited %s early:\n%s" % (p.returncode, text(d)[-3000:]))
        time.sleep(0.02)
    raise RuntimeError("no %r within %d s:\n%s" % (needle, secs, text(d)[-3000:]))


def kill_to_step(d, pid, what):
    """SIGKILL pid: the time of the kill and of the first step logged after
    two new process groups (the re-formed world's), at most 120 s later."""
    kill_t = time.time()
    os.kill(pid, signal.SIGKILL)
    while time.time() < kill_t + 120:
        t = text(d)
        pgs = [float(m.group(3)) for m in PG.finditer(t) if float(m.group(3)) > kill_t]
        if len(pgs) >= 2:
            after = [float(m.group(4)) for m in STEP.finditer(t) if float(m.group(4)) > max(pgs)]
            if after:
                return kill_t, min(after)
        time.sleep(0.02)
    raise RuntimeError("%s: no step within 120 s of the kill:\n%s" % (what, text(d)[-3000:]))


def start_nodes(d, env, names, wait_each):
    """A master whose world takes two nodes and a rover-run for each of
    names (node-a group rank 0, node-b 1, node-c a warm spare); node-a joins
    first, every one of them before the next when wait_each."""
    port = free_port()
    with open(d + "/job.json", "w") as f:
        json.dump(SPEC, f)
    master = spawn([bin_dir + "/rover-master", "--job", d + "/job.json", "--state-dir",
                    d + "/state", "--listen", "127.0.0.1:%d" % port, "--scheduler", "none",
                    "--log-level", "warn"], d, "master", env)
    until = time.time() + 30
    while time.time() < until:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    procs = [master]
    for name in names:
        e = dict(env, ROVER_NODE_NAME="node-" + name)
        procs.append(spawn([bin_dir + "/rover-run", "--nnodes", "2", "--nproc-per-node", "1",
                            "--rdzv-endpoint", "127.0.0.1:%d" % port, "--monitor-interval",
                            "0.1", "--max-restarts", "3", "--log-dir", d + "/logs" + name,
                            SCRIPT], d, name, e))
        if wait_each or name == "a":  # B joins second: group rank 1
            wait_for(d, "joined the rendezvous", d + "/%s.err" % name, procs, 30)
    return procs


def start_rover(d, env):
    return start_nodes(d, env, ("a", "b"), False)


def node_loss(i):
    """Seconds from a kill -9 of node B's rover-run (its workers die with
    it) to the first step of the world the spare node C completes."""
    d = tempfile.mkdtemp(prefix="rv-bench-spare-")
    env = dict(os.environ)
    procs = []
    try:
        procs = start_nodes(d, env, ("a", "b", "c"), True)
        until = time.time() + 180
        while time.time() < until:
            t = text(d)
            steps = [int(m.group(1)) for m in STEP.finditer(t)]
            ready = all("warm interpreter ready" in open(d + "/%s.err" % n,
                                                         errors="replace").read()
                        for n in ("a", "b", "c"))
            if steps and max(steps) >= WARM_STEPS and ready:
                break
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError("exited %s before warm-up:\n%s" % (
                        p.returncode, t[-3000:]))
            time.sleep(0.05)
        else:
            raise RuntimeError("spare: no warm-up within 180 s:\n%s" % text(d)[-3000:])
        kill_t, first = kill_to_step(d, procs[2].pid, "spare")
        ea, ec = events(d + "/a.err", kill_t), events(d + "/c.err", kill_t)
        ms = lambda x: "%.0fms" % ((x - kill_t) * 1000)
        say("run %d spare    node_loss_s=%.3f a_stops=%s c_starting=%s a_starting=%s" % (
            i, first - kill_t,
            ms(ea.get("the world changes: rendezvous again",
                      ea.get("worker failed", float("nan")))),
            ms(ec.get("starting workers", float("nan"))),
            ms(ea.get("starting workers", float("nan")))))
        return first - kill_t
    finally:
        stop_run(procs, d)


def start_torchrun(d, env):
    port = free_port()
    procs = []
    for name in ("a", "b"):
        procs.append(spawn(torchrun + ["--nnodes", "2", "--nproc_per_node", "1",
                                       "--rdzv_backend", "c10d", "--rdzv_endpoint",
                                       "127.0.0.1:%d" % port, "--rdzv_id", "bench",
                                       "--monitor_interval", "0.1", "--max_restarts", "3",
                                       "-r", "1", "-t", "1", "--log_dir", d + "/logs" + name,
                                       SCRIPT], d, name, env))
        if name == "a":
            time.sleep(1.0)  # A hosts the rendezvous store
    return procs


def one(kind, i):
    d = tempfile.mkdtemp(prefix="rv-bench-nodes-")
    env = dict(os.environ)
    procs = []
    try:
        procs = (start_rover if kind == "rover" else start_torchrun)(d, env)
        until = time.time() + 180
        victim = None
        while time.time() < until:
            t = text(d)
            steps = [int(m.group(1)) for m in STEP.finditer(t)]
            ready = kind == "torchrun" or (
                "warm interpreter ready" in open(d + "/a.err", errors="replace").read() and
                "warm interpreter ready" in open(d + "/b.err", errors="replace").read())
            if steps and max(steps) >= WARM_STEPS and ready:
                tb = text(d + "/logsb") if kind == "torchrun" else ""
                for m in START.finditer(open(d + "/b.out", errors="replace").read() +
                                        "\n" + tb):
                    victim = int(m.group(2))
                break
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError("%s exited %s before warm-up:\n%s" % (
                        kind, p.returncode, t[-3000:]))
            time.sleep(0.05)
        if not victim:
            raise RuntimeError("%s: no warm-up within 180 s:\n%s" % (kind, text(d)[-3000:]))
        victim = host_pid(procs[-1].pid, victim) or victim
        kill_t, first = kill_to_step(d, victim, kind)
        t = text(d)
        starts = sorted(float(m.group(4)) for m in START.finditer(t)
                        if float(m.group(4)) > kill_t)
        pgs = sorted(float(m.group(3)) for m in PG.finditer(t) if float(m.group(3)) > kill_t)
        s = first - kill_t
        ms = lambda x: "%.0fms" % ((x - kill_t) * 1000)
        extra = ""
        if kind == "rover":
            ea, eb = events(d + "/a.err", kill_t), events(d + "/b.err", kill_t)
            stop_a = ea.get("the world changes: rendezvous again",
                            ea.get("worker failed", float("nan")))
            extra = (" b_failed=%s a_stops=%s b_starting=%s a_starting=%s" % (
                ms(eb.get("worker failed", float("nan"))), ms(stop_a),
                ms(eb.get("starting workers", float("nan"))),
                ms(ea.get("starting workers", float("nan")))))
            extra += " retries=%d" % t.count("is not yet listening")
        say("run %d %-8s recovery_s=%.3f first_lines=%s pgs=%s%s" % (
            i, kind, s, "/".join(ms(x) for x in starts[-2:]),
            "/".join(ms(x) for x in pgs[-2:]), extra))
        return s
    finally:
        stop_run(procs, d)


res = {"torchrun": [], "rover": [], "spare": []}
only = os.environ.get("BENCH_ONLY")  # rover, torchrun or spare: that one alone
if only == "spare":
    print("bench=agent_recovery_nodes node_loss_s=%.3f" % statistics.median(
        [node_loss(i) for i in range(runs)]))
    sys.exit(0)
for i in range(runs):
    for kind in (("torchrun", "rover") if i % 2 == 0 else ("rover", "torchrun")):
        if not only or kind == only:
            res[kind].append(one(kind, i))
    if not only:
        res["spare"].append(node_loss(i))
if only:
    print("bench=agent_recovery_nodes %s_s=%.3f" % (only, statistics.median(res[only])))
    sys.exit(0)
tr, rv = statistics.median(res["torchrun"]), statistics.median(res["rover"])
print("bench=agent_recovery_nodes torchrun_s=%.3f rover_s=%.3f ratio=%.3f node_loss_s=%.3f" % (
    tr, rv, rv / tr, statistics.median(res["spare"])))
EOF
)
