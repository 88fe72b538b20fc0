#!/usr/bin/env bash
# master_snapshot: how long a snapshot holds rover-master's state lock on a
# large state, and what a reader waits meanwhile.  A real rover-master
# (journal fsync'd) with a dataset of 200,000 shards, 4,000 workers each
# holding one (4,000 worker entries and tasks in doing: a snapshot of about
# 0.7 MB) and a snapshot every 200 records; for BENCH_SNAP_S (20) seconds 6
# clients loop shard next and done while one GETs /v1/job every 2 ms.
# From the master's "snapshot taken" lines: locked_ms (the state lock held:
# the state serialised; a master that writes under the lock logs no
# locked_ms, its whole ms counts) and ms (the whole snapshot), medians and
# max; get_p99_ms, get_max_ms: the GETs' latency; lock_wait_max_ms:
# rover_master_state_lock_wait_max_seconds.  Last line:
#   bench=master_snapshot snapshots=N bytes=N locked_ms=N locked_max_ms=N ms=N max_ms=N
#   get_p99_ms=N get_max_ms=N lock_wait_max_ms=N
set -euo pipefail
B=${B:-build}
BIN=${ROVER_BIN_DIR:-$(cd "$B/bin" && pwd)}
exec /usr/bin/python3 - "$BIN" "${BENCH_SNAP_S:-20}" < <(cat <<'PYEOF'
import http.client, json, re, shutil, socket, statistics, subprocess, sys, tempfile, threading, time

bin_dir, secs = sys.argv[1], float(sys.argv[2])
d = tempfile.mkdtemp(prefix="rover-snapbench-")
spec = {"apiVersion": "elastic.rover.dev/v1alpha1", "kind": "ElasticJob", "metadata": {"name": "snap"},
        "spec": {"distributionStrategy": "AllreduceStrategy", "optimizeMode": "manual",
                 "replicaSpecs": {"worker": {"replicas": 1, "minReplicas": 1, "maxReplicas": 2}},
                 "datasets": [{"name": "train", "size": 2000000, "shardSize": 10, "epochs": 1,
                               "shuffle": True}]}}
with open(d + "/job.json", "w") as f:
    json.dump(spec, f)
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
log = open(d + "/master.log", "w")
master = subprocess.Popen([bin_dir + "/rover-master", "--job", d + "/job.json", "--state-dir",
                           d + "/state", "--listen", "127.0.0.1:%d" % port,
                           "--journal-snapshot-every", "200"], stdout=log, stderr=log)


def conn():
    return http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def post(c, path, body):
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    return json.loads(data) if data else None


for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        break
    except OSError:
        time.sleep(0.05)
post(conn(), "/v1/rdzv/join", {"node": "n0", "local_world_size": 1})


def hold(lo, hi):
    c = conn()
    for w in range(lo, hi):
        post(c, "/v1/shards/next", {"node": "n0", "worker": w, "req": 1})


def run(threads):
    for t in threads:
        t.start()
    for t in threads:
        t.join()


run([threading.Thread(target=hold, args=(i * 1000, (i + 1) * 1000)) for i in range(4)])
stop = time.time() + secs
lat = []


def getter():
    c = conn()
    while time.time() < stop:
        t0 = time.monotonic()
        c.request("GET", "/v1/job")
        c.getresponse().read()
        lat.append((time.monotonic() - t0) * 1000)
        time.sleep(0.002)


def churn(w):
    c, req = conn(), 2
    while time.time() < stop:
        t = post(c, "/v1/shards/next", {"node": "n0", "worker": w, "req": req})
        req += 1
        if t and t.get("status") == "task":
            post(c, "/v1/shards/done", {"node": "n0", "worker": w, "id": t["id"]})


run([threading.Thread(target=getter)] + [threading.Thread(target=churn, args=(5000 + i,))
                                         for i in range(6)])
c = conn()
c.request("GET", "/metrics")
met = c.getresponse().read().decode()
master.terminate()
master.wait()
log.close()
with open(d + "/master.log") as f:
    text = f.read()
shutil.rmtree(d, ignore_errors=True)
snaps = [(int(b), int(ms), int(lk or ms)) for b, ms, lk in re.findall(
    r'msg="snapshot taken" bytes=(\d+) ms=(\d+)(?: locked_ms=(\d+))?', text)]
lw = re.search(r"^rover_master_state_lock_wait_max_seconds ([\d.e+-]+)", met, re.M)
lat.sort()
med = lambda xs: statistics.median(xs) if xs else 0
print("bench=master_snapshot snapshots=%d bytes=%d locked_ms=%.0f locked_max_ms=%d ms=%.0f "
      "max_ms=%d get_p99_ms=%.1f get_max_ms=%.1f lock_wait_max_ms=%.0f"
      % (len(snaps), snaps[-1][0] if snaps else 0, med([x[2] for x in snaps]),
         max([x[2] for x in snaps] or [0]), med([x[1] for x in snaps]),
         max([x[1] for x in snaps] or [0]), lat[int(0.99 * len(lat))] if lat else 0,
         lat[-1] if lat else 0, float(lw.group(1)) * 1000 if lw else -1))
PYEOF
)
