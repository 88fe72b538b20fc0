"""rover.stream: a streaming dataset read from Redis Streams, each record
trained once.

Redis stream entry ids (<ms>-<seq>) are not the dense offsets the master
hands out, so rover.redis_feed (the bridge) numbers the entries of each
partition's stream in the order it reads them and records each batch it
read as a chunk "offsets a..a+n-1 are the entries first..last" in a sorted
set next to the stream (chunk_key), before it tells the master the new end.
A worker given offsets [s, e) of a partition finds the chunks that cover
them and reads exactly those entries with XRANGE (RedisStream.records).

StreamSampler hands out the records of the master's tasks.  A task is
reported done in the take() after the one that handed out its last record:
the loop trains on a batch and saves its checkpoint before it takes the
next, so a task the master counts as done is in every checkpoint loaded
later.  The records of the current task already handed out (trained, and
saved with the step) go into the checkpoint (state_dict, through
rover.Checkpointer(..., extra=sampler)); after a restart they are skipped
when the master hands their range out again.  One rank reads a stream this
way; with several ranks, a rank's skipped range is in its own checkpoint
only (see python/README.md).

    src = rover.RedisStream("unix:///run/redis.sock")
    sampler = rover.StreamSampler(src)
    ckpt = rover.Checkpointer(model, opt, extra=sampler)
    step = ckpt.load() or 0
    while True:
        recs = sampler.take(32)          # Record(partition, offset, id, fields)
        if not recs: time.sleep(0.01); continue
        train(recs); step += 1
        rover.report_step(step, len(recs)); ckpt.save(step)
"""
import collections
import os
import time

Record = collections.namedtuple("Record", "partition offset id fields")

KEY_FORMAT = "{dataset}:{partition}"


def stream_key(dataset, partition, key_format=KEY_FORMAT):
    """The Redis stream of one partition (one stream key per partition)."""
    return key_format.format(dataset=dataset, partition=partition)


def chunk_key(dataset, partition):
    """The sorted set of the partition's chunks: score a, member
    "a n first last" (offsets a..a+n-1 are the entries first..last)."""
    return "rover:chunks:%s:%s" % (dataset, partition)


def chunk_parse(member):
    if isinstance(member, bytes):
        member = member.decode()
    a, n, first, last = member.split()
    return int(a), int(n), first, last


def chunk_format(a, n, first, last):
    return "%d %d %s %s" % (a, n, first, last)


def connect(url):
    """A redis client for url: redis://host:port/db or unix:///path/sock."""
    import redis  # Debian's python3-redis
    if url.startswith("unix://"):  # every call with a timeout (connect included there)
        return redis.Redis.from_url(url, socket_timeout=10)
    return redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=10)


class RedisStream:
    """The records of a streaming dataset in Redis, by the master's offsets."""

    def __init__(self, url=None, dataset=None, key_format=None, client=None):
        self.r = client or connect(url or os.environ.get("ROVER_REDIS_URL", ""))
        self.dataset = dataset or os.environ.get("ROVER_DATASET", "")
        self.key_format = key_format or os.environ.get("ROVER_STREAM_KEY", KEY_FORMAT)
        # (dataset, partition) -> (offset, id of the entry before it): a task
        # that starts where the last one read ended reads from there, not
        # from its chunk's first entry
        self._after = {}

    def chunks(self, dataset, partition, start, end):
        """The chunks covering offsets [start, end), in order."""
        ck = chunk_key(dataset, partition)
        p = self.r.pipeline(transaction=False)
        p.zrevrangebyscore(ck, start, "-inf", start=0, num=1)
        p.zrangebyscore(ck, "(%d" % start, "(%d" % end)
        below, rest = p.execute()
        out = [chunk_parse(m) for m in below] + [chunk_parse(m) for m in rest]
        return [c for c in out if c[0] + c[1] > start]

    def records(self, dataset, partition, start, end):
        """Records of offsets [start, end) of partition, in offset order.
        OSError (ENODATA) when a chunk or an entry is missing: the bridge has
        not recorded them, or they were trimmed."""
        c = self.cursor(dataset, partition, start, end)
        out = []
        while c.offset < end:
            out += c.read(end - c.offset)
        return out

    def cursor(self, dataset, partition, start, end):
        """A reader of offsets [start, end): read(n) gives the next n."""
        return _Cursor(self, dataset, partition, start, end)


class _Cursor:
    """Reads a task's records a batch at a time (one XRANGE a batch, as a
    consumer of the stream reads it: large replies cost more than their
    size in redis-py), from the chunks that cover them."""

    def __init__(self, src, dataset, partition, start, end):
        self.src, self.dataset, self.partition = src, dataset, partition
        self.key = stream_key(dataset, partition, src.key_format)
        self.offset, self.end = start, end
        self.chunks = src.chunks(dataset, partition, start, end)
        cached = src._after.get((dataset, partition))
        self._after = cached[1] if cached and cached[0] == start else None

    def _missing(self):
        return OSError(61, "records %d..%d of %s/%s are not in redis (chunks %s)"
                       % (self.offset, self.end, self.dataset, self.partition, self.chunks))

    def read(self, n):
        """The next up to n records (never past a chunk's end)."""
        while self.chunks and self.chunks[0][0] + self.chunks[0][1] <= self.offset:
            self.chunks.pop(0)
        if not self.chunks or self.chunks[0][0] > self.offset:
            raise self._missing()
        a, m, first, last = self.chunks[0]
        hi = min(self.end, a + m, self.offset + n)
        if self._after is not None:
            lo, entries = self.offset, self.src.r.xrange(self.key, "(" + self._after, last,
                                                         count=hi - self.offset)
        else:  # the chunk's first entries up to the offset are read and dropped
            lo, entries = a, self.src.r.xrange(self.key, first, last, count=hi - a)
        if len(entries) != hi - lo:
            raise self._missing()
        out = []
        for k in range(self.offset - lo, hi - lo):
            eid, fields = entries[k]
            out.append(Record(self.partition, lo + k,
                              eid.decode() if isinstance(eid, bytes) else eid, fields))
        self.offset = hi
        self._after = out[-1].id
        self.src._after[(self.dataset, self.partition)] = (hi, self._after)
        return out


class StreamSampler:
    """Records of the master's tasks of a streaming dataset, each trained
    once also across restarts (see the module's text): take(n) gives up to n
    records of one task, [] when none is available now."""

    def __init__(self, source, trainer_=None, wait_s=0.01):
        self.src, self._t, self.wait_s = source, trainer_, wait_s
        self.task = None      # the master's task dict (with "partition")
        self._cur = None      # its cursor: offsets below _cur.offset handed out
        self._skip = []       # (partition, a, b): trained before a restart
        self.skipped = 0      # records skipped so far

    def _trainer(self):
        if self._t is None:
            from rover import trainer
            self._t = trainer()
        return self._t

    def _finish(self):
        """The current task is done when every record of it was handed out
        (and, by the contract, trained and saved)."""
        if self.task is None or self._cur.offset < self.task["end"]:
            return
        t = self._trainer()
        t.consumed(self.task["end"] - self.task["start"])
        t.done()
        p, a, b = self.task["partition"], self.task["start"], self.task["end"]
        left = []
        for q, x, y in self._skip:  # what the master counts now needs no skip
            if q != p or y <= a or x >= b:
                left.append((q, x, y))
                continue
            left += [(q, x, a)] if x < a else []
            left += [(q, b, y)] if y > b else []
        self._skip = left
        self.task, self._cur = None, None

    def _skipped(self, r):
        return any(p == r.partition and a <= r.offset < b for p, a, b in self._skip)

    def take(self, n):
        """Up to n records of the current task (never of two tasks: the
        previous task is reported done first, its step saved)."""
        from rover import SHARD
        t = self._trainer()
        while True:
            self._finish()
            if self.task is None:
                status, task = t.next_shard()
                if status != SHARD:
                    return []
                self.task = task
                self._cur = self.src.cursor(task["dataset"], task["partition"], task["start"],
                                            task["end"])
                continue
            got = self._cur.read(n)
            out = [r for r in got if not self._skipped(r)]
            self.skipped += len(got) - len(out)
            # a checkpoint after this batch's step resumes after its records
            t.consumed(self._cur.offset - self.task["start"])
            if out:
                return out

    def __iter__(self):
        while True:
            out = self.take(1)
            if not out:
                time.sleep(self.wait_s)
                continue
            yield out[0]

    def state_dict(self):
        """What a checkpoint keeps: the ranges handed out and not yet done
        (the current task's first records, and older skips not passed yet)."""
        skip = list(self._skip)
        if self.task is not None and self._cur.offset > self.task["start"]:
            skip.append((self.task["partition"], self.task["start"], self._cur.offset))
        return {"skip": skip}

    def load_state_dict(self, st):
        self._skip = [tuple(s) for s in st.get("skip", [])]
