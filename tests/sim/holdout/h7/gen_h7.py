#!/usr/bin/python3
"""Write holdout7.trace: a seventh held-out set of simulated training jobs.

Deterministic (fixed seed).  The families were written from the trace format
and the truth model (tests/sim/README.md, model.c) alone; the oracle below
mirrors model.c's (cost = cores + GiB / GiB-per-core, 90% of the best speed,
each node fitting one cluster node) and is used only to size each user's
request and the job's work.
"""
import json, math, os, random, sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from holdgen import speed  # noqa: E402  (the truth tests/sim/model.c plays)

rng = random.Random(7707319)

NODES, NODE_CPU, NODE_MEM_GB = 24, 48, 192
GB_PER_CORE = NODE_MEM_GB / NODE_CPU
arrival = [0.0]


def tenths_up(x):
    return math.ceil(x * 10 - 1e-9) / 10


def node_cfg(j, w, p):
    wc = tenths_up(j["worker_cpu"])
    wm = j["worker_mem_mb"]
    pc = pm = 0
    if p:
        pc = tenths_up(j["ps_cpu_per_worker"] * w / p)
        pm = (j["ps_mem_mb"] + p - 1) // p + 512
    return wc, wm, pc, pm


def fits(j, w, p):
    wc, wm, pc, pm = node_cfg(j, w, p)
    lim = NODE_MEM_GB * 1024
    return wc <= NODE_CPU and wm <= lim and pc <= NODE_CPU + 1e-9 and pm <= lim


def cost(j, w, p):
    wc, wm, pc, pm = node_cfg(j, w, p)
    return w * wc + p * pc + (w * wm + p * pm) / 1024 / GB_PER_CORE


def oracle(j):
    ps = range(j["min_ps"], j["max_ps"] + 1) if j["strategy"] == "ps" else [0]
    cfgs = [(w, p) for w in range(j["min_workers"], j["max_workers"] + 1) for p in ps
            if fits(j, w, p)]
    best = max(speed(j, w, p) for w, p in cfgs)
    ok = [(cost(j, w, p), -speed(j, w, p), w, p) for w, p in cfgs if speed(j, w, p) >= 0.9 * best]
    c, s, w, p = min(ok)
    return w, p, -s


def half(x):
    return round(x * 2) / 2


def mem_req(mb, f):
    return int(min(mb * f, NODE_MEM_GB * 1024) // 256 * 256)


def job(name, strategy, t, wcpu, wmem, min_w, max_w, ps=None, noise=0.03, warmup=None,
        over=None, cpu_f=None, mem_f=None, ps_over=None, ps_cpu_f=None, ps_mem_f=None,
        zero=False, params=2e7, batch=64, **extra):
    j = {"name": name, "strategy": strategy, "t": t, "worker_cpu": wcpu, "worker_mem_mb": wmem,
         "noise": noise, "min_workers": min_w, "max_workers": max_w,
         "parameters": int(params), "batch": batch}
    if warmup:
        j["warmup_s"], j["warmup_start"] = warmup
    else:
        j["warmup_s"] = rng.choice([20, 30, 45, 60])
    if strategy == "ps":
        j.update(ps)
    else:
        j["min_ps"] = j["max_ps"] = 0
    w, p, s = oracle(j)
    if strategy != "ps":
        del j["min_ps"], j["max_ps"]
    over = over or rng.uniform(2.0, 4.0)
    uw = max(min_w, min(max_w, round(w * over)))
    cpu_f = cpu_f or rng.uniform(1.5, 2.5)
    mem_f = mem_f or rng.uniform(1.5, 2.5)
    user = {"workers": uw, "cpu": min(float(NODE_CPU), max(0.5, half(wcpu * cpu_f))),
            "memory_mb": mem_req(wmem, mem_f)}
    if strategy == "ps":
        up = min(j["max_ps"], max(j["min_ps"], round(p * (ps_over or rng.uniform(1.5, 2.5)))))
        need = j["ps_cpu_per_worker"] * uw / up
        psneed = math.ceil(j["ps_mem_mb"] / up) + 512
        pcf = ps_cpu_f or rng.uniform(1.5, 2.5)
        user.update({"ps": up,
                     "ps_cpu": min(float(NODE_CPU), max(0.5 if ps_cpu_f else 2.0, half(need * pcf))),
                     "ps_memory_mb": mem_req(psneed, ps_mem_f or 2.0)})
    j["user"] = user
    if zero:
        j["zero_config"] = True
    j.update(extra)
    j["arrival_s"] = arrival[0]
    arrival[0] += rng.choice([30, 90, 150, 240, 420])
    j["work"] = float(round(s * rng.uniform(1800, 4 * 3600)))
    j["_oracle"] = (w, p, s)
    return j


def U(a, b, nd=6):
    return round(rng.uniform(a, b), nd)


def ar_opt(opt, t0, t1):
    """All-reduce t with its unconstrained optimum near `opt` workers."""
    return [round(t0, 6), round(t1, 6), round(t0 / opt ** 2, 9)]


jobs = []

# 1. all-reduce, best at 2 workers, heavy noise; the user asks 5-7x the workers
jobs.append(job("h7-ar-pair-noise-0", "allreduce", ar_opt(2, U(0.03, 0.06), U(0.001, 0.004)),
                6, 10240, 1, 24, noise=0.27, over=U(5, 7, 2), params=3e8, batch=32))
# 2. all-reduce where one worker is best (communication beats compute), zero-config
jobs.append(job("h7-ar-single-zero-0", "allreduce", [U(0.004, 0.008), U(0.003, 0.006), U(0.004, 0.007)],
                4, 6144, 1, 16, zero=True, params=8e6, batch=256))
# 3. near-linear all-reduce, optimum at the max bound 12, long ramp from 25%
jobs.append(job("h7-ar-max12-warm-0", "allreduce", [U(0.4, 0.7), 0.00015, 0.0000015],
                8, 16384, 2, 12, warmup=(420, 0.25), over=0.5, params=1.2e9, batch=16))
# 4. near-linear all-reduce up to 40 workers under noise, with a ramp
jobs.append(job("h7-ar-max40-noise-warm-0", "allreduce", [U(0.8, 1.2), 0.0001, 0.0000004],
                4, 8192, 4, 40, noise=0.26, warmup=(180, 0.5), over=0.45, params=6e8, batch=64))
# 5. mid-range all-reduce with a straggler three times slower
jobs.append(job("h7-ar-straggler-0", "allreduce", ar_opt(9, U(0.02, 0.05), U(0.0005, 0.0015)),
                6, 12288, 1, 24, stragglers=1, straggler_slowdown=3.0, params=1e8))
# 6. all-reduce whose memory rises late (fits at start, OOMs after ~35 min)
j = job("h7-ar-late-oom-0", "allreduce", ar_opt(6, U(0.015, 0.04), U(0.0008, 0.002)),
        4, 24576, 1, 16, mem_rise=0.4, mem_rise_s=2100, params=2e9, batch=8)
j["user"]["memory_mb"] = int(24576 * 0.6 * 1.35 // 256 * 256)
jobs.append(j)
# 7. all-reduce, 10-core workers, the user asks less than half the CPU; ramp
jobs.append(job("h7-ar-starved-warm-0", "allreduce", ar_opt(10, U(0.03, 0.06), U(0.0005, 0.001)),
                10, 8192, 1, 20, warmup=(240, 0.5), cpu_f=0.45, params=4e8))
# 8. PS where many PS pay (transfer-heavy w/p term), heavy noise
jobs.append(job("h7-ps-many-noise-0", "ps",
                [U(0.05, 0.09, 5), U(0.12, 0.18, 5), 0.0003, 0.00008], 4, 6144, 1, 32,
                ps={"ps_cpu_per_worker": 0.6, "ps_mem_mb": 16384, "min_ps": 1, "max_ps": 16},
                noise=0.28, params=5e8))
# 9. PS where many PS pay, 96 GiB model state on the PS, zero-config
jobs.append(job("h7-ps-many-mem-zero-0", "ps",
                [U(0.08, 0.12, 5), U(0.08, 0.12, 5), 0.0005, 0.0002], 2, 4096, 1, 24,
                ps={"ps_cpu_per_worker": round(rng.uniform(0.3, 0.5), 2), "ps_mem_mb": 98304,
                    "min_ps": 1, "max_ps": 12}, zero=True, params=2.4e10, batch=512))
# 10. PS where one PS is best (a large per-PS overhead); the user over-asks a lot
jobs.append(job("h7-ps-one-overask-0", "ps",
                [U(0.1, 0.16, 5), 0.001, 0.0006, U(0.06, 0.1, 5)], 4, 8192, 1, 32,
                ps={"ps_cpu_per_worker": 0.35, "ps_mem_mb": 8192, "min_ps": 1, "max_ps": 8},
                over=U(4, 6, 2), ps_over=5, cpu_f=3.0, mem_f=3.0, ps_cpu_f=3.0, ps_mem_f=3.0,
                params=6e7))
# 11. PS with a fixed count of 3 PS, 48 GiB of PS state, heavy noise
jobs.append(job("h7-ps-fixed3-mem-noise-0", "ps",
                [U(0.06, 0.1, 5), U(0.02, 0.04, 5), 0.0008, 0.003], 8, 12288, 1, 24,
                ps={"ps_cpu_per_worker": 0.8, "ps_mem_mb": 49152, "min_ps": 3, "max_ps": 3},
                noise=0.25, params=1.2e10))
# 12. PS with a fixed count of 4 PS; the user under-asks memory on both roles (OOM at start)
jobs.append(job("h7-ps-fixed4-oom-0", "ps",
                [U(0.05, 0.08, 5), U(0.03, 0.05, 5), 0.0006, 0.002], 4, 14336, 1, 20,
                ps={"ps_cpu_per_worker": 0.5, "ps_mem_mb": 32768, "min_ps": 4, "max_ps": 4},
                mem_f=0.55, ps_mem_f=0.5, params=8e9))
# 13. PS short of CPU on both roles, two stragglers 2.5x slower
jobs.append(job("h7-ps-starved-straggler-0", "ps",
                [U(0.1, 0.15, 5), U(0.02, 0.03, 5), 0.0007, 0.006], 6, 6144, 1, 24,
                ps={"ps_cpu_per_worker": 0.7, "ps_mem_mb": 8192, "min_ps": 1, "max_ps": 6},
                cpu_f=0.5, ps_cpu_f=0.4, stragglers=2, straggler_slowdown=2.5, params=1e8))
# 14. PS with 128 GiB of state whose memory rises late, 30% noise
jobs.append(job("h7-ps-late-oom-noise-0", "ps",
                [U(0.06, 0.1, 5), U(0.04, 0.06, 5), 0.0005, 0.001], 4, 10240, 1, 24,
                ps={"ps_cpu_per_worker": 0.45, "ps_mem_mb": 131072, "min_ps": 1, "max_ps": 8},
                noise=0.30, mem_rise=0.3, mem_rise_s=2400, params=3.2e10, batch=1024))
# 15. PS where one PS is best, zero-config, a slow ramp from 30%
jobs.append(job("h7-ps-one-warm-zero-0", "ps",
                [U(0.15, 0.25, 5), 0.0015, 0.0009, U(0.05, 0.08, 5)], 2, 3072, 1, 16,
                ps={"ps_cpu_per_worker": 0.25, "ps_mem_mb": 4096, "min_ps": 1, "max_ps": 4},
                warmup=(300, 0.3), zero=True, params=1.5e7))

names = [j["name"] for j in jobs]
assert len(set(names)) == len(names) == 15
for j in jobs:
    assert len(j["name"]) <= 40
    w, p, s = j.pop("_oracle")
    print("%-28s oracle w=%2d p=%d speed=%.1f  user=%s" % (j["name"], w, p, s, j["user"]))

with open("/work/plan/h7/holdout7.trace", "w") as f:
    f.write("# A seventh held-out set (gen_h7.py, seed 7707319): 24 x 48-core 192 GiB nodes, mixed families;\n")
    f.write(json.dumps({"cluster": {"nodes": NODES, "node_cpu": NODE_CPU, "node_mem_gb": NODE_MEM_GB}},
                       separators=(",", ":")) + "\n")
    for j in jobs:
        f.write(json.dumps(j, separators=(",", ":")) + "\n")
