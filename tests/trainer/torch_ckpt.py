"""The worker side of check_trainer's PyTorch test, run by /usr/bin/python3
with rover-run's variables set.

  torch_ckpt.py save DIGEST   train a small model with Adam for 5 steps,
                              rover.Checkpointer.save each step, write the
                              digest of the last saved state to DIGEST, then
                              keep training without saving until killed
  torch_ckpt.py load DIGEST   a fresh model and optimizer (other seed),
                              Checkpointer.load, write step and digest
  torch_ckpt.py overlap OUT   a model of 32 MiB with Adam (96 MiB saved): each
                              step's Checkpointer.save overlaps the next step,
                              whose optimizer.step() waits for the copy; a second
                              Checkpointer loads each saved step: write
                              "<steps> <steps equal to the state saved>"
  torch_ckpt.py alias OUT     save a model, Adam and an extra object that keeps
                              the tensors it is given; load them into fresh
                              ones; save twice more with other values (both
                              slots overwritten): write "<step loaded>
                              <loaded state unchanged>"
  torch_ckpt.py shards OUT    take every sample through rover.ShardSampler
                              in a DataLoader, report a step per batch, write
                              "<samples> <distinct indices>" (one epoch)
  torch_ckpt.py compute OUT   DDP over gloo in a world of one, a forward of
                              50 ms (a sleep) and 500 ms outside forward and
                              backward each step, rover.ComputeTimer on it:
                              write "<take() before a step> <mean of 4 steps>
                              <grads equal to DDP's own reduce> <take() again>",
                              reporting each step with its compute time
"""
import hashlib
import sys
import time

import torch

import rover


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
    h.update(repr(st["param_groups"]).encode())
    return h.hexdigest()


def build(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    model.register_buffer("counter", torch.zeros(3, dtype=torch.int64))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, opt


def build_big(seed):
    """build's model with a parameter of 32 MiB that the step's forward and
    backward leave alone (its gradient is set once) and its optimizer's
    update writes whole: 96 MiB saved with Adam's state."""
    model, _ = build(seed)
    model.register_parameter("big", torch.nn.Parameter(torch.randn(8 << 20)))
    model.big.grad = torch.full_like(model.big, 1e-3)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def train_step_big(model, opt):
    """A step that reaches its optimizer.step() at once: the save of the
    step before is still copying."""
    for p in model[0].parameters():
        p.grad = None
    for p in model[2].parameters():
        p.grad = None
    loss = model(torch.randn(16, 32)).pow(2).mean()
    loss.backward()
    opt.step()
    model.counter += 1


def train_step(model, opt):
    x = torch.randn(16, 32)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.counter += 1


class Keep:
    """An extra state that keeps the very tensor load_state_dict gives it."""

    def __init__(self, v):
        self.t = torch.full((4096,), float(v))

    def state_dict(self):
        return {"t": self.t}

    def load_state_dict(self, sd):
        self.t = sd["t"]


def alias():
    """(step loaded, whether what was loaded stayed as loaded while later
    saves overwrote both checkpoint slots)."""
    model, opt = build(5)
    keep = Keep(7)
    ck = rover.Checkpointer(model, opt, extra=keep)
    train_step(model, opt)
    ck.save(1)
    model2, opt2 = build(6)
    keep2 = Keep(0)
    step = rover.Checkpointer(model2, opt2, extra=keep2).load()
    want = digest(model2, opt2)
    keep.t.fill_(99)
    for s in (2, 3):
        train_step(model, opt)
        ck.save(s)
    return step, bool(keep2.t.eq(7).all()) and digest(model2, opt2) == want


class SlowLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        time.sleep(0.05)
        return self.lin(x)


def compute(out):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://%s.store" % out, rank=0, world_size=1)
    torch.manual_seed(0)
    model, ref = SlowLinear(), SlowLinear()
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ref_ddp = torch.nn.parallel.DistributedDataParallel(ref)
    timer = rover.ComputeTimer(ddp)
    before, equal = timer.take(), True
    for step in range(1, 5):
        x = torch.randn(4, 8)
        ddp(x).sum().backward()
        ref_ddp(x).sum().backward()
        equal = equal and all(torch.equal(a.grad, b.grad)
                              for a, b in zip(model.parameters(), ref.parameters()))
        time.sleep(0.5)  # not the node's compute: the timer must leave it out
        if step < 4:
            rover.report_step(step, 4, None)
    mean = timer.take()
    rover.report_step(4, 4, mean)
    with open(out, "w") as f:
        f.write("%s %.3f %d %s\n" % (before, mean, equal, timer.take()))
    dist.destroy_process_group()


def main():
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "save":
        model, opt = build(1)
        ck = rover.Checkpointer(model, opt)
        for step in range(1, 6):
            train_step(model, opt)
            ck.save(step)
        with open(out, "w") as f:
            f.write("%d %s\n" % (step, digest(model, opt)))
        print("saved", step, ck.last, flush=True)
        while True:  # the state moves on, unsaved, until the kill
            train_step(model, opt)
            time.sleep(0.01)
    if mode == "overlap":
        model, opt = build_big(3)
        other, other_opt = build_big(4)
        ck, equal = rover.Checkpointer(model, opt, overlap=True), 0
        assert ck.overlap
        train_step_big(model, opt)
        for step in range(1, 6):
            want = digest(model, opt)
            ck.save(step)  # returns before the copy is done
            in_flight = ck._inflight is not None
            train_step_big(model, opt)  # its optimizer.step() waits, then writes
            ck.wait()
            got = rover.Checkpointer(other, other_opt, overlap=False).load()
            equal += in_flight and got == step and digest(other, other_opt) == want
        with open(out, "w") as f:
            f.write("%d %d\n" % (step, equal))
        return
    if mode == "alias":
        with open(out, "w") as f:
            f.write("%s %s\n" % alias())
        return
    if mode == "compute":
        compute(out)
        return
    if mode == "shards":
        sampler = rover.ShardSampler()
        seen = []
        loader = torch.utils.data.DataLoader(sampler, batch_size=8)
        for step, batch in enumerate(loader, start=1):
            seen += [int(i) for i in batch]
            rover.report_step(step, len(batch))
        with open(out, "w") as f:
            f.write("%d %d\n" % (len(seen), len(set(seen))))
        return
    model, opt = build(2)
    ck = rover.Checkpointer(model, opt)
    step = ck.load()
    with open(out, "w") as f:
        f.write("%s %s\n" % (step, digest(model, opt)))


if __name__ == "__main__":
    main()
