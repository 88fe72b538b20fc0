#!/usr/bin/env python3
"""A parameter-server job on Rover: an embedding table and a dense part
partitioned across `ps` nodes, async `worker` nodes pulling rows and pushing
updates, the data sharded by the master, each PS partition kept in the
trainer library's flash checkpoint.  rover-master runs both roles
(examples/ps-job.json):

  build/bin/rover-master --job examples/ps-job.json --state-dir /tmp/ps-state

Each node runs `ps_rover.py ROLE` with ROVER_ROLE, ROVER_NODE_RANK,
ROVER_NODE_NAME and ROVER_MASTER_ADDR from the node manager.  The task is a
synthetic click-through one: sample i has --fields categorical ids (rows of
the table, drawn skewed towards low ids) and a label drawn from a hidden
logistic model over them; the model is an embedding per row and a small MLP
over the concatenated embeddings.  python/README-ps.md describes the design:
partitioning, pushes acknowledged only once checkpointed, and the
re-partition when the master's desired PS count changes.

Worker rank 0 prints at the end
  eval_loss=L target=T steps=S
and exits 1 when L > T.  --shard-log FILE appends "RANK STEP I,I,..." per
step (a step is logged once every update of it is acknowledged); each PS
with --dump-dir DIR writes DIR/ps-R.pt (global row ids, values, per-row
counts of applied updates) when the job ends.
"""
import argparse
import glob
import json
import math
import os
import queue
import signal
import socket
import struct
import sys
import threading
import time
import urllib.request
import warnings

import torch

# rover: from PYTHONPATH (rover-run sets it), else this tree's python/
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import rover  # noqa: E402

HDR = struct.Struct("<II")  # header JSON bytes, body bytes
MAX_HDR = 1 << 20
MAX_BODY = 1 << 30
META_BYTES = 1 << 16  # the checkpoint's meta buffer (JSON, zero padded)


# ---- data and model ------------------------------------------------------

def make_data(n, fields, rows, seed):
    """ids (n x fields, int64) and labels (n, float) of the synthetic task:
    the same for every process (one seeded generator)."""
    g = torch.Generator().manual_seed(seed)
    ids = (torch.rand(n, fields, generator=g).pow(3) * rows).long().clamp_(max=rows - 1)
    truth = torch.randn(rows, generator=g) * 1.5
    logit = truth[ids].sum(1) / fields ** 0.5
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    return ids, y


class Layout:
    """Rows 0..rows-1 are the table; the dense MLP's parameters follow,
    flattened and cut into rows of dim.  Row r belongs to PS r % nps, at
    local index r // nps."""

    def __init__(self, rows, dim, fields, hidden):
        self.rows, self.dim, self.fields, self.hidden = rows, dim, fields, hidden
        self.shapes = [(hidden, fields * dim), (hidden,), (1, hidden), (1,)]
        self.nparams = sum(torch.Size(s).numel() for s in self.shapes)
        self.dense_rows = -(-self.nparams // dim)
        self.total = rows + self.dense_rows
        self.dense_ids = torch.arange(rows, self.total)

    def local_count(self, p, nps):
        return (self.total - p + nps - 1) // nps if p < self.total else 0

    def global_ids(self, p, nps):
        return torch.arange(p, self.total, nps)

    def init_rows(self, ids):
        """Deterministic initial values of global rows ids (a hash of
        row and column, so any partitioning starts from the same table)."""
        cols = torch.arange(self.dim)
        h = (ids.unsqueeze(1) * 1000003 + cols * 7919 + 12345) % 2147483647
        h = (h * 48271) % 2147483647
        v = h.double() / 2147483647.0 - 0.5
        scale = torch.where(ids < self.rows, torch.tensor(0.2, dtype=torch.float64),
                            torch.tensor(0.3 / (self.fields * self.dim) ** 0.5,
                                         dtype=torch.float64))
        return (v * scale.unsqueeze(1)).float()

    def forward(self, emb, dense_flat, nsamples):
        """emb: (nsamples * fields, dim) rows in sample order."""
        ps, off = [], 0
        for s in self.shapes:
            k = torch.Size(s).numel()
            ps.append(dense_flat[off:off + k].view(s))
            off += k
        w1, b1, w2, b2 = ps
        e = emb.view(nsamples, self.fields * self.dim)
        h = torch.relu(e @ w1.t() + b1)
        # wide and deep: each row's first column adds to the logit directly
        wide = emb.view(nsamples, self.fields, self.dim)[:, :, 0].sum(1)
        return (h @ w2.t() + b2).squeeze(1) + wide


# ---- wire: a JSON header and raw tensor bytes, every call with a timeout ----

def send_msg(sock, hdr, body=b""):
    h = json.dumps(hdr).encode()
    sock.sendall(HDR.pack(len(h), len(body)) + h + body)


def recv_exact(sock, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("connection closed")
        got += k
    return bytes(buf)


def recv_msg(sock):
    hl, bl = HDR.unpack(recv_exact(sock, HDR.size))
    if hl > MAX_HDR or bl > MAX_BODY:
        raise ConnectionError("message too large")
    return json.loads(recv_exact(sock, hl)), recv_exact(sock, bl)


def tensors_to_bytes(*ts):
    return b"".join(t.contiguous().numpy().tobytes() for t in ts)


def append(path, line):
    """One write(2) per line, O_APPEND: lines of several nodes never mix."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def master_job(addr, timeout=2.0):
    """The master's /v1/job, or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{addr}/v1/job", timeout=timeout) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


def log(role, msg, **kv):
    extra = "".join(f" {k}={v}" for k, v in kv.items())
    print(f"ts={time.time():.3f} role={role} msg=\"{msg}\"{extra}", file=sys.stderr, flush=True)


# ---- the parameter server ------------------------------------------------

def ckpt_job(job, gen, rank):
    """The trainer library's job key of PS rank's partition in generation
    gen: each (gen, rank) has slots of its own, so building generation
    gen+1 never overwrites what it reads."""
    return f"{job}.ps.g{gen}.r{rank}"


def slot_files(job, gen, rank):
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in ckpt_job(job, gen, rank))
    return [f"/dev/shm/rover-{safe}-0-{s}" for s in (0, 1)]


def gens_present(job):
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in job)
    gens = set()
    for f in glob.glob(f"/dev/shm/rover-{glob.escape(safe)}.ps.g*.r*-0-*"):
        part = f[len(f"/dev/shm/rover-{safe}.ps.g"):]
        g = part.split(".r", 1)[0]
        if g.isdigit():
            gens.add(int(g))
    return sorted(gens)


class Part:
    """The newest complete checkpoint of PS rank's partition in generation
    gen, mapped read-only: meta, values and counts are views into shared
    memory, valid until close().  ok is False when there is none."""

    def __init__(self, job, gen, rank):
        self.t = rover.Trainer(master=None, job=ckpt_job(job, gen, rank), rank=0, world_size=1)
        got = self.t.load()
        self.ok = got is not None
        if not self.ok:
            return
        _, views, _ = got
        self.meta = json.loads(bytes(views[0]).rstrip(b"\0"))
        with warnings.catch_warnings():  # read-only on purpose: never written through
            warnings.simplefilter("ignore")
            self.values = torch.frombuffer(views[1], dtype=torch.float32).view(-1, self.meta["dim"])
            self.counts = torch.frombuffer(views[2], dtype=torch.int64)

    def close(self):
        self.values = self.counts = None
        self.t.close()


def read_meta(job, gen, rank):
    """The meta of PS rank's newest checkpoint in generation gen, or None."""
    p = Part(job, gen, rank)
    try:
        return p.meta if p.ok else None
    finally:
        p.close()


class PS:
    def __init__(self, args, lay):
        self.a, self.lay = args, lay
        self.rank = int(os.environ.get("ROVER_NODE_RANK", "0"))
        self.master = os.environ.get("ROVER_MASTER_ADDR", "")
        self.job = args.job or os.environ.get("ROVER_JOB_NAME", "ps-job")
        self.state = "starting"  # serving, frozen (waiting for the new layout), joining
        self.gen, self.nps, self.target = -1, 0, 0
        self.values = self.counts = None
        self.dedup, self.prev = {}, {}  # key -> seq; old rank -> {key: seq}
        self.trainer, self.trainer_gen, self.saves = None, -1, 0
        self.q = queue.Queue()
        self.term = False

    # checkpoint ---------------------------------------------------------
    def save(self):
        meta = json.dumps({"gen": self.gen, "nps": self.nps, "rank": self.rank,
                           "frozen": self.state == "frozen", "target": self.target,
                           "dim": self.lay.dim, "total": self.lay.total,
                           "dedup": self.dedup, "prev": self.prev}).encode()
        if len(meta) > META_BYTES:
            raise RuntimeError("checkpoint meta too large")
        meta = bytearray(meta.ljust(META_BYTES, b"\0"))
        mt = torch.frombuffer(meta, dtype=torch.uint8)
        self.saves += 1
        self.trainer.save(self.saves, [(mt.data_ptr(), META_BYTES),
                                       (self.values.data_ptr(), self.values.numel() * 4),
                                       (self.counts.data_ptr(), self.counts.numel() * 8)])

    def open_gen(self, gen):
        if self.trainer:
            self.trainer.close()
        self.trainer = rover.Trainer(master=None, job=ckpt_job(self.job, gen, self.rank),
                                     rank=0, world_size=1)
        self.trainer_gen = gen
        # slots two generations back are read by no one any more
        for r in range(64):
            for f in slot_files(self.job, gen - 2, r) if gen >= 2 else []:
                try:
                    os.unlink(f)
                except FileNotFoundError:
                    pass

    def adopt(self, part, gen):
        meta = part.meta
        self.gen, self.nps = gen, meta["nps"]
        self.values, self.counts = part.values.clone(), part.counts.clone()
        self.dedup, self.prev = meta["dedup"], meta.get("prev", {})
        self.target = meta["target"]
        self.state = "frozen" if meta["frozen"] else "serving"
        if self.trainer_gen != gen:
            self.open_gen(gen)

    # layout changes ---------------------------------------------------
    def settle(self, desired):
        """Find this rank's place: load its partition, build it for a new
        generation, or start the job's first one.  True once serving or
        frozen."""
        gens = gens_present(self.job)
        if not gens:
            if desired <= 0 or self.rank >= desired:
                return False
            return self.fresh(desired)
        g = gens[-1]
        own = Part(self.job, g, self.rank)
        try:
            if own.ok:
                self.adopt(own, g)
                return True
        finally:
            own.close()
        meta = None
        for r in range(64):
            meta = read_meta(self.job, g, r)
            if meta:
                break
        if meta is None:
            return False
        if meta["frozen"] and self.rank < meta["target"]:
            return self.build(g + 1, meta["target"], g, meta["nps"])
        if not meta["frozen"] and self.rank < meta["nps"] and g == 0:
            return self.fresh(meta["nps"])  # the first generation, started together
        if not meta["frozen"] and self.rank < meta["nps"] and g > 0:
            old = read_meta(self.job, g - 1, 0)  # a new generation being built
            if old and old["frozen"]:
                return self.build(g, meta["nps"], g - 1, old["nps"])
        return False

    def fresh(self, nps):
        """The job's first generation: every PS initialises its rows the
        same deterministic way."""
        self.gen, self.nps, self.target, self.state = 0, nps, nps, "serving"
        ids = self.lay.global_ids(self.rank, nps)
        self.values = self.lay.init_rows(ids)
        self.counts = torch.zeros(len(ids), dtype=torch.int64)
        self.open_gen(0)
        self.save()
        return True

    def build(self, gen, nps, old_gen, old_nps):
        """This rank's partition of generation gen (nps PS) from every
        partition of old_gen, each frozen (or of a removed PS that is gone,
        its last checkpoint final)."""
        parts = [Part(self.job, old_gen, r) for r in range(old_nps)]
        try:
            # every old partition final before reading any
            if not all(p.ok and (p.meta["frozen"] or self.gone(r, nps))
                       for r, p in enumerate(parts)):
                return False
            t0 = time.time()
            mine = self.lay.global_ids(self.rank, nps)
            vals = torch.empty(len(mine), self.lay.dim)
            cnt = torch.empty(len(mine), dtype=torch.int64)
            prev, filled = {}, 0
            d = math.gcd(old_nps, nps)
            for r, part in enumerate(parts):
                prev[str(r)] = part.meta["dedup"]
                # old PS r holds global rows r + k * old_nps (local k); ours
                # are those with (r + k * old_nps) % nps == rank: every
                # nps/d-th k from the first, landing at every old_nps/d-th
                # local index of ours, so both sides are strided slices
                k0 = next((k for k in range(nps // d)
                           if (r + k * old_nps) % nps == self.rank), None)
                if k0 is None:
                    continue
                sv, sc = part.values[k0::nps // d], part.counts[k0::nps // d]
                at = (r + k0 * old_nps) // nps
                vals[at::old_nps // d][:len(sv)] = sv
                cnt[at::old_nps // d][:len(sc)] = sc
                filled += len(sv)
            if filled != len(mine):
                raise RuntimeError(f"re-partition filled {filled} of {len(mine)} rows")
        finally:
            for p in parts:
                p.close()
        self.gen, self.nps, self.target, self.state = gen, nps, nps, "serving"
        self.values, self.counts, self.dedup, self.prev = vals, cnt, {}, prev
        self.open_gen(gen)
        self.save()
        log("ps", "partition built", rank=self.rank, gen=gen, nps=nps, from_nps=old_nps,
            rows=len(mine), seconds=f"{time.time() - t0:.3f}")
        return True

    def gone(self, r, new_nps):
        if r < new_nps:
            return False
        job = master_job(self.master)
        if not job:
            return False
        for n in job.get("nodes", []):
            if n.get("role") == "ps" and n.get("rank") == r:
                return n.get("state") not in ("launched", "running")
        return True

    # requests -----------------------------------------------------------
    def handle(self, hdr, body):
        """(reply header, reply body, applied): pulls answered at once,
        pushes applied and answered after the checkpoint that holds them."""
        op = hdr.get("op")
        if op == "info":
            return {"state": self.state, "gen": self.gen, "nps": self.nps}, b"", False
        if op == "pull":
            if self.state != "serving" or hdr["gen"] != self.gen:
                return {"status": "moving", "gen": self.gen}, b"", False
            ids = torch.frombuffer(bytearray(body), dtype=torch.int64)
            return {"status": "ok"}, tensors_to_bytes(self.values[ids // self.nps]), False
        if op == "push":
            if self.state not in ("serving", "frozen"):
                return {"status": "busy"}, b"", False  # not loaded yet: ask again
            key, seq, g = hdr["key"], hdr["seq"], hdr["gen"]
            if g == self.gen and self.dedup.get(key, -1) >= seq:
                return {"status": "dup"}, b"", False
            if g == self.gen - 1 and self.prev.get(str(hdr["to"]), {}).get(key, -1) >= seq:
                return {"status": "dup"}, b"", False
            if g < self.gen - 1:
                return {"status": "stale"}, b"", False
            if self.state != "serving" or g != self.gen:
                return {"status": "moving", "gen": self.gen}, b"", False
            n = hdr["n"]
            ids = torch.frombuffer(bytearray(body[:n * 8]), dtype=torch.int64)
            delta = torch.frombuffer(bytearray(body[n * 8:]), dtype=torch.float32).view(n, -1)
            loc = ids // self.nps
            self.values.index_add_(0, loc, delta)
            self.counts.index_add_(0, loc, torch.ones(n, dtype=torch.int64))
            self.dedup[key] = seq
            return {"status": "ok"}, b"", True
        return {"status": "error", "error": "unknown op"}, b"", False

    def conn_loop(self, sock):
        sock.settimeout(None)
        try:
            while True:
                hdr, body = recv_msg(sock)
                done = threading.Event()
                slot = []
                self.q.put((hdr, body, slot, done))
                if not done.wait(30):
                    return
                send_msg(sock, *slot[0])
        except (OSError, ValueError, struct.error):
            pass
        finally:
            sock.close()

    def accept_loop(self, srv):
        while True:
            s, _ = srv.accept()
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.conn_loop, args=(s,), daemon=True).start()

    def serve_batch(self, timeout):
        """Every request queued: answered, pushes after one checkpoint that
        holds them all (group commit)."""
        try:
            items = [self.q.get(timeout=timeout)]
        except queue.Empty:
            return
        while True:
            try:
                items.append(self.q.get_nowait())
            except queue.Empty:
                break
        applied, later = False, []
        for hdr, body, slot, done in items:
            rh, rb, ap = self.handle(hdr, body)
            slot.append((rh, rb))
            if ap:
                applied = True
                later.append(done)
            else:
                done.set()
        if applied:
            self.save()
        for d in later:
            d.set()

    def run(self):
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.a.port_base + self.rank))
        srv.listen(64)
        threading.Thread(target=self.accept_loop, args=(srv,), daemon=True).start()
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "term", True))
        next_poll = 0.0
        while True:
            self.serve_batch(0.05)
            now = time.time()
            if now < next_poll:
                continue
            next_poll = now + self.a.poll_s
            job = master_job(self.master)
            if job is None:
                continue
            desired = job.get("desired", {}).get("ps", {}).get("count", 0)
            if self.term and (self.state != "serving" or self.rank < desired):
                # stopped (a migration, the master's stop): every push it
                # acknowledged is in its checkpoint, which a relaunch loads;
                # a removed PS (rank >= desired) freezes first
                log("ps", "stopped", rank=self.rank, gen=self.gen, state=self.state)
                return 0
            if self.state in ("starting", "joining"):
                if self.settle(desired):
                    log("ps", "ready", rank=self.rank, gen=self.gen, nps=self.nps,
                        state=self.state)
                else:
                    self.state = "joining"
                continue
            if self.state == "serving" and desired > 0 and desired != self.nps and \
                    self.peers_up(desired):
                self.target, self.state = desired, "frozen"
                self.save()  # final for this generation: what the next one is built from
                log("ps", "frozen", rank=self.rank, gen=self.gen, nps=self.nps, target=desired)
            if self.state == "frozen" and self.rank < self.target:
                if self.build(self.gen + 1, self.target, self.gen, self.nps):
                    continue
            if self.state == "serving" and self.job_over(job):
                self.dump()
                return 0

    def peers_up(self, desired):
        """Whether every PS a grown layout adds answers already: the layout
        moves only once they can build their partitions (their start, not
        the handover, would otherwise hold up training)."""
        for r in range(self.nps, desired):
            try:
                with socket.create_connection(("127.0.0.1", self.a.port_base + r), 1.0) as s:
                    s.settimeout(1.0)
                    send_msg(s, {"op": "info"})
                    recv_msg(s)
            except (OSError, ValueError, struct.error):
                return False
        return True

    def job_over(self, job):
        if not job.get("finished"):
            return False
        return not any(n.get("role") == "worker" and n.get("state") in ("launched", "running")
                       for n in job.get("nodes", []))

    def dump(self):
        if self.a.dump_dir:
            path = os.path.join(self.a.dump_dir, f"ps-{self.rank}.pt")
            torch.save({"ids": self.lay.global_ids(self.rank, self.nps), "values": self.values,
                        "counts": self.counts, "gen": self.gen, "nps": self.nps}, path + ".tmp")
            os.rename(path + ".tmp", path)
        log("ps", "done", rank=self.rank, gen=self.gen, nps=self.nps,
            updates=int(self.counts.sum()))
        # the job is over: its partitions go with it (a job of the same name
        # started later would resume from them)
        self.trainer.close()
        mine = [self.rank] + (list(range(self.nps, 64)) if self.rank == 0 else [])
        for g in gens_present(self.job):
            for r in mine:  # rank 0 also takes what removed PS left
                for f in slot_files(self.job, g, r):
                    try:
                        os.unlink(f)
                    except FileNotFoundError:
                        pass


# ---- the worker ----------------------------------------------------------

class Client:
    """The worker's connections to the PS nodes, one per rank."""

    def __init__(self, port_base, timeout):
        self.port_base, self.timeout, self.socks = port_base, timeout, {}

    def call_many(self, msgs):
        """msgs: {rank: (hdr, body)} sent to all, then every answer read:
        {rank: (hdr, body) or None when that PS did not answer}."""
        out = {}
        for r, m in msgs.items():
            try:
                s = self.socks.get(r)
                if s is None:
                    s = socket.create_connection(("127.0.0.1", self.port_base + r), self.timeout)
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    s.settimeout(self.timeout)
                    self.socks[r] = s
                send_msg(s, *m)
            except OSError:
                self.drop(r)
                out[r] = None
        for r in msgs:
            if r in out:
                continue
            try:
                out[r] = recv_msg(self.socks[r])
            except (OSError, ValueError, struct.error):
                self.drop(r)
                out[r] = None
        return out

    def drop(self, r):
        s = self.socks.pop(r, None)
        if s:
            s.close()


class Worker:
    def __init__(self, args, lay):
        self.a, self.lay = args, lay
        self.rank = int(os.environ.get("ROVER_NODE_RANK", "0"))
        self.key = f"w{self.rank}-{os.getpid()}-{time.time_ns()}"
        self.seq = 0
        self.cli = Client(args.port_base, args.timeout)
        self.gen, self.nps = -1, 0
        self.term = False

    def layout(self):
        """Wait for PS 0 to serve a generation; (gen, nps)."""
        while True:
            got = self.cli.call_many({0: ({"op": "info"}, b"")})[0]
            if got and got[0]["state"] == "serving":
                self.gen, self.nps = got[0]["gen"], got[0]["nps"]
                return
            time.sleep(0.05)

    def pull(self, ids):
        """Rows ids (unique, int64) as one (len, dim) tensor, all from one
        generation."""
        while True:
            if self.gen < 0:
                self.layout()
            own = ids % self.nps
            msgs = {p: ({"op": "pull", "gen": self.gen}, tensors_to_bytes(ids[own == p]))
                    for p in range(self.nps) if bool((own == p).any())}
            got = self.cli.call_many(msgs)
            if all(g and g[0]["status"] == "ok" for g in got.values()):
                out = torch.empty(len(ids), self.lay.dim)
                for p, (_, body) in got.items():
                    out[own == p] = torch.frombuffer(bytearray(body), dtype=torch.float32).view(
                        -1, self.lay.dim)
                return out
            self.gen = -1
            time.sleep(0.05)

    def parts(self, ids, delta):
        """ids and delta cut by owner in the current layout, each a message
        with a sequence number of its own."""
        out, own = [], ids % self.nps
        for p in range(self.nps):
            sel = own == p
            if bool(sel.any()):
                self.seq += 1
                out.append({"gen": self.gen, "to": p, "dest": p, "seq": self.seq,
                            "ids": ids[sel], "delta": delta[sel]})
        return out

    def serving_gen(self):
        """The generation PS 0 serves now, or -1 (not serving, no answer)."""
        got = self.cli.call_many({0: ({"op": "info"}, b"")})[0]
        return got[0]["gen"] if got and got[0]["state"] == "serving" else -1

    def push(self, ids, delta):
        """Apply delta to rows ids: returns once every PS acknowledged its
        part (applied and checkpointed, or found applied before).  A part a
        PS refused because its layout moved goes to the new owners; a part
        whose PS no longer answers because the layout moved (a removed PS)
        goes as it was to PS 0 of the new layout, which knows from the old
        dedup tables whether it was applied."""
        pending = self.parts(ids, delta)
        while pending:
            # one message per PS at a time: a PS sees each worker's in order
            now, wait, seen = [], [], set()
            for m in pending:
                (wait if m["dest"] in seen else now).append(m)
                seen.add(m["dest"])
            msgs = {m["dest"]: ({"op": "push", "gen": m["gen"], "to": m["to"], "key": self.key,
                                 "seq": m["seq"], "n": len(m["ids"])},
                                tensors_to_bytes(m["ids"], m["delta"])) for m in now}
            got = self.cli.call_many(msgs)
            retry, moved, lost = [], [], False
            for m in now:
                g = got.get(m["dest"])
                if g is None or g[0]["status"] == "busy":
                    retry.append(m)  # the same message again (dedup)
                    lost = lost or g is None
                elif g[0]["status"] == "moving":
                    moved.append(m)  # not applied, and that PS never will
                elif g[0]["status"] not in ("ok", "dup"):
                    raise RuntimeError(f"push refused: {g[0]}")
            if moved:
                time.sleep(0.02)
                self.layout()
                for m in moved:
                    retry += self.parts(m["ids"], m["delta"])
            else:
                if lost and self.serving_gen() > max(m["gen"] for m in retry):
                    for m in retry:
                        m["dest"] = 0
                if retry:
                    time.sleep(0.05)
            pending = retry + wait

    def step(self, ids_b, y_b):
        lay = self.lay
        flat = ids_b.reshape(-1)
        uniq, inv = torch.unique(flat, return_inverse=True)
        rows = torch.cat([uniq, lay.dense_ids])
        vals = self.pull(rows)
        emb = vals[:len(uniq)].clone().requires_grad_(True)
        dense = vals[len(uniq):].reshape(-1)[:lay.nparams].clone().requires_grad_(True)
        logit = lay.forward(emb[inv], dense, len(y_b))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, y_b)
        loss.backward()
        dg = torch.zeros(lay.dense_rows * lay.dim)
        dg[:lay.nparams] = dense.grad
        delta = torch.cat([-self.a.lr_emb * emb.grad, -self.a.lr * dg.view(-1, lay.dim)])
        self.push(rows, delta)
        return loss.item()

    def evaluate(self, ids, y):
        with torch.no_grad():
            flat = ids.reshape(-1)
            uniq, inv = torch.unique(flat, return_inverse=True)
            vals = self.pull(torch.cat([uniq, self.lay.dense_ids]))
            emb = vals[:len(uniq)]
            dense = vals[len(uniq):].reshape(-1)[:self.lay.nparams]
            logit = self.lay.forward(emb[inv], dense, len(y))
            return torch.nn.functional.binary_cross_entropy_with_logits(logit, y).item()

    def pace(self):
        """Sleep --step-sleep seconds, or what --pace-file holds when it
        exists (a test slows training while it waits for a plan's effect)."""
        sleep = self.a.step_sleep
        if self.term:
            return  # removed: finish the shard it holds without delay
        if self.a.pace_file:
            try:
                with open(self.a.pace_file) as f:
                    sleep = float(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
        if sleep > 0:
            time.sleep(sleep)

    def run(self, ids, y, eval_ids, eval_y):
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "term", True))
        t = rover.Trainer(master=os.environ["ROVER_MASTER_ADDR"],
                          node=os.environ.get("ROVER_NODE_NAME", f"worker-{self.rank}"),
                          rank=self.rank, world_size=self.rank + 1)  # asynchronous: no world
        steps, t0, losses = 0, time.time(), []
        while not self.term:  # a removed worker finishes its shard, then goes
            st, shard = t.next_shard()
            if st == rover.FINISHED:
                break
            if st == rover.WAIT:
                time.sleep(0.02)
                continue
            n = len(y)
            for a in range(shard["start"], shard["end"], self.a.batch_size):
                b = min(a + self.a.batch_size, shard["end"])
                idx = torch.arange(a, b) % n
                losses.append(self.step(ids[idx], y[idx]))
                steps += 1
                if self.a.shard_log:
                    append(self.a.shard_log,
                           f"{self.rank} {steps} {','.join(str(i) for i in range(a, b))}")
                t.consumed(b - shard["start"])
                t.report_step(steps, b - a)
                self.pace()
                if steps % self.a.log_every == 0:
                    log("worker", "step", rank=self.rank, step=steps,
                        loss=f"{sum(losses) / len(losses):.4f}",
                        steps_per_s=f"{self.a.log_every / (time.time() - t0):.1f}")
                    t0, losses = time.time(), []
            t.done()
        t.close()
        if self.term or self.rank != 0:
            log("worker", "leaving", rank=self.rank, steps=steps, removed=self.term)
            return 0
        ev = self.evaluate(eval_ids, eval_y)
        print(f"eval_loss={ev:.4f} target={self.a.target:.4f} steps={steps}", flush=True)
        return 1 if ev > self.a.target else 0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("role", choices=["ps", "worker"], nargs="?",
                    default=os.environ.get("ROVER_ROLE", "worker"))
    ap.add_argument("--rows", type=int, default=100000, help="rows of the embedding table")
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--fields", type=int, default=8, help="ids per sample")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--samples", type=int, default=40000,
                    help="the dataset's size (the job spec's datasets[0].size)")
    ap.add_argument("--eval-samples", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.5, help="the dense part's step size")
    ap.add_argument("--lr-emb", type=float, default=20.0, help="the table's step size")
    ap.add_argument("--target", type=float, default=0.67, help="eval loss to reach (exit 1 above)")
    ap.add_argument("--port-base", type=int, default=29600, help="PS rank r listens on base+r")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds per PS call")
    ap.add_argument("--poll-s", type=float, default=0.3, help="PS: how often it reads the master")
    ap.add_argument("--job", default="", help="the checkpoints' job key (default ROVER_JOB_NAME)")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--step-sleep", type=float, default=0.0, help="seconds a worker sleeps per step")
    ap.add_argument("--pace-file", default="", help="when it exists: its seconds per step instead")
    ap.add_argument("--shard-log", default="")
    ap.add_argument("--dump-dir", default="")
    return ap.parse_args(argv)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    lay = Layout(args.rows, args.dim, args.fields, args.hidden)
    if args.role == "ps":
        return PS(args, lay).run()
    ids, y = make_data(args.samples + args.eval_samples, args.fields, args.rows, args.seed)
    return Worker(args, lay).run(ids[:args.samples], y[:args.samples], ids[args.samples:],
                                 y[args.samples:])


if __name__ == "__main__":
    sys.exit(main())
