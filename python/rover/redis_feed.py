"""rover.redis_feed: the bridge from Redis Streams to a streaming dataset of
rover-master.

    python3 -m rover.redis_feed --redis unix:///run/redis.sock \\
        --master 127.0.0.1:7000 --dataset clicks [--trim]

Each partition of the dataset (the names the master gives) is the Redis
stream <dataset>:<partition> (--key-format), to which producers XADD
with ids of their own or "*".  The bridge tails them all with XREAD BLOCK,
numbers each partition's entries 0, 1, 2, ... in stream order and, for each
batch read, first adds the chunk "a n first last" (offsets a..a+n-1 are the
entries first..last) to the sorted set rover.stream.chunk_key(dataset,
partition), then posts end_offset a+n to the master.  A restarted bridge
resumes after the last chunk and posts the ends again (a lower or equal end
changes nothing at the master), so a bridge killed anywhere loses and
renumbers nothing.  Workers read the entries of their tasks through the
chunks (rover.RedisStream).  With --trim the entries and chunks wholly
below a partition's committed offset are removed (XTRIM MINID).

One logfmt line per event on stderr; exits 0 on SIGTERM or SIGINT.
"""
import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request

import redis

from rover.stream import chunk_format, chunk_key, chunk_parse, connect, stream_key, KEY_FORMAT

_stop = False


def log(level, msg, **kv):
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".%03dZ" % (time.time() % 1 * 1000)
    parts = ["ts=%s level=%s comp=redis_feed msg=\"%s\"" % (ts, level, msg)]
    parts += ["%s=%s" % (k, json.dumps(v) if isinstance(v, str) and " " in v else v)
              for k, v in kv.items()]
    os.write(2, (" ".join(parts) + "\n").encode())


class Master:
    """The master's stream endpoints (every call with a timeout)."""

    def __init__(self, addr, token="", timeout=5.0):
        self.url = addr if addr.startswith("http") else "http://" + addr
        self.token, self.timeout = token, timeout

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return json.loads(resp.read() or b"{}")

    def stream(self, dataset):
        return self.call("GET", "/v1/streams/%s" % dataset)

    def post_end(self, dataset, partition, end):
        self.call("POST", "/v1/streams/%s/partitions" % dataset,
                  {"partition": partition, "end_offset": end})


class Feed:
    def __init__(self, args):
        self.a = args
        self.r = connect(args.redis)
        self.m = Master(args.master, args.token)
        self.parts = {}  # partition -> {"key", "next", "last", "posted"}
        self.failed = 0  # posts failed in a row (the master away)

    def resume(self):
        """The partitions from the master, each after its last chunk."""
        st = self.m.stream(self.a.dataset)
        for p in st["partitions"]:
            name = p["name"]
            last = self.r.zrevrange(chunk_key(self.a.dataset, name), 0, 0)
            nxt, lid = 0, "0-0"
            if last:
                a, n, _first, lid = chunk_parse(last[0])
                nxt = a + n
            self.parts[name] = {"key": stream_key(self.a.dataset, name, self.a.key_format),
                                "next": nxt, "last": lid, "posted": -1}
            log("info", "partition resumed", partition=name, next_offset=nxt, last_id=lid,
                committed=p.get("committed_offset", 0))

    def read(self):
        """One XREAD over every partition; each batch a chunk.  True when
        something was read."""
        keys = {v["key"]: name for name, v in self.parts.items()}
        got = self.r.xread({v["key"]: v["last"] for v in self.parts.values()},
                           count=self.a.chunk, block=self.a.block_ms)
        for key, entries in got or []:
            name = keys[key.decode() if isinstance(key, bytes) else key]
            v = self.parts[name]
            ids = [e[0].decode() if isinstance(e[0], bytes) else e[0] for e in entries]
            # the chunk is durable (as the stream is) before the end is told
            self.r.zadd(chunk_key(self.a.dataset, name),
                        {chunk_format(v["next"], len(ids), ids[0], ids[-1]): v["next"]})
            v["next"] += len(ids)
            v["last"] = ids[-1]
        return bool(got)

    def post(self, every=False):
        for name, v in self.parts.items():
            if v["posted"] >= v["next"] and not every:
                continue
            try:
                self.m.post_end(self.a.dataset, name, v["next"])
                v["posted"] = v["next"]
            except (OSError, urllib.error.URLError, ValueError) as e:
                self.failed += 1
                if self.failed in (1, 10) or self.failed % 100 == 0:  # the first, then fewer
                    log("warn", "could not post a partition's end", partition=name,
                        end_offset=v["next"], failures=self.failed, error=str(e))
                return False
            self.failed = 0
        return True

    def trim(self):
        """Entries and chunks wholly below each committed offset go, but
        never the newest chunk: a restarted bridge resumes after it."""
        st = self.m.stream(self.a.dataset)
        for p in st["partitions"]:
            v = self.parts.get(p["name"])
            c = p.get("committed_offset", 0)
            if v is None or c <= 0:
                continue
            ck = chunk_key(self.a.dataset, p["name"])
            newest = self.r.zrevrange(ck, 0, 0)
            below = self.r.zrangebyscore(ck, "-inf", c)
            done = [m for m in below if sum(chunk_parse(m)[:2]) <= c and m not in newest]
            if not done:
                continue
            # the oldest entry still kept: the first of the chunk after the last done
            nxt = self.r.zrangebyscore(ck, "(%d" % chunk_parse(done[-1])[0], "+inf", start=0, num=1)
            self.r.xtrim(v["key"], minid=chunk_parse(nxt[0])[2], approximate=False)
            self.r.zrem(ck, *done)

    def run(self):
        self.resume()
        self.post(every=True)
        last_all = last_trim = time.monotonic()
        while not _stop:
            try:
                self.read()
            except (OSError, redis.RedisError) as e:  # redis away: try again
                log("warn", "could not read the streams", error=str(e))
                time.sleep(0.5)
                continue
            now = time.monotonic()
            every = now - last_all >= self.a.repost_s
            if self.post(every) and every:
                last_all = now
            if self.a.trim and now - last_trim >= self.a.trim_s:
                last_trim = now
                try:
                    self.trim()
                except (OSError, redis.RedisError, ValueError) as e:
                    log("warn", "could not trim", error=str(e))
        return 0


def _on_signal(_sig, _frame):
    global _stop
    _stop = True


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m rover.redis_feed",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--redis", default=os.environ.get("ROVER_REDIS_URL", ""),
                    help="redis://host:port/db or unix:///path/sock (ROVER_REDIS_URL)")
    ap.add_argument("--master", default=os.environ.get("ROVER_MASTER_ADDR", ""),
                    help="host:port or http://host:port (ROVER_MASTER_ADDR)")
    ap.add_argument("--token", default=os.environ.get("ROVER_TOKEN", ""))
    ap.add_argument("--dataset", required=True, help="the streaming dataset of the job")
    ap.add_argument("--key-format", default=KEY_FORMAT,
                    help="each partition's stream key (default %(default)s)")
    ap.add_argument("--chunk", type=int, default=256,
                    help="entries per XREAD and chunk at most (a reader may read a chunk's "
                    "entries before its range)")
    ap.add_argument("--block-ms", type=int, default=200, help="XREAD BLOCK timeout")
    ap.add_argument("--repost-s", type=float, default=1.0,
                    help="every partition's end is posted again this often (a restarted master)")
    ap.add_argument("--trim", action="store_true", help="remove what is committed from redis")
    ap.add_argument("--trim-s", type=float, default=2.0)
    a = ap.parse_args(argv)
    if not a.redis or not a.master:
        ap.error("--redis and --master are needed")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    log("info", "starting", redis=a.redis, master=a.master, dataset=a.dataset,
        key_format=a.key_format, chunk=a.chunk, trim=a.trim)
    while not _stop:
        try:
            return Feed(a).run()
        except (OSError, redis.RedisError, ValueError) as e:
            log("warn", "could not start the feed", error=str(e))  # the master restarting
            time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
