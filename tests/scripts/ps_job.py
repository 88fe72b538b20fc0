#!/usr/bin/python3
"""The parameter-server example (examples/ps_rover.py) run by the real
rover-master (local scheduler, both roles), with plans handed to the master
the way rover-brain hands them: a stand-in brain on loopback answers the
master's registration with a create plan (2 PS, 2 workers) and its plan
long-poll with the plans this script queues.  While the job trains:

  plan 2: 3 PS / 4 workers  (the table re-partitioned from 2 to 3 PS)
  kill -9 of ps-1           (it comes back from its flash checkpoint)
  plan 3: 2 PS / 2 workers  (re-partitioned from 3 to 2; workers 2 and 3 leave)
  plan 4: migrate ps-0      (relaunched with 3000 MB, its partition handed over)

Then it checks, printing one "ok"/"not ok" line each: the job succeeded with
the eval loss at or below the target; every sample was trained exactly once
(the workers' shard log); each plan's PS count was reached by a
re-partition and ps-1 was relaunched; and no update was lost or applied
twice: each row's count of applied updates in the PS dumps equals the count
the shard log implies (a step adds one to each distinct row of its batch
and to every dense row).  Exits 1 when a check failed.

  tests/scripts/ps_job.py [--keep]   (ROVER_BIN_DIR: build/bin)
"""
import http.server
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "examples"))
import ps_rover  # noqa: E402

SAMPLES, SHARD, BATCH = 40000, 256, 64
FAST, SLOW = "0.02", "1.0"  # seconds per step: training, waiting for a plan's effect
TIMEOUT_S = int(os.environ.get("PS_JOB_TIMEOUT_S", "420"))
failed = 0


def check(ok, what, detail=""):
    global failed
    print(("ok - " if ok else "not ok - ") + what + (f": {detail}" if detail and not ok else ""),
          flush=True)
    if not ok:
        failed = 1
    return ok


class Brain:
    """What the master's brain link talks to: registration, metrics and
    events taken, running plans handed out by id."""

    def __init__(self, create):
        self.plans, self.cv = [], threading.Condition()
        self.create = create
        brain = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, code, obj):
                b = json.dumps(obj).encode() if obj is not None else b""
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(b)))
                self.end_headers()
                self.wfile.write(b)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                if self.path == "/v1/jobs":
                    return self.reply(201, {"uid": "ps-job-1", "plan": brain.create})
                if self.path.endswith("/metrics"):
                    return self.reply(200, {"accepted": len(body.get("samples", []))})
                if self.path.endswith("/events"):
                    return self.reply(200, {})
                return self.reply(404, {"error": "no such route"})

            def do_GET(self):
                if "/plan?" not in self.path:
                    return self.reply(404, {"error": "no such route"})
                q = dict(kv.split("=", 1) for kv in self.path.split("?", 1)[1].split("&") if kv)
                after, wait = int(q.get("after", "0")), int(q.get("wait", "0"))
                deadline = time.time() + wait
                with brain.cv:
                    while True:
                        ready = [p for p in brain.plans if p["id"] > after]
                        if ready or time.time() >= deadline:
                            break
                        brain.cv.wait(deadline - time.time())
                if not ready:
                    return self.reply(204, None)
                return self.reply(200, ready[-1])

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def plan(self, pid, ps, workers, reason, migrate=None):
        p = plan(pid, "running", ps, workers, reason)
        if migrate:
            p["migrate"] = [migrate]
        with self.cv:
            self.plans.append(p)
            self.cv.notify_all()


def plan(pid, stage, ps, workers, reason):
    zero = {"cpu": 0, "memory_mb": 0, "gpu": 0}
    return {"job": "ps-job-1", "id": pid, "stage": stage, "algorithm": "test", "reason": reason,
            "predicted_speed": 0, "based_on_ts": 0,
            "groups": {"ps": {"count": ps, "resource": zero},
                       "worker": {"count": workers, "resource": zero}},
            "launch": [], "remove": [], "migrate": []}


def free_ports(n):
    """A base port with n free ports above it, below the ephemeral range
    (where a busy machine's outgoing connections leave every other port
    taken), checked as the PS bind them (SO_REUSEADDR)."""
    rng = random.Random(os.getpid() ^ time.time_ns())
    for _ in range(200):
        base = rng.randrange(20000, 32000)
        ok = True
        for p in range(base, base + n):
            t = socket.socket()
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return base
    raise RuntimeError("no free port range")


class Job:
    def __init__(self, tmp, brain):
        self.tmp, self.brain = tmp, brain
        self.shard_log = os.path.join(tmp, "shards.log")
        self.dumps = os.path.join(tmp, "dumps")
        os.makedirs(self.dumps)
        self.name = f"ps-test-{os.getpid()}"
        port_base = free_ports(8)
        self.pace_file = os.path.join(tmp, "pace")
        self.pace(FAST)
        common = ["--port-base", str(port_base), "--samples", str(SAMPLES),
                  "--batch-size", str(BATCH), "--rows", "50000", "--pace-file", self.pace_file,
                  "--poll-s", "0.2"]
        ex = os.path.join(TOP, "examples", "ps_rover.py")
        spec = {"apiVersion": "elastic.rover.dev/v1alpha1", "kind": "ElasticJob",
                "metadata": {"name": self.name},
                "spec": {"distributionStrategy": "ParameterServerStrategy",
                         "optimizeMode": "cluster",
                         "replicaSpecs": {
                             "ps": {"replicas": 2, "minReplicas": 1, "maxReplicas": 4,
                                    "restartCount": 3, "stateHandover": "flashCheckpoint",
                                    "command": ["/usr/bin/python3", ex, "ps", "--dump-dir",
                                                self.dumps] + common},
                             "worker": {"replicas": 2, "minReplicas": 1, "maxReplicas": 4,
                                        "restartCount": 3,
                                        "command": ["/usr/bin/python3", ex, "worker",
                                                    "--shard-log", self.shard_log] + common}},
                         "datasets": [{"name": "train", "size": SAMPLES, "shardSize": SHARD,
                                       "epochs": 1}]}}
        self.spec = os.path.join(tmp, "job.json")
        with open(self.spec, "w") as f:
            json.dump(spec, f)
        self.state = os.path.join(tmp, "state")
        self.log = open(os.path.join(tmp, "master.log"), "w")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{s.getsockname()[1]}"
        s.close()
        bindir = os.environ.get("ROVER_BIN_DIR", os.path.join(TOP, "build", "bin"))
        self.proc = subprocess.Popen(
            [os.path.join(bindir, "rover-master"), "--job", self.spec, "--state-dir", self.state,
             "--listen", self.addr, "--brain", brain.url, "--brain-poll-wait-s", "1",
             # a removed worker finishes its shard first, which may wait for
             # a re-partition on a busy machine
             "--node-stop-grace-ms", "120000",
             "--linger-s", "1"], stdout=self.log, stderr=subprocess.STDOUT, cwd=TOP)

    def pace(self, seconds):
        """The workers' seconds per step from their next step on: slow
        while the test waits for a PS to start (a busy machine takes a
        minute to import torch), so the data outlasts the plans."""
        with open(self.pace_file + ".tmp", "w") as f:
            f.write(seconds)
        os.rename(self.pace_file + ".tmp", self.pace_file)

    def job(self):
        try:
            with urllib.request.urlopen(f"http://{self.addr}/v1/job", timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def steps(self):
        try:
            with open(self.shard_log) as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    def node_logs(self, prefix):
        d = os.path.join(self.state, "nodes")
        out = ""
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if f.startswith(prefix):
                with open(os.path.join(d, f), errors="replace") as fh:
                    out += fh.read()
        return out

    def built(self, gen, nps):
        """How many PS logged their partition of generation gen (nps PS)."""
        return sum(1 for line in self.node_logs("ps-").splitlines()
                   if "partition built" in line and f" gen={gen} nps={nps} " in line)

    def wait(self, what, cond, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                break
            if cond():
                return True
            time.sleep(0.2)
        return check(False, what, f"not within {timeout}s (steps {self.steps()} of "
                     f"{SAMPLES // BATCH}, master {'exited' if self.proc.poll() is not None else 'running'})")


def expected_counts(lay, log_path):
    """Per row: the updates the logged steps make (one per distinct row of
    a step's batch, one per dense row per step)."""
    import torch
    ids, _ = ps_rover.make_data(SAMPLES + 4000, lay.fields, lay.rows, 7)
    ids = ids[:SAMPLES]
    cnt = torch.zeros(lay.total, dtype=torch.int64)
    seen = torch.zeros(SAMPLES, dtype=torch.int64)
    nsteps = 0
    with open(log_path) as f:
        for line in f:
            parts = line.split()
            idx = torch.tensor([int(i) for i in parts[2].split(",")]) if len(parts) > 2 else \
                torch.tensor([], dtype=torch.int64)
            seen.index_add_(0, idx, torch.ones(len(idx), dtype=torch.int64))
            cnt[torch.unique(ids[idx].reshape(-1))] += 1
            nsteps += 1
    cnt[lay.rows:] += nsteps
    return cnt, seen


def main():
    keep = "--keep" in sys.argv
    tmp = tempfile.mkdtemp(prefix="rover-ps-")
    brain = Brain(plan(1, "create", 2, 2, "start"))
    job = Job(tmp, brain)
    try:
        run(job, brain)
    finally:
        if job.proc.poll() is None:
            job.proc.send_signal(signal.SIGTERM)
            try:
                job.proc.wait(30)
            except subprocess.TimeoutExpired:
                job.proc.kill()
        for f in os.listdir("/dev/shm"):
            if f.startswith(f"rover-{job.name}."):
                os.unlink(os.path.join("/dev/shm", f))
        if failed:
            print(f"diag: master and node logs in {tmp}", flush=True)
            for n in ("master.log",):
                with open(os.path.join(tmp, n), errors="replace") as f:
                    print("diag: " + "".join(f.readlines()[-15:]).replace("\n", "\ndiag: "))
            print("diag: " + "\ndiag: ".join(job.node_logs("").splitlines()[-60:]))
        if not failed and not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return failed


def node(job, role, rank):
    return next((n for n in (job.job() or {}).get("nodes", [])
                 if n.get("role") == role and n.get("rank") == rank), {})


def migrate(job, brain):
    """A hot PS migrated: relaunched with the plan's memory, its partition
    handed over through its flash checkpoint, the plan applied in full."""
    start = job.steps()
    job.wait("training goes on after the shrink", lambda: job.steps() >= start + 20, 90)
    brain.plan(4, 2, 2, "migrate the hot ps-0",
               {"node": "ps-0", "role": "ps", "resource": {"cpu": 0, "memory_mb": 3000, "gpu": 0}})
    ok = job.wait("ps-0 is relaunched by the migration", lambda: node(job, "ps", 0).get(
        "instance", "ps-0") != "ps-0" and node(job, "ps", 0).get("state") == "running", 120)
    if ok:
        n = node(job, "ps", 0)
        check(n.get("memory_limit_mb") == 3000, "plan 4: ps-0 relaunched with the plan's memory",
              json.dumps(n))
    check(job.wait("ps-0 loads its partition again",
                   lambda: 'msg="ready" rank=0 gen=2 nps=2' in job.node_logs("ps-0."), 240),
          "plan 4: the migrated ps-0 serves its partition (gen 2, 2 PS) from its flash checkpoint")
    pl = (job.job() or {}).get("plan", {})
    check(pl.get("id") == 4 and pl.get("applied") and not pl.get("not_applied"),
          "plan 4 applied in full: the master names no PS data handover in not_applied",
          json.dumps(pl))


def run(job, brain):
    total = SAMPLES // BATCH
    if not job.wait("the job trains", lambda: job.steps() >= 40, 120):
        return
    job.pace(SLOW)
    brain.plan(2, 3, 4, "grow to 3 PS / 4 workers")
    check(job.wait("three PS serve a partition of the second generation",
                   lambda: job.built(1, 3) >= 3, 240), "plan 2: the table re-partitioned to 3 PS")
    js = job.job() or {}
    check(js.get("desired", {}).get("ps", {}).get("count") == 3 and
          js.get("desired", {}).get("worker", {}).get("count") == 4,
          "plan 2 applied: desired 3 PS, 4 workers", json.dumps(js.get("desired")))
    start = job.steps()
    job.wait("training goes on after the re-partition", lambda: job.steps() >= start + 30, 90)
    pid = next((n.get("pid", 0) for n in (job.job() or {}).get("nodes", [])
                if n.get("role") == "ps" and n.get("rank") == 1 and n.get("state") == "running"), 0)
    if check(pid > 0, "ps-1 runs"):
        os.kill(pid, signal.SIGKILL)
        job.wait("ps-1 is relaunched", lambda: any(
            n.get("role") == "ps" and n.get("rank") == 1 and n.get("restarts", 0) >= 1 and
            n.get("state") == "running" for n in (job.job() or {}).get("nodes", [])), 120)
        check(job.wait("ps-1 loads its partition again",
                       lambda: 'msg="ready" rank=1 gen=1 nps=3' in job.node_logs("ps-1."), 240),
              "kill -9 of ps-1: relaunched from its flash checkpoint (gen 1, 3 PS)")
    start = job.steps()
    job.wait("training goes on after the PS kill", lambda: job.steps() >= start + 30, 90)
    if job.steps() > total - 100:
        check(False, "the plans came while the job trained",
              f"{job.steps()} of {total} steps done before plan 3: the workers outran the plans (SLOW)")
    brain.plan(3, 2, 2, "shrink to 2 PS / 2 workers")
    check(job.wait("two PS serve a partition of the third generation",
                   lambda: job.built(2, 2) >= 2, 240), "plan 3: the table re-partitioned to 2 PS")
    migrate(job, brain)
    job.pace(FAST)
    code = None
    try:
        code = job.proc.wait(TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    check(code == 0, "the job succeeded (rover-master exit 0)", f"exit {code}")
    wlog = job.node_logs("worker-0")
    line = next((x for x in wlog.splitlines() if x.startswith("eval_loss=")), "")
    check(line != "", "worker 0 evaluated", "no eval_loss line")
    if line:
        kv = dict(p.split("=") for p in line.split())
        check(float(kv["eval_loss"]) <= float(kv["target"]), "the eval loss reached its target",
              line)
    ranks = {int(x.split()[0]) for x in open(job.shard_log)} if os.path.exists(job.shard_log) else set()
    check(ranks == {0, 1, 2, 3}, "workers 0-3 all trained", str(sorted(ranks)))
    lay = ps_rover.Layout(50000, 16, 8, 32)
    want, seen = expected_counts(lay, job.shard_log)
    lost, twice = int((seen == 0).sum()), int((seen > 1).sum())
    check(lost == 0 and twice == 0, "every sample trained exactly once",
          f"{lost} never, {twice} more than once")
    import torch
    got = torch.full((lay.total,), -1, dtype=torch.int64)
    dumps = sorted(os.listdir(job.dumps))
    check(dumps == ["ps-0.pt", "ps-1.pt"], "the two PS left dumped their partitions", str(dumps))
    for d in dumps:
        p = torch.load(os.path.join(job.dumps, d))
        got[p["ids"]] = p["counts"]
    bad = int((got != want).sum())
    where = (got != want).nonzero().flatten()[:5].tolist()
    check(bad == 0, "no update lost or applied twice: every row's applied updates match the log",
          f"{bad} rows differ, e.g. rows {where}: got {got[where].tolist()} want {want[where].tolist()}")


if __name__ == "__main__":
    sys.exit(main())
