#!/usr/bin/env python3
"""Train a small MLP data parallel on scikit-learn's digits set and check it
reaches a stated test accuracy.

The digits set (1797 8x8 images of handwritten digits) ships with Debian's
python3-sklearn: nothing to download (its CSV is read directly).  The script reads only torchrun's
variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), so it
runs unchanged under torchrun and rover-run, or alone:
  /usr/bin/python3 examples/digits_ddp.py
  torchrun --nproc-per-node 2 examples/digits_ddp.py
  build/bin/rover-run --standalone --nproc-per-node 2 examples/digits_ddp.py
gloo on CPU, NCCL when GPUs exist.  Every --log-every steps rank 0 prints
  step=S loss=L samples_per_s=X
and at the end
  test_accuracy=A target=T
exiting 1 when A < T.  With --ckpt-dir the model and the optimizer are saved
every --ckpt-every steps (by rank 0) and loaded at start, so a restarted group
continues from the last save instead of step 0.
"""
import argparse
import gzip
import importlib.util
import os
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn


def load_digits():
    """The digits set as (x, y): the CSV scikit-learn ships, read directly so a
    restarted worker does not spend seconds importing sklearn and scipy;
    through sklearn itself when the file is not where it usually is."""
    spec = importlib.util.find_spec("sklearn")  # finds it, imports nothing
    if spec and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data",
                            "digits.csv.gz")
        if os.path.exists(path):
            with gzip.open(path, "rt") as f:
                data = np.loadtxt(f, delimiter=",")
            return data[:, :-1], data[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits as sk_load_digits
    return sk_load_digits(return_X_y=True)


def setup_dist():
    """This process in the job, from torchrun's environment: the world size
    and the device, the process group joined when the world has more than
    one rank (NCCL on a GPU, else gloo)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    gpu = torch.cuda.is_available()
    if world > 1:
        dist.init_process_group("nccl" if gpu else "gloo")
    dev = torch.device(f"cuda:{local_rank}" if gpu else "cpu")
    if gpu:
        torch.cuda.set_device(dev)
    return world, dev


def split_digits():
    """The same split on every rank: 360 images (20%) drawn with a fixed
    seed are the test set.  x_train, y_train, x_test, y_test."""
    x, y = load_digits()
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.long)
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(1234))
    x, y = x[order], y[order]
    return x[:-360], y[:-360], x[-360:], y[-360:]


def finish(model, x_test, y_test, dev, rank, world, target, more=""):
    """The test accuracy, printed by rank 0 (more after it); the process
    group left; exit 1 below target."""
    with torch.no_grad():
        acc = (model(x_test.to(dev)).argmax(1).cpu() == y_test).float().mean().item()
    if rank == 0:
        print(f"test_accuracy={acc:.4f} target={target:.2f}{more}", flush=True)
    if world > 1:
        dist.destroy_process_group()
    if acc < target:
        print(f"test accuracy {acc:.4f} is below the target {target:.2f}", flush=True)
        raise SystemExit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="optimizer steps in all")
    ap.add_argument("--batch-size", type=int, default=32, help="samples per worker per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--target", type=float, default=0.90,
                    help="test accuracy to reach (exit 1 below it)")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--ckpt-dir", default="", help="save and resume here")
    ap.add_argument("--ckpt-every", type=int, default=20)
    ap.add_argument("--step-sleep", type=float, default=0.0,
                    help="seconds to sleep per step (tests that must catch a run midway)")
    args = ap.parse_args()

    world, dev = setup_dist()
    rank = int(os.environ.get("RANK", "0"))
    x_train, y_train, x_test, y_test = split_digits()

    torch.manual_seed(0)  # the same initial model everywhere
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step = 0
    ckpt = os.path.join(args.ckpt_dir, "digits.pt") if args.ckpt_dir else ""
    if ckpt and os.path.exists(ckpt):
        state = torch.load(ckpt, map_location="cpu")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        if rank == 0:
            print(f"resumed from {ckpt} at step={step}", flush=True)
    ddp = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    loss_fn = nn.CrossEntropyLoss()

    n = x_train.shape[0]
    t0, seen = time.time(), 0
    while step < args.steps:
        # each rank its own slice of a per-step permutation
        g = torch.Generator().manual_seed(step)
        idx = torch.randperm(n, generator=g)[: args.batch_size * world]
        idx = idx[rank::world]
        xb, yb = x_train[idx].to(dev), y_train[idx].to(dev)
        opt.zero_grad()
        loss = loss_fn(ddp(xb), yb)
        loss.backward()
        opt.step()
        step += 1
        seen += args.batch_size * world
        if args.step_sleep:
            time.sleep(args.step_sleep)
        if rank == 0 and step % args.log_every == 0:
            dt = time.time() - t0
            print(f"step={step} loss={loss.item():.4f} samples_per_s={seen / dt:.0f}",
                  flush=True)
            t0, seen = time.time(), 0
        if ckpt and rank == 0 and step % args.ckpt_every == 0:
            tmp = ckpt + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step},
                       tmp)
            os.replace(tmp, ckpt)

    finish(model, x_test, y_test, dev, rank, world, args.target)


if __name__ == "__main__":
    main()
