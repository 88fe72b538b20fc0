#!/usr/bin/python3
"""Write holdout6.trace: a sixth held-out set for rover-sim (fixed seed).

Written from the trace format (tests/sim/README.md), the truth and oracle
(tests/sim/model.c) and the way the shipped sets were made
(tests/sim/gen_traces.py), without reading the planning algorithms.  Every
job runs on a cluster of small nodes: 40 x 16 cores x 64 GiB, so a node
larger than that is infeasible.  The oracle below mirrors model.c (with the
node-fit check) and is used only to size each user's over-sized request and
the job's work.
Run: /usr/bin/python3 gen_h6.py  (writes holdout6.trace next to it).
"""
import json, math, os, random, sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from holdgen import speed  # noqa: E402  (the truth tests/sim/model.c plays)

rng = random.Random(60613)
NODE_CPU, NODE_MEM = 16, 64 * 1024
CLUSTER = {"cluster": {"nodes": 40, "node_cpu": NODE_CPU, "node_mem_gb": 64}}
arrival = [0.0]


def tenths_up(x):
    return math.ceil(x * 10 - 1e-9) / 10


def ps_mem_need(j, p):
    return (j["ps_mem_mb"] + p - 1) // p + 512


def fits(j, w, p):
    if tenths_up(j["worker_cpu"]) > NODE_CPU or j["worker_mem_mb"] > NODE_MEM:
        return False
    if p:
        return (tenths_up(j["ps_cpu_per_worker"] * w / p) <= NODE_CPU and
                ps_mem_need(j, p) <= NODE_MEM)
    return True


def oracle(j):
    ps = range(j["min_ps"], j["max_ps"] + 1) if j["strategy"] == "ps" else [0]
    cfgs = [(w, p) for w in range(j["min_workers"], j["max_workers"] + 1) for p in ps
            if fits(j, w, p)]
    assert cfgs, j["name"] + ": no config fits a node"
    best = max(speed(j, w, p) for w, p in cfgs)
    gb_per_core = NODE_MEM / 1024 / NODE_CPU

    def cost(w, p):
        c = w * tenths_up(j["worker_cpu"])
        m = w * j["worker_mem_mb"]
        if p:
            c += p * tenths_up(j["ps_cpu_per_worker"] * w / p)
            m += p * ps_mem_need(j, p)
        return c + m / 1024 / gb_per_core
    ok = [(cost(w, p), -speed(j, w, p), w, p) for w, p in cfgs if speed(j, w, p) >= 0.9 * best]
    c, s, w, p = min(ok)
    return w, p, -s


def half(x):
    return round(x * 2) / 2


def job(name, strategy, t, wcpu, wmem, min_w=1, max_w=16, ps=None, noise=None, warmup=None,
        warmup_start=None, over=None, zero=False, mem_short=None, cpu_short=None,
        ps_cpu_short=None, ps_mem_short=None, params=2e7, batch=64, mem_rise=None):
    """mem_short / cpu_short: the share of the need the user asks (under-asking)."""
    j = {"name": name, "strategy": strategy, "t": t, "worker_cpu": wcpu, "worker_mem_mb": wmem,
         "noise": noise if noise is not None else round(rng.uniform(0.02, 0.05), 3),
         "warmup_s": warmup if warmup is not None else rng.choice([20, 30, 45, 60]),
         "min_workers": min_w, "max_workers": max_w, "parameters": int(params), "batch": batch}
    if warmup_start is not None:
        j["warmup_start"] = warmup_start
    if mem_rise:
        j["mem_rise"], j["mem_rise_s"] = mem_rise
    if strategy == "ps":
        j.update(ps)
    w, p, s = oracle(j)
    over = over or rng.uniform(2.0, 4.0)
    uw = max(min_w, min(max_w, round(w * over)))
    ucpu = wcpu * (cpu_short if cpu_short else rng.uniform(1.5, 2.5))
    umem = wmem * (mem_short if mem_short else rng.uniform(1.6, 2.4))
    # Real schedulers reject a pod larger than a node: users ask at most a node.
    user = {"workers": uw, "cpu": min(NODE_CPU, max(0.5, half(ucpu))),
            "memory_mb": int(min(NODE_MEM, umem) // 256 * 256)}
    if strategy == "ps":
        lo = j["min_ps"]
        while ps_mem_need(j, lo) * (ps_mem_short or 1.0) > NODE_MEM:
            lo += 1   # the user knows the model must be split to fit a node
        up = min(j["max_ps"], max(lo, round(p * rng.uniform(1.5, 2.5))))
        need = j["ps_cpu_per_worker"] * uw / up
        pcpu = need * (ps_cpu_short if ps_cpu_short else rng.uniform(1.5, 2.5))
        pmem = ps_mem_need(j, up) * (ps_mem_short if ps_mem_short else rng.uniform(1.6, 2.2))
        user.update({"ps": up,
                     "ps_cpu": min(NODE_CPU, max(1.0 if ps_cpu_short else 2.0, half(pcpu))),
                     "ps_memory_mb": int(min(NODE_MEM, pmem) // 256 * 256)})
    j["user"] = user
    if zero:
        j["zero_config"] = True
    j["arrival_s"] = arrival[0]
    arrival[0] += rng.choice([60, 120, 240, 420, 600])
    j["work"] = float(round(s * rng.uniform(3600, 4 * 3600)))
    return j


def ps_cfg(c, total_mb, lo, hi):
    return {"ps_cpu_per_worker": c, "ps_mem_mb": total_mb, "min_ps": lo, "max_ps": hi}


def ar_t(opt, t0_lo, t0_hi, t1_lo=0.0003, t1_hi=0.003):
    """All-reduce truth whose unconstrained optimum is near opt workers."""
    t0 = rng.uniform(t0_lo, t0_hi)
    return [round(t0, 6), round(rng.uniform(t1_lo, t1_hi), 6), round(t0 / opt ** 2, 8)]


h6 = []
# 1. min_workers 3, small nodes force a 6-core worker per node; 25% noise.
h6.append(job("h6-min3-noise-ar-0", "allreduce", ar_t(8, 0.03, 0.06), 6, 12288,
              min_w=3, max_w=16, noise=round(rng.uniform(0.22, 0.28), 3)))
# 2. a fixed PS count (3) whose model state is about a third of a node each; long ramp.
h6.append(job("h6-fixed-ps-warm-0", "ps",
              [round(rng.uniform(0.08, 0.15), 5), round(rng.uniform(0.01, 0.02), 5),
               round(rng.uniform(0.0008, 0.002), 6), round(rng.uniform(0.002, 0.006), 5)],
              4, 8192, max_w=24, ps=ps_cfg(round(rng.uniform(0.4, 0.8), 2), 61440, 3, 3),
              warmup=rng.choice([240, 300, 360]), warmup_start=0.35, params=8e9))
# 3. 1-16 PS, 360 GiB of embedding state: at least 6 PS to fit a 64 GiB node,
#    PS memory dominates the cost.
h6.append(job("h6-wide-ps-bigmem-0", "ps",
              [round(rng.uniform(0.1, 0.2), 5), round(rng.uniform(0.03, 0.06), 5), 0.0006, 0.0015],
              4, 6144, max_w=32, ps=ps_cfg(0.35, 368640, 1, 16), params=4.5e10, batch=512))
# 4. very short steps, communication-bound: 2-3 workers best; 20-30% noise.
h6.append(job("h6-short-step-noise-ar-0", "allreduce",
              [0.006, round(rng.uniform(0.0015, 0.0025), 6), 0.0015], 4, 6144, max_w=24,
              noise=round(rng.uniform(0.2, 0.3), 3), params=5e6, batch=32))
# 5. near-linear scaling up to 32 workers of 4 cores; warm-up 300 s.
h6.append(job("h6-linear-warm-ar-0", "allreduce",
              [round(rng.uniform(0.6, 0.9), 5), 0.0001, 0.0000004], 4, 8192, max_w=32, over=0.5,
              warmup=300, warmup_start=0.3, params=3e8))
# 6. PS job whose user under-asks both roles' memory (OOM at the start), min 2 workers.
h6.append(job("h6-oom-start-ps-0", "ps",
              [round(rng.uniform(0.05, 0.12), 5), round(rng.uniform(0.01, 0.025), 5),
               round(rng.uniform(0.0008, 0.002), 6), round(rng.uniform(0.003, 0.008), 5)],
              2, 10240, min_w=2, max_w=20, ps=ps_cfg(round(rng.uniform(0.5, 1.0), 2), 24576, 1, 6),
              mem_short=0.55, ps_mem_short=0.6))
# 7. workers of 10 cores asked at 5 (starved), 2-4 workers allowed.
h6.append(job("h6-starved-small-ar-0", "allreduce", ar_t(6, 0.04, 0.08), 10, 16384,
              min_w=2, max_w=4, cpu_short=0.5, noise=0.03))
# 8. zero-config all-reduce with 20 GiB workers (above any small default), ramp 150 s.
h6.append(job("h6-zero-bigmem-warm-ar-0", "allreduce", ar_t(6, 0.02, 0.05), 8, 20480,
              max_w=16, zero=True, warmup=150, warmup_start=0.5, params=1.2e9))
# 9. zero-config PS, 1-16 PS, 200 GiB model state: PS memory dominates; 22% noise.
h6.append(job("h6-zero-wide-ps-noise-0", "ps",
              [round(rng.uniform(0.08, 0.15), 5), round(rng.uniform(0.04, 0.08), 5), 0.0005,
               0.0012], 2, 4096, max_w=24, ps=ps_cfg(0.4, 204800, 1, 16), zero=True,
              noise=round(rng.uniform(0.2, 0.25), 3), params=2.5e10, batch=1024))
# 10. late memory rise on all-reduce under noise: the request holds at first.
j = job("h6-late-rise-noise-ar-0", "allreduce", ar_t(8, 0.02, 0.04), 4, 16384, max_w=24,
        noise=round(rng.uniform(0.2, 0.3), 3), mem_rise=(0.4, 1500), mem_short=0.7)
h6.append(j)
# 11. late memory rise on a PS job (both roles), min 4 workers, ramp 200 s.
j = job("h6-late-rise-warm-ps-0", "ps",
        [round(rng.uniform(0.1, 0.2), 5), round(rng.uniform(0.008, 0.015), 5),
         round(rng.uniform(0.0005, 0.0015), 6), round(rng.uniform(0.002, 0.005), 5)],
        4, 12288, min_w=4, max_w=24, ps=ps_cfg(round(rng.uniform(0.3, 0.6), 2), 32768, 1, 8),
        warmup=200, warmup_start=0.4, mem_rise=(0.35, 2000), mem_short=0.75, ps_mem_short=0.8)
h6.append(j)
# 12. PS short of CPU (1 core asked where each PS needs several), 4-6 workers.
h6.append(job("h6-ps-starved-few-0", "ps",
              [round(rng.uniform(0.15, 0.3), 5), round(rng.uniform(0.02, 0.04), 5),
               round(rng.uniform(0.001, 0.003), 6), round(rng.uniform(0.004, 0.01), 5)],
              4, 8192, min_w=4, max_w=6, ps=ps_cfg(round(rng.uniform(1.0, 1.5), 2), 16384, 1, 4),
              ps_cpu_short=0.3))
# 13. at most 3 workers, a fixed pair of PS, 30% noise.
h6.append(job("h6-small-fixed-ps-noise-0", "ps",
              [round(rng.uniform(0.05, 0.1), 5), round(rng.uniform(0.01, 0.02), 5),
               round(rng.uniform(0.001, 0.003), 6), round(rng.uniform(0.003, 0.006), 5)],
              2, 6144, max_w=3, ps=ps_cfg(round(rng.uniform(0.5, 1.0), 2), 20480, 2, 2),
              noise=0.3))
# 14. min 8 workers, near-linear, zero-config; ramp 400 s from 20%.
h6.append(job("h6-min8-linear-zero-ar-0", "allreduce",
              [round(rng.uniform(0.4, 0.7), 5), 0.00015, 0.0000008], 2, 4096, min_w=8, max_w=24,
              zero=True, warmup=400, warmup_start=0.2, over=0.6))
# 15. PS with very short steps (8 ms of compute): speed saturates early as the
#     per-worker transfer cost takes over; a ramp of 2-3 minutes.
h6.append(job("h6-short-step-ps-0", "ps",
              [0.008, 0.003, round(rng.uniform(0.001, 0.0015), 6), 0.002], 2, 4096, max_w=16,
              ps=ps_cfg(0.6, 8192, 1, 6), warmup=rng.choice([120, 180])))

names = [j["name"] for j in h6]
assert len(set(names)) == len(names) and all(len(n) <= 40 for n in names)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "holdout6.trace")
with open(out, "w") as f:
    f.write("# A sixth held-out set (gen_h6.py): 40 small nodes of 16 cores / 64 GiB, written\n"
            "# blind to the planners; report its score apart from the others.\n")
    f.write(json.dumps(CLUSTER, separators=(",", ":")) + "\n")
    for j in h6:
        f.write(json.dumps(j, separators=(",", ":")) + "\n")
for j in h6:
    w, p, s = oracle(j)
    print("%-28s oracle w=%-2d p=%-2d user w=%-2d p=%-2s cpu=%-5s mem=%s" % (
        j["name"], w, p, j["user"]["workers"], j["user"].get("ps", "-"), j["user"]["cpu"],
        j["user"]["memory_mb"]))
