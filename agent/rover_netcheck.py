"""rover_netcheck.py: one round of rover-run's network check on one node
(agent/netprobe.c runs it, forked from the warm interpreter when there is one).

The nodes of a group (two; one alone in each round of an odd world) form a
process group of their own: gloo on CPU, NCCL when every member has a GPU.  Each times a
matmul (the node's compute) and then all-gathers ROVER_NETCHECK_MB MiB a few
times (the links); a slow node delays its partner's all-gather too, which is
why the master pairs again in a second round.  The store is a TCPStore on
the first member's rendezvous address.

Settings come in the environment (ROVER_NETCHECK_*: RANK, SIZE, STORE
host:port, ADDR this node's address for gloo, MB, TIMEOUT_S, GPU 0/1, OUT).
The result goes to the file OUT as one JSON object {"compute_s", "comm_s",
"backend"}; exit 0 when every step completed, 1 (the reason on stderr) when
one failed or timed out.
"""

import datetime
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

MATMUL_N = 256
MATMUL_REPS = 4
GATHER_REPS = 2


def env(name, default=None):
    v = os.environ.get("ROVER_NETCHECK_" + name, default)
    if v is None:
        raise SystemExit("rover_netcheck: ROVER_NETCHECK_%s is not set" % name)
    return v


def make_group(store, rank, size, addr, timeout, want_gpu):
    """NCCL when every member has a GPU (told through the store), else gloo
    bound to this node's rendezvous address."""
    has = bool(want_gpu) and torch.cuda.is_available()
    store.set("gpu%d" % rank, "1" if has else "0")
    everyone = all(store.get("gpu%d" % r) == b"1" for r in range(size))
    if everyone:
        torch.cuda.set_device(0)
        return dist.ProcessGroupNCCL(store, rank, size, timeout), "nccl", torch.device("cuda:0")
    opts = dist.ProcessGroupGloo._Options()
    opts._devices = [dist.ProcessGroupGloo.create_device(hostname=addr)]
    opts._timeout = timeout
    return dist.ProcessGroupGloo(store, rank, size, opts), "gloo", torch.device("cpu")


def compute(dev):
    a = torch.rand(MATMUL_N, MATMUL_N, device=dev)
    b = torch.rand(MATMUL_N, MATMUL_N, device=dev)
    t0 = time.monotonic()
    for _ in range(MATMUL_REPS):
        a = torch.matmul(a, b)
        a = a / a.norm()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return time.monotonic() - t0


def gather(pg, size, mb, dev):
    x = torch.ones(mb * (1 << 20) // 4, dtype=torch.float32, device=dev)
    out = [torch.empty_like(x) for _ in range(size)]
    t0 = time.monotonic()
    for _ in range(GATHER_REPS):
        pg.allgather([out], [x]).wait()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return time.monotonic() - t0


def wait_listening(host, port, timeout_s):
    """Until host:port accepts a connection (10 ms apart, timeout_s at most):
    a TCPStore client that finds no listener waits torch's own retry of a
    second, longer than the whole check on a quiet link."""
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.01)


def main():
    torch.set_num_threads(1)
    rank, size = int(env("RANK")), int(env("SIZE"))
    host, port = env("STORE").rsplit(":", 1)
    timeout = datetime.timedelta(seconds=float(env("TIMEOUT_S", "30")))
    if rank != 0:
        wait_listening(host.strip("[]"), int(port), timeout.total_seconds())
    store = dist.TCPStore(host.strip("[]"), int(port), size, rank == 0, timeout)
    pg, backend, dev = make_group(store, rank, size, env("ADDR"), timeout, env("GPU", "0") == "1")
    torch.matmul(torch.rand(64, 64, device=dev), torch.rand(64, 64, device=dev))  # lazy init
    # every member is here and connected: what follows is timed
    pg.allgather([[torch.zeros(1, device=dev) for _ in range(size)]],
                 [torch.zeros(1, device=dev)]).wait()
    compute_s = compute(dev)
    comm_s = gather(pg, size, int(env("MB", "4")), dev)
    with open(env("OUT"), "w") as f:
        json.dump({"compute_s": compute_s, "comm_s": comm_s, "backend": backend}, f)
    # the store's host leaves last: a peer still reading it would fail
    pg.allgather([[torch.zeros(1, device=dev) for _ in range(size)]],
                 [torch.zeros(1, device=dev)]).wait()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # one line for the agent's log, not a traceback
        print("rover_netcheck: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
