#!/usr/bin/env python3
"""Online learning from Redis Streams under Rover: a small PyTorch
classifier trains on records while a producer adds them, each record once,
also across kill -9 of the worker, of rover-run, of the master and of the
bridge (rover.StreamSampler, rover.Checkpointer).

Three processes beside the job's master (whose spec has a streaming
dataset, say "clicks" with partitions p0 and p1; see examples/stream-job.json):

  python3 examples/stream_rover.py produce --redis unix:///tmp/r.sock \\
      --dataset clicks --partitions p0,p1 --records 20000 --rate 2000
  PYTHONPATH=python python3 -m rover.redis_feed --redis unix:///tmp/r.sock \\
      --master 127.0.0.1:7000 --dataset clicks
  ROVER_REDIS_URL=unix:///tmp/r.sock build/bin/rover-run \\
      --rdzv-endpoint 127.0.0.1:7000 --nproc-per-node 1 \\
      examples/stream_rover.py train --until-committed 20000

A record is {"rid": k, "x": "f,f,...", "y": 0|1}: features drawn from k
(seeded), its label on which side of a fixed plane it lies.  The worker
prints "loaded step=S" after a load, "step=S loss=L records_per_s=X" every
--log-every steps and "trained=N accuracy=A" at the end (accuracy over
records 10^9.. drawn the same way); --record-log FILE appends
"RANK STEP rid,rid,..." per step and "load STEP world=W" per start: what
the tests count.
"""
import argparse
import json
import os
import sys
import time
import urllib.request

FEATURES = 16


def features(k):
    """Record k's features and label: the same for every process."""
    import random
    g = random.Random(k)
    x = [g.gauss(0.0, 1.0) for _ in range(FEATURES)]
    w = [((i * 7) % 5) - 2.0 for i in range(FEATURES)]
    return x, int(sum(a * b for a, b in zip(x, w)) > 0.0)


def produce(a):
    """XADD * records 0..N-1, partitions in turn, at about --rate a second."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from rover.stream import connect, stream_key
    r = connect(a.redis)
    parts = a.partitions.split(",")
    t0 = time.monotonic()
    for k in range(a.first, a.first + a.records, a.batch):
        p = r.pipeline(transaction=False)
        for j in range(k, min(k + a.batch, a.first + a.records)):
            x, y = features(j)
            p.xadd(stream_key(a.dataset, parts[j % len(parts)]),
                   {"rid": j, "x": ",".join("%.6f" % v for v in x), "y": y})
        p.execute()
        if a.rate:
            ahead = (k + a.batch - a.first) / a.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    print("produced=%d" % a.records, flush=True)


def append(path, line):
    """One write(2) per line, O_APPEND."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def committed(dataset):
    """The master's committed offsets of dataset, summed (the job's progress)."""
    addr = os.environ["ROVER_MASTER_ADDR"]
    url = (addr if addr.startswith("http") else "http://" + addr) + "/v1/streams/" + dataset
    with urllib.request.urlopen(url, timeout=5) as resp:
        return sum(p["committed_offset"] for p in json.loads(resp.read())["partitions"])


def train(a):
    import torch
    from torch import nn
    import rover

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    sampler = rover.StreamSampler(rover.RedisStream(a.redis or None))
    ckpt = rover.Checkpointer(model, opt, extra=sampler)
    step = ckpt.load() or 0
    if ckpt.source:
        print("loaded step=%d from=%s" % (step, ckpt.source[0]), flush=True)
    if a.record_log:
        append(a.record_log, "load %d world=%s" % (step, os.environ.get("WORLD_SIZE", "1")))
    loss_fn = nn.CrossEntropyLoss()
    t0, seen, trained, idle = time.time(), 0, 0, time.monotonic()
    while True:
        recs = sampler.take(a.batch_size)
        if not recs:
            if a.until_committed and time.monotonic() - idle > 0.2:
                idle = time.monotonic()
                if committed(sampler.task and sampler.task["dataset"] or a.dataset) >= a.until_committed:
                    break
            time.sleep(0.005)
            continue
        x = torch.tensor([[float(v) for v in r.fields[b"x"].split(b",")] for r in recs])
        y = torch.tensor([int(r.fields[b"y"]) for r in recs])
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        step += 1
        seen += len(recs)
        trained += len(recs)
        if a.step_sleep:
            time.sleep(a.step_sleep)
        # logged before the save: a step logged and not saved is one a restart
        # repeats (the count drops it), never a record trained and unlogged
        if a.record_log:
            append(a.record_log, "%s %d %s" % (os.environ.get("RANK", "0"), step,
                                               ",".join(r.fields[b"rid"].decode() for r in recs)))
        rover.report_step(step, len(recs))
        ckpt.save(step)
        if step % a.log_every == 0:
            dt = time.time() - t0
            print("step=%d loss=%.4f records_per_s=%.0f" % (step, loss.item(), seen / dt), flush=True)
            t0, seen = time.time(), 0
    ckpt.wait()
    with torch.no_grad():
        test = [features(10**9 + k) for k in range(2000)]
        x = torch.tensor([t[0] for t in test])
        y = torch.tensor([t[1] for t in test])
        acc = (model(x).argmax(1) == y).float().mean().item()
    print("trained=%d steps=%d accuracy=%.4f skipped=%d" % (trained, step, acc, sampler.skipped),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce", help="add records to the partitions' streams")
    p.add_argument("--redis", default=os.environ.get("ROVER_REDIS_URL", ""))
    p.add_argument("--dataset", default="clicks")
    p.add_argument("--partitions", default="p0,p1")
    p.add_argument("--records", type=int, default=10000)
    p.add_argument("--first", type=int, default=0, help="the first record id")
    p.add_argument("--rate", type=float, default=0.0, help="records a second (0: at once)")
    p.add_argument("--batch", type=int, default=50, help="records per round trip")
    t = sub.add_parser("train", help="the worker (under rover-run)")
    t.add_argument("--redis", default="", help="default: $ROVER_REDIS_URL")
    t.add_argument("--dataset", default="clicks")
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=0.05)
    t.add_argument("--log-every", type=int, default=50)
    t.add_argument("--step-sleep", type=float, default=0.0)
    t.add_argument("--until-committed", type=int, default=0,
                   help="exit once the master committed this many records (0: never)")
    t.add_argument("--record-log", default="")
    a = ap.parse_args()
    produce(a) if a.cmd == "produce" else train(a)


if __name__ == "__main__":
    main()
