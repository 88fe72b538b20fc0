#!/usr/bin/python3
"""ps_scale.sh's body: python3 ps_scale.py MIB.  One process per PS (fork),
running the re-partition steps of examples/ps_rover.py's PS class."""
import multiprocessing as mp
import os
import sys
import time
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
import ps_rover  # noqa: E402

DIM = 16


def ps(job, lay, rank):
    args = types.SimpleNamespace(job=job, dump_dir="", port_base=0, poll_s=0.2)
    os.environ["ROVER_NODE_RANK"] = str(rank)
    p = ps_rover.PS(args, lay)
    p.job = job
    return p


def start(job, lay, rank, nps, q):
    ps(job, lay, rank).fresh(nps)
    q.put(rank)


def freeze(job, lay, rank, gen, target, ready, go, q):
    """An old PS holding its partition: at go, its last save (frozen)."""
    p = ps(job, lay, rank)
    p.settle(target)  # loads its own partition of gen
    ready.put(rank)
    go.wait()
    p.target, p.state = target, "frozen"
    p.save()
    q.put(time.time())


def build(job, lay, rank, gen, nps, old_nps, ready, go, q):
    """A PS of the new layout: from go, builds its partition once every old
    one is frozen (checked every 10 ms; a PS checks every --poll-s)."""
    p = ps(job, lay, rank)
    ready.put(rank)
    go.wait()
    while not p.build(gen, nps, gen - 1, old_nps):
        time.sleep(0.01)
    q.put(time.time())


def join(procs):
    for pr in procs:
        pr.join()
        if pr.exitcode != 0:
            raise SystemExit(f"a PS process failed: exit {pr.exitcode}")


def repartition(job, lay, gen, old, new):
    """Freeze gen's old PS, build gen+1 with new PS: seconds from the go
    to the last new partition saved."""
    ready, go, q = mp.Queue(), mp.Event(), mp.Queue()
    procs = [mp.Process(target=freeze, args=(job, lay, r, gen, new, ready, go, q))
             for r in range(old)]
    procs += [mp.Process(target=build, args=(job, lay, r, gen + 1, new, old, ready, go, q))
              for r in range(new)]
    for pr in procs:
        pr.start()
    for _ in procs:
        ready.get()
    t0 = time.time()
    go.set()
    ends = [q.get() for _ in procs]
    join(procs)
    return max(ends) - t0


def memcpy_s(nbytes):
    """One copy of nbytes into pages already touched: best of 3."""
    src = torch.empty(nbytes, dtype=torch.uint8)
    src.fill_(1)
    dst = torch.empty_like(src)
    dst.fill_(0)
    best = None
    for _ in range(3):
        t0 = time.time()
        dst.copy_(src)
        dt = time.time() - t0
        best = dt if best is None else min(best, dt)
    return best


def main():
    mib = int(sys.argv[1])
    lay = ps_rover.Layout((mib << 20) // (DIM * 4), DIM, 8, 32)
    # the dense rows count towards the MiB
    lay = ps_rover.Layout(lay.rows - lay.dense_rows, DIM, 8, 32)
    nbytes = lay.total * DIM * 4
    job = f"ps-scale-{os.getpid()}"
    torch.set_num_threads(1)
    try:
        q = mp.Queue()
        procs = [mp.Process(target=start, args=(job, lay, r, 2, q)) for r in range(2)]
        for pr in procs:
            pr.start()
        for _ in procs:
            q.get()
        join(procs)
        print(f"ps_scale: {nbytes / 2**20:.0f} MiB in 2 PS", file=sys.stderr, flush=True)
        grow = repartition(job, lay, 0, 2, 3)
        print(f"ps_scale: 2 -> 3 PS in {grow:.3f} s", file=sys.stderr, flush=True)
        shrink = repartition(job, lay, 1, 3, 2)
        print(f"ps_scale: 3 -> 2 PS in {shrink:.3f} s", file=sys.stderr, flush=True)
    finally:
        for f in os.listdir("/dev/shm"):
            if f.startswith(f"rover-{job}."):
                os.unlink(os.path.join("/dev/shm", f))
    mc = memcpy_s(nbytes)
    rep = (grow + shrink) / 2
    print(f"bench=ps_scale params_mib={nbytes / 2**20:.0f} repartition_s={rep:.3f} "
          f"ratio_to_memcpy={rep / mc:.1f} grow_s={grow:.3f} shrink_s={shrink:.3f} "
          f"memcpy_s={mc:.4f}", flush=True)


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()
