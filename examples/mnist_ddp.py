#!/usr/bin/env python3
"""The training script examples/job.json runs: a small MLP trained data
parallel on MNIST-shaped synthetic data (nothing to download).

It is started the way torchrun (and rover-run, its drop-in) start workers:
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment; gloo on
CPU, NCCL on GPUs; alone (no WORLD_SIZE) it trains in one process.
  python3 examples/mnist_ddp.py --steps 50
  torchrun --nproc-per-node 2 examples/mnist_ddp.py
or by hand, one process per rank:
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 examples/mnist_ddp.py &
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 examples/mnist_ddp.py
Needs PyTorch.  Rank 0 prints the step and the speed in samples/s every
10 steps, the figure a master reports to the brain as a speed sample.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=64)  # per worker, as in job.json
    args = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    gpu = torch.cuda.is_available()
    if world > 1:
        dist.init_process_group("nccl" if gpu else "gloo")
    dev = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if gpu else "cpu")

    torch.manual_seed(rank)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(),
                          nn.Linear(512, 10)).to(dev)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    # A fixed random "dataset" with a learnable rule: the label is the
    # brightest of ten pixel bands.
    x = torch.randn(4096, 1, 28, 28)
    y = x.flatten(1)[:, :780].reshape(-1, 10, 78).sum(2).argmax(1)

    t0, seen = time.monotonic(), 0
    for step in range(1, args.steps + 1):
        i = torch.randint(0, len(x), (args.batch_size,))
        xb, yb = x[i].to(dev), y[i].to(dev)
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        seen += args.batch_size * world
        if rank == 0 and step % 10 == 0:
            speed = seen / (time.monotonic() - t0)
            print(f"step={step} loss={loss.item():.3f} speed={speed:.1f} workers={world}",
                  flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
