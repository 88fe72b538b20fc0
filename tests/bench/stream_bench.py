"""The stream benchmark (tests/bench/stream.sh says what it measures)."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import redis

import rover
from rover.stream import stream_key

from benchlib import free_port, say

bin_dir, records, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
PAIRS = 3
SHARD = int(os.environ.get("BENCH_STREAM_SHARD", "2048"))


def wait_for(what, cond, timeout=60.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise SystemExit("bench=stream error: %s" % what)
        time.sleep(0.05)


def committed(url, part):
    with urllib.request.urlopen(url + "/v1/streams/clicks", timeout=5) as resp:
        for p in json.loads(resp.read())["partitions"]:
            if p["name"] == part:
                return p
    return None


def produce(r, key):
    payload = ",".join("%.6f" % (i / 7.0) for i in range(16))
    for k in range(0, records, 500):
        p = r.pipeline(transaction=False)
        for j in range(k, min(k + 500, records)):
            p.xadd(key, {"rid": j, "x": payload})
        p.execute()


def through_trainer(t, src):
    """Records a second: tasks taken, records read, each task done."""
    s = rover.StreamSampler(src, trainer_=t)
    n, t0 = 0, time.perf_counter()
    while n < records:
        got = s.take(batch)
        n += len(got)
        if not got and n < records:
            time.sleep(0.001)
    s.take(batch)  # the last task is reported done here
    return n / (time.perf_counter() - t0)


def raw(r, key):
    """Records a second: XREADGROUP COUNT batch, XACK of each batch."""
    r.xgroup_create(key, "raw", id="0")
    n, t0 = 0, time.perf_counter()
    while n < records:
        got = r.xreadgroup("raw", "c0", {key: ">"}, count=batch)
        if not got:
            continue
        ids = [e[0] for e in got[0][1]]
        r.xack(key, "raw", *ids)
        n += len(ids)
    return n / (time.perf_counter() - t0)


def main():
    tmp = tempfile.mkdtemp(prefix="rover-bench-stream-")
    procs = []
    try:
        sock = os.path.join(tmp, "redis.sock")
        procs.append(subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
             "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL))
        wait_for("no redis socket", lambda: os.path.exists(sock))
        parts = ["r%d" % i for i in range(PAIRS)]
        spec = {"apiVersion": "elastic.rover.dev/v1alpha1", "kind": "ElasticJob",
                "metadata": {"name": "bench-stream"},
                "spec": {"distributionStrategy": "AllreduceStrategy",
                         "replicaSpecs": {"worker": {"replicas": 1}},
                         "datasets": [{"name": "clicks", "streaming": True, "shardSize": SHARD,
                                       "partitions": [{"name": p, "end_offset": 0}
                                                      for p in parts]}]}}
        with open(os.path.join(tmp, "job.json"), "w") as f:
            json.dump(spec, f)
        port = free_port()
        addr = "127.0.0.1:%d" % port
        url = "http://" + addr
        procs.append(subprocess.Popen(
            [os.path.join(bin_dir, "rover-master"), "--job", os.path.join(tmp, "job.json"),
             "--state-dir", os.path.join(tmp, "state"), "--listen", addr, "--log-level", "warn"],
            stderr=open(os.path.join(tmp, "master.log"), "w")))
        wait_for("the master does not answer", lambda: _up(url))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "rover.redis_feed", "--redis", "unix://" + sock, "--master",
             addr, "--dataset", "clicks"], stderr=open(os.path.join(tmp, "feed.log"), "w")))
        r = redis.Redis(unix_socket_path=sock, socket_timeout=10)
        t = rover.Trainer(master=addr, node="bench", job="bench-stream-%d" % os.getpid(),
                          rank=0, world_size=1)
        src = rover.RedisStream(client=r)
        rps, raw_rps = [], []
        for i, part in enumerate(parts):
            key = stream_key("clicks", part)
            produce(r, key)
            wait_for("the bridge did not post the end",
                     lambda: committed(url, part)["end_offset"] == records)
            for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                if which == 0:
                    rps.append(through_trainer(t, src))
                    c = committed(url, part)
                    if c["committed_offset"] != records:
                        raise SystemExit("bench=stream error: committed %s" % c)
                else:
                    raw_rps.append(raw(r, key))
            say("pair %d: trainer %.0f records/s, raw %.0f records/s" % (i + 1, rps[-1],
                                                                          raw_rps[-1]))
        a, b = statistics.median(rps), statistics.median(raw_rps)
        ratio = statistics.median(x / y for x, y in zip(rps, raw_rps))
        print("bench=stream rps=%.0f raw_rps=%.0f ratio=%.2f" % (a, b, ratio), flush=True)
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def _up(url):
    try:
        with urllib.request.urlopen(url + "/v1/streams/clicks", timeout=2):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    main()
