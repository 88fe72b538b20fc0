#!/usr/bin/env python3
"""A flash checkpoint of model state held on a GPU: what it costs the loop
and whether it comes back bit for bit.  Run by tests/gpu/run.sh under
rover-run on a machine with an NVIDIA GPU (never by make test: CI has none).

The state is 8 float32 parameters of SIZE/8 each on cuda:0 (ROVER_BENCH_MIB,
default 1024).  A step is a few bf16 matrix products plus an update of every
parameter (so a copy not ordered before the next update would be torn).
Measured in the same run, 10 steps each, every step ended by a synchronize:
  base   the steps alone
  rover  each step followed by Checkpointer.save (pinned staging, side stream)
  torch  each step followed by torch.save of the state_dict to /dev/shm
The overhead of a save is (mode - base) / steps.  With 2 ms steps the
commit of each save (pinned memory into shared memory, CRC) is what the next
save waits for; the same is measured with steps of about half a second
(ROVER_BENCH_SPIN GPU cycles), where the commit overlaps the step.  Then
the parameters are overwritten and Checkpointer.load must give back the last
saved state exactly.  Ends with one line:
  bench=gpu_flash_ckpt size_mib=N step_s=N rover_overhead_s=N
        torch_overhead_s=N speedup=N long_step_s=N rover_overhead_long_s=N
        d2h_gibps=N exact=0|1
"""
import os
import sys
import time

import torch

import rover  # rover-run puts it on PYTHONPATH

STEPS = 10


def main():
    mib = int(os.environ.get("ROVER_BENCH_MIB", "1024"))
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    n = mib * (1 << 20) // 4 // 8
    model = torch.nn.Module()
    for i in range(8):
        model.register_parameter(f"p{i}", torch.nn.Parameter(torch.rand(n, device=dev)))
    a = torch.rand(4096, 4096, device=dev, dtype=torch.bfloat16)
    ckpt = rover.Checkpointer(model)

    def step(s, spin=0):
        if spin:  # a longer step: the GPU busy for spin cycles
            torch.cuda._sleep(spin)
        with torch.no_grad():
            x = a
            for _ in range(8):
                x = x @ a
            for p in model.parameters():
                p.add_(float(x[0, 0].float().clamp(-1, 1)) * 1e-6 + s * 1e-3)

    saved = [0]  # steps saved so far: every save a new, higher step

    def run(mode, spin=0):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for s in range(STEPS):
            step(s, spin)
            if mode == "rover":
                saved[0] += 1
                ckpt.save(saved[0])
            elif mode == "torch":
                torch.save(model.state_dict(), "/dev/shm/rover-gpu-ckpt.pt")
            torch.cuda.synchronize()
        ckpt.wait()
        return time.perf_counter() - t0

    for mode in ("base", "rover", "torch"):  # warm-up: pinned buffers, allocator
        run(mode)
    t = {m: run(m) for m in ("base", "rover", "torch", "base")}
    base = min(t["base"], run("base"))
    over_r = max((t["rover"] - base) / STEPS, 1e-6)
    over_t = (t["torch"] - base) / STEPS
    os.unlink("/dev/shm/rover-gpu-ckpt.pt")
    # Steps longer than the commit (about 0.5 s, as in most real training):
    # the commit overlaps the next step and the save costs about the copy.
    spin = int(os.environ.get("ROVER_BENCH_SPIN", "1000000000"))
    run("base", spin)
    long_base = min(run("base", spin), run("base", spin))
    over_long = (run("rover", spin) - long_base) / STEPS

    # the bound: one device-to-host copy of the state into pinned memory
    pinned = [torch.empty_like(p, device="cpu").pin_memory() for p in model.parameters()]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for h, p in zip(pinned, model.parameters()):
        h.copy_(p, non_blocking=True)
    torch.cuda.synchronize()
    d2h = mib / 1024 / (time.perf_counter() - t0)

    step(0)
    saved[0] += 1
    ckpt.save(saved[0])
    ckpt.wait()
    want = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    got = ckpt.load()
    exact = got == saved[0] and all(torch.equal(v.cpu(), want[k]) for k, v in model.state_dict().items())
    print(f"loaded step={got} from={ckpt.source and ckpt.source[0]}", flush=True)
    print(f"bench=gpu_flash_ckpt size_mib={mib} step_s={base / STEPS:.4f} "
          f"rover_overhead_s={over_r:.4f} torch_overhead_s={over_t:.4f} "
          f"speedup={over_t / over_r:.1f} long_step_s={long_base / STEPS:.3f} "
          f"rover_overhead_long_s={over_long:.4f} d2h_gibps={d2h:.1f} exact={int(exact)}",
          flush=True)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
