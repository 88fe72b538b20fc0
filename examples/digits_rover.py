#!/usr/bin/env python3
"""digits_ddp.py on Rover's trainer library: the samples come from the
master's data shards (rover.ShardSampler: each exactly once, also across
restarts), every step is reported (rover.report_step) and flash-checkpointed
(rover.Checkpointer: model, optimizer and the shard position into shared
memory that rover-run owns), and a restarted group resumes at the last saved
step, with the data where it was then, whatever the world size now.

  ROVER_STANDALONE_DATASET=1437:16:3 \\
      build/bin/rover-run --standalone --nproc-per-node 2 --max-restarts 3 \\
      --ckpt-dir /tmp/digits-ckpt examples/digits_rover.py

The master's dataset gives the sample indices (index i is training image
i modulo 1437); the job ends when its shards are done.  Rank 0 prints
  loaded step=S from=memory|storage data=restored|kept digest=D
(digest=D with --digest-log only)
after a load, every --log-every steps
  step=S loss=L samples_per_s=X
and at the end
  test_accuracy=A target=T steps=S
exiting 1 when A < T.  --shard-log FILE appends "RANK STEP I,I,..." per
step (and "load STEP" at each load), --digest-log FILE "STEP DIGEST" per
save (rank 0): what the tests check; --time-log FILE what the goodput
bench measures.
"""
import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from digits_ddp import finish, setup_dist, split_digits  # noqa: E402

import rover  # noqa: E402  (rover-run puts it on PYTHONPATH)


def digest(model, opt):
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    st = opt.state_dict()
    for pid in sorted(st["state"]):
        for k, v in sorted(st["state"][pid].items()):
            h.update(("%s.%s" % (pid, k)).encode())
            h.update(v.cpu().contiguous().numpy().tobytes() if torch.is_tensor(v) else repr(v).encode())
    return h.hexdigest()[:16]


def append(path, line):
    """One write(2) per line, O_APPEND: lines of several ranks never mix."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=16, help="samples per worker per step")
    ap.add_argument("--steps", type=int, default=0, help="stop after this step (0: when the data ends)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--target", type=float, default=0.0, help="test accuracy to reach (exit 1 below)")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep per step")
    ap.add_argument("--hidden", type=int, default=128, help="width of the hidden layer")
    ap.add_argument("--compute-time", action="store_true",
                    help="report each step's compute time (rover.ComputeTimer): what tells a "
                    "slow node when every step waits for the slowest")
    ap.add_argument("--pad-mib", type=int, default=0, help="MiB of extra state saved each step")
    ap.add_argument("--overlap", action="store_true",
                    help="overlap each save with the next step (rover.Checkpointer overlap=True)")
    ap.add_argument("--save-delay", default="", metavar="RANK:SECONDS",
                    help="that rank saves (and reports its data position) this much later "
                    "than the others each step: a slow node, for the tests")
    ap.add_argument("--shard-log", default="")
    ap.add_argument("--digest-log", default="")
    ap.add_argument("--time-log", default="", help="rank 0 appends \"STEP TIME SAVE_SECONDS\" "
                    "per save and \"load STEP TIME\" per load (the goodput bench)")
    args = ap.parse_args()

    world, dev = setup_dist()
    rank = int(os.environ.get("RANK", "0"))
    save_delay = 0.0
    if args.save_delay:
        r, s = args.save_delay.split(":")
        save_delay = float(s) if int(r) == rank else 0.0
    x_train, y_train, x_test, y_test = split_digits()
    n = x_train.shape[0]

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10)).to(dev)
    state = model  # what is checkpointed
    if args.pad_mib:  # a larger state, for the tests that kill during a save
        # beside the model, not in it: DDP would broadcast it at every start
        state = nn.Module()
        state.net = model
        state.register_buffer("pad", torch.zeros(args.pad_mib << 18, device=dev))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    ckpt = rover.Checkpointer(state, opt, overlap=args.overlap)
    step = ckpt.load() or 0  # the newest step every rank holds; the data put back there
    if ckpt.source and rank == 0:
        print(f"loaded step={step} from={ckpt.source[0]} world={world} "
              f"data={'restored' if ckpt.data_restored else 'kept'}"
              # hashing the whole state is for the tests (it holds up a restart)
              + (f" digest={digest(state, opt)}" if args.digest_log else ""), flush=True)
    if args.shard_log and rank == 0:
        append(args.shard_log, f"load {step} world={world}")
    if args.time_log and rank == 0:
        append(args.time_log, f"load {step} {time.time():.6f}")
    ddp = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    timer = rover.ComputeTimer(ddp) if args.compute_time and world > 1 else None
    loss_fn = nn.CrossEntropyLoss()

    sampler = rover.ShardSampler()
    t0, seen = time.time(), 0
    while not args.steps or step < args.steps:
        idx = sampler.take(args.batch_size)
        # [samples here, shards left here]: a rank without data trains on
        # nothing until every rank is done
        have = torch.tensor([len(idx), 0 if sampler.finished else 1], device=dev)
        if world > 1:
            dist.all_reduce(have, op=dist.ReduceOp.MAX)
        if have[0].item() == 0:
            if have[1].item() == 0:
                break
            time.sleep(0.02)  # every free shard is in flight elsewhere
            continue
        opt.zero_grad()
        if idx:
            rows = torch.tensor(idx) % n
            loss = loss_fn(ddp(x_train[rows].to(dev)), y_train[rows].to(dev))
        else:
            loss = ddp(x_train[:1].to(dev)).sum() * 0.0
        loss.backward()
        opt.step()
        step += 1
        seen += len(idx)
        if args.pad_mib:
            state.pad[0] = step
        if args.step_sleep:
            time.sleep(args.step_sleep)
        # the log line before the save: a step logged but not saved is one
        # the restart repeats (the check drops it), never a sample unlogged
        if args.shard_log:
            append(args.shard_log, f"{rank} {step} {','.join(str(i) for i in idx)}")
        rover.report_step(step, len(idx), timer.take() if timer else None)
        if save_delay:
            time.sleep(save_delay)
        t_save = time.time()
        ckpt.save(step)
        t_saved = time.time()
        if args.digest_log and rank == 0:
            ckpt.wait()
            append(args.digest_log, f"{step} {digest(state, opt)}")
        if args.time_log and rank == 0:
            append(args.time_log, f"{step} {time.time():.6f} {t_saved - t_save:.6f}")
        if rank == 0 and step % args.log_every == 0:
            dt = time.time() - t0
            print(f"step={step} loss={loss.item():.4f} samples_per_s={seen / dt:.0f}", flush=True)
            t0, seen = time.time(), 0
    ckpt.wait()

    finish(model, x_test, y_test, dev, rank, world, args.target, f" steps={step}")


if __name__ == "__main__":
    main()
