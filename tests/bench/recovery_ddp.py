"""recovery_ddp.py: the DDP job of the agent_recovery benchmark (gloo, CPU).

Runs unchanged under torchrun and rover-run.  Logs when it starts (its pid,
TORCHELASTIC_RESTART_COUNT), when its process group is up, and each step,
with the wall-clock time, so the benchmark can time a restart from the log
alone: "start rank=R pid=P restart=C t=T", "pg ...", "step=N ... t=T".
Only torch: a restart's cost is the launcher's and torch's, not the data's.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
print("start rank=%s pid=%d restart=%s t=%.6f" % (os.environ["RANK"], os.getpid(), restart,
                                                  time.time()), flush=True)
dist.init_process_group("gloo")
rank = dist.get_rank()
print("pg rank=%d restart=%s t=%.6f" % (rank, restart, time.time()), flush=True)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
for step in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print("step=%d rank=%d restart=%s loss=%.4f t=%.6f" % (step, rank, restart, loss.item(),
                                                          time.time()), flush=True)
    time.sleep(0.05)
dist.destroy_process_group()
