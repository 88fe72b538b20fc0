#!/usr/bin/env bash
# soak: the stack of `make demo` less the brain (rover-master, two
# rover-run nodes of one worker each training examples/digits_rover.py
# through the master's shards, --nnodes 1:2) with a fault every
# BENCH_SOAK_EVERY_S seconds (60) for BENCH_SOAK_MIN minutes (30), each
# drawn at random (seed BENCH_SOAK_SEED, default the time; printed) from
# the fault suite's (tests/fault/README.md):
#   worker_kill     SIGKILL of a node's worker
#   worker_stop     a worker SIGSTOPped for 20 s, then continued
#   run_stop        a node's rover-run SIGSTOPped for 3 heartbeat timeouts
#   master_stop     the master SIGSTOPped for 12 s
#   master_kill     kill -9 of the master, restarted on its state folder
#   worker_master   a worker and the master killed together
# The nodes run with ROVER_COURIER=1 (trainer/README.md, "Off the step's
# path": shards fetched ahead, reports queued).  The job is sized to end about BENCH_SOAK_MIN minutes after its start
# (epochs of 1200 samples at the speed measured in its first 20 s); faults
# stop when the time is up and the job then finishes.  Last line:
#   bench=soak minutes=N faults=N lost=N duplicated=N goodput=P
#   held_s=N goodput_ex_held=P rss_growth_mb=N fds_growth=N seed=S
# lost, duplicated: samples of the shard log short of or beyond once per
# epoch (the rule of tests/lib/runfix.c rv_test_shard_account); goodput: the
# kept steps at the median step time over the wall time from the first
# load to the end; held_s: the seconds a fault itself held every rank
# still (the master stopped: every shard comes from it; a worker stopped:
# its peers wait in its allreduce), which no recovery can win back (a
# worker stopped is found by rover-run's --hang-timeout of 10 s, which sees
# its checkpoint steps stop, and restarted: its 20 s still count as held); goodput_ex_held: goodput with those seconds left out of the
# wall time, Rover's own share; rss_growth_mb, fds_growth: the most any daemon process
# (master, rover-run) grew between its first sample, 30 s in, and its
# last (a restarted master counts from its restart).  Before it, one line
# per fault (and one for the time before the first): the seconds of its
# window (to the next fault) not covered by kept steps at the median step
# time, and those beyond its hold (the first line's: the spread of the step
# times alone).  BENCH_KEEP=1 keeps
# the folder (logs) and says where.
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
exec /usr/bin/python3 - "$BIN" "${BENCH_SOAK_MIN:-30}" "${BENCH_SOAK_EVERY_S:-60}" \
  "${BENCH_SOAK_SEED:-$(date +%s)}" < <(cat <<'PYEOF'
import json, os, random, re, shutil, signal, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.abspath("tests/bench"))
from benchlib import free_port, host_pid, session_kill  # noqa: E402

bin_dir, minutes, every, seed = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
STARTED = re.compile(r'msg="worker started" rank=(\d+) local_rank=\d+ pid=(\d+)')
SIZE, SHARD, HB_MS = 1200, 16, 2000
FAULTS = ["worker_kill", "worker_stop", "run_stop", "master_stop", "master_kill", "worker_master"]


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class Stack:
    def __init__(self, d, epochs, tag):
        self.d, self.port = d, free_port()
        spec = {"apiVersion": "elastic.rover.dev/v1alpha1", "kind": "ElasticJob",
                "metadata": {"name": "soak"},
                "spec": {"distributionStrategy": "AllreduceStrategy", "optimizeMode": "manual",
                         "replicaSpecs": {"worker": {"replicas": 1, "minReplicas": 1,
                                                     "maxReplicas": 2}},
                         "datasets": [{"name": "train", "size": SIZE, "shardSize": SHARD,
                                       "epochs": epochs, "shuffle": True}]}}
        with open(d + "/job.json", "w") as f:
            json.dump(spec, f)
        self.master = None
        self.start_master()
        self.nodes = []
        env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3", ROVER_COURIER="1", ROVER_JOB_NAME="soak-%d-%s" % (os.getpid(), tag))
        for i in range(2):
            err = open("%s/node%d.log" % (d, i), "w")
            cmd = [bin_dir + "/rover-run", "--nnodes", "1:2", "--nproc-per-node", "1",
                   "--rdzv-endpoint", "127.0.0.1:%d" % self.port, "--max-restarts", "100000",
                   "--hang-timeout", "10", "examples/digits_rover.py", "--batch-size", "8",
                   "--step-sleep", "0.05", "--log-every", "1000000",
                   "--shard-log", d + "/shards.log", "--time-log", d + "/time.log"]
            self.nodes.append(subprocess.Popen(cmd, env=env, stdout=err, stderr=err,
                                               start_new_session=True))
            time.sleep(1)

    def start_master(self):
        log = open(self.d + "/master.log", "a")
        self.master = subprocess.Popen(
            [bin_dir + "/rover-master", "--job", self.d + "/job.json", "--state-dir",
             self.d + "/state", "--listen", "127.0.0.1:%d" % self.port,
             "--rdzv-heartbeat-timeout-ms", str(HB_MS)], stdout=log, stderr=log,
            start_new_session=True)
        for _ in range(300):
            if "rover-master ready" in read(self.d + "/master.log").split("state restored")[-1]:
                return
            time.sleep(0.05)

    def worker(self, i):
        pids = [int(m.group(2)) for m in STARTED.finditer(read("%s/node%d.log" % (self.d, i)))]
        return host_pid(self.nodes[i].pid, pids[-1]) if pids else None

    def stages(self, i):
        """Node i's rover-run processes (the one started and the stages below)."""
        out, todo = [], [self.nodes[i].pid]
        while todo:
            p = todo.pop()
            out.append(p)
            for s in os.listdir("/proc"):
                if s.isdigit() and read("/proc/%s/comm" % s).strip() == "rover-run":
                    st = read("/proc/%s/stat" % s)
                    if st and int(st.rsplit(")", 1)[1].split()[1]) == p:
                        todo.append(int(s))
        return out


def fd_kind(pid, fd):
    """What fd of pid is, without its number: "socket", "pipe",
    "anon_inode:[pidfd]", a file's path; "" once it is gone."""
    try:
        t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
    except OSError:
        return ""
    return re.sub(r":\[\d+\]$", "", t)


def usage(pid):
    """RSS (MiB), open fds, their kinds (a count each) and the name of pid,
    or None once it is gone."""
    try:
        rss = [int(l.split()[1]) for l in open("/proc/%d/status" % pid) if l.startswith("VmRSS:")]
        fds = os.listdir("/proc/%d/fd" % pid)
    except (OSError, IndexError):
        return None
    kinds = {}
    for fd in fds:
        k = fd_kind(pid, fd)
        kinds[k] = kinds.get(k, 0) + 1
    return rss[0] / 1024.0, len(fds), kinds, read("/proc/%d/comm" % pid).strip()


def fds_grown(first, last):
    """A line naming the fds that the daemon with the most growth gained,
    by kind ("" when none grew)."""
    grown = {p: last[p][1] - first[p][1] for p in first}
    p = max(grown, key=grown.get) if grown else None
    if p is None or grown[p] <= 0:
        return ""
    a, b = first[p][2], last[p][2]
    more = ["%+d %s" % (b.get(k, 0) - a.get(k, 0), k or "?") for k in sorted(set(a) | set(b))
            if b.get(k, 0) != a.get(k, 0)]
    return "fds of %s (pid %d) grew by %d: %s" % (first[p][3], p, grown[p], ", ".join(more))


HELD = {"worker_stop": 20, "master_stop": 12}


def fault(st, name):
    node = random.randrange(2)
    if name in ("worker_kill", "worker_master", "worker_stop"):
        pid = st.worker(node)
        if not pid:
            return False
        if name == "worker_stop":
            os.kill(pid, signal.SIGSTOP)
            time.sleep(HELD[name])
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass  # found hung and stopped by rover-run meanwhile
            return True
        os.kill(pid, signal.SIGKILL)
    if name in ("master_kill", "worker_master"):
        st.master.kill()
        st.master.wait()
        time.sleep(1)
        st.start_master()
    elif name == "master_stop":
        st.master.send_signal(signal.SIGSTOP)
        time.sleep(HELD[name])
        st.master.send_signal(signal.SIGCONT)
    elif name == "run_stop":
        pids = st.stages(node)
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        time.sleep(3 * HB_MS / 1000)
        for p in reversed(pids):
            os.kill(p, signal.SIGCONT)
    return True


def account(path):
    """lost, duplicated, kept steps: runfix.c's rule (a load of S drops the
    lines of steps after S logged before it, and the later lines of ranks the
    loaded world does not have)."""
    entries, world, epochs = [], 1 << 30, None
    for ln in read(path).splitlines():
        f = ln.split()
        if f[0] == "load":
            s = int(f[1])
            entries = [e for e in entries if e[1] <= s]
            world = int(f[2].split("=")[1]) if len(f) > 2 else 1 << 30
            continue
        if int(f[0]) >= world:
            continue
        entries.append((int(f[0]), int(f[1]), [int(x) for x in f[2].split(",")] if len(f) > 2 else []))
    return entries


def recovery(started, kept, t_first, med):
    """Per fault, from its start to the next one's (the first line: the
    load to the first fault, none): the seconds not covered by kept steps
    at the median step time, and of those the ones beyond its hold."""
    if not kept:
        return
    times, end = sorted(kept.values()), max(kept.values())
    marks = [(t_first, "none")] + started + [(end, None)]
    for (a, name), (b, _) in zip(marks, marks[1:]):
        n = sum(1 for t in times if a <= t < b)
        lost = (b - a) - n * med
        say("recovery %-13s at %4.0f s: window %5.1f s, %4d steps kept, lost %5.1f s, "
            "beyond its hold %5.1f s" % (name, a - t_first, b - a, n, lost,
                                         lost - HELD.get(name, 0)))


def main():
    random.seed(seed)
    d = tempfile.mkdtemp(prefix="rover-soak-")
    # the speed, measured by a first stack stopped after 20 s
    st = Stack(d, 100000, "speed")
    tlog = d + "/time.log"
    while not read(tlog):
        time.sleep(0.2)
    t0 = time.time()
    time.sleep(20)
    steps = len([l for l in read(tlog).splitlines() if not l.startswith("load")])
    samples_per_s = steps * 16 / 20.0
    epochs = max(1, int(minutes * 60 * samples_per_s * 0.9 / SIZE))
    say("seed %d: %.0f samples/s, %d epochs of %d for about %.0f min" % (seed, samples_per_s, epochs, SIZE, minutes))
    # restart the stack with the job sized
    for p in st.nodes:
        os.killpg(p.pid, signal.SIGKILL)
    st.master.kill()
    for p in st.nodes + [st.master]:
        p.wait()
    session_kill(st.nodes[0].pid)
    session_kill(st.nodes[1].pid)
    shutil.rmtree(d, ignore_errors=True)
    d = tempfile.mkdtemp(prefix="rover-soak-")
    st = Stack(d, epochs, "run")
    tlog = d + "/time.log"
    while not read(tlog):
        time.sleep(0.2)
    t0 = time.time()
    first, last, faults, nxt, held, started = {}, {}, 0, t0 + every, 0, []
    while any(p.poll() is None for p in st.nodes):
        now = time.time()
        if now - t0 >= 30:
            for p in [st.master.pid] + [q for i in range(2) for q in st.stages(i)[:1]]:
                u = usage(p)
                if u:
                    first.setdefault(p, u)
                    last[p] = u
        if now >= nxt and now < t0 + minutes * 60:
            name = random.choice(FAULTS)
            if fault(st, name):
                faults += 1
                held += HELD.get(name, 0)
                started.append((now, name))
                say("%.0f s: fault %d %s" % (time.time() - t0, faults, name))
            nxt += every
        time.sleep(1)
    end = time.time()
    codes = [p.returncode for p in st.nodes]
    st.master.send_signal(signal.SIGTERM)  # no scheduler: it serves until told
    st.master.wait(timeout=60)
    entries = account(d + "/shards.log")
    count = {}
    for _, _, idx in entries:
        for i in idx:
            count[i] = count.get(i, 0) + 1
    lost = sum(max(0, epochs - count.get(i, 0)) for i in range(SIZE))
    dup = sum(max(0, c - epochs) for c in count.values())
    kept, prev, intervals, t_first = {}, None, [], None
    for ln in read(tlog).splitlines():
        f = ln.split()
        if f[0] == "load":
            s, t = int(f[1]), float(f[2])
            t_first = t_first or t
            kept = {k: v for k, v in kept.items() if k <= s}
            prev = t
        else:
            s, t = int(f[0]), float(f[1])
            intervals.append(t - prev)
            kept[s] = t
            prev = t
    med = statistics.median(intervals) if intervals else 0
    wall = max(kept.values()) - t_first if kept else 0
    goodput = len(kept) * med / wall if kept else 0
    ex_held = len(kept) * med / (wall - held) if kept and wall > held else 0
    recovery(started, kept, t_first, med)
    rss = max([last[p][0] - first[p][0] for p in first] or [0])
    fds = max([last[p][1] - first[p][1] for p in first] or [0])
    if fds_grown(first, last):
        say(fds_grown(first, last))
    say("nodes exited %s; wall %.1f min" % (codes, (end - t0) / 60))
    if os.environ.get("BENCH_KEEP") == "1":
        say("kept " + d)
    else:
        shutil.rmtree(d, ignore_errors=True)
    for f in os.listdir("/dev/shm"):
        if f.startswith("rover-soak-%d-" % os.getpid()):
            os.unlink("/dev/shm/" + f)
    print("bench=soak minutes=%.1f faults=%d lost=%d duplicated=%d goodput=%.3f held_s=%d "
          "goodput_ex_held=%.3f rss_growth_mb=%.1f fds_growth=%d seed=%d"
          % ((end - t0) / 60, faults, lost, dup, goodput, held, ex_held, rss, fds, seed))
    return 0 if codes == [0, 0] and lost == 0 and dup == 0 else 1


sys.exit(main())
PYEOF
)
