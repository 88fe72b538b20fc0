#!/usr/bin/env python3
"""Held-out set h10: 18 jobs on 24 nodes x 48 cores x 384 GiB (fixed seed)."""
import json, math, os, random, sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from holdgen import speed  # noqa: E402  (the truth tests/sim/model.c plays)
rng = random.Random(1010)
NODE_CPU, NODE_GB = 48, 384
GBPC = NODE_GB / NODE_CPU

def res(j, w, p):
    c = w * math.ceil(j["worker_cpu"] * 10 - 1e-9) / 10 + w * j["worker_mem_mb"] / 1024 / GBPC
    if p:
        c += p * math.ceil(j["ps_cpu_per_worker"] * w / p * 10 - 1e-9) / 10
        c += p * (math.ceil(j["ps_mem_mb"] / p) + 512) / 1024 / GBPC
    return c

def oracle(j):
    ps = range(j["min_ps"], j["max_ps"] + 1) if j["strategy"] == "ps" else [0]
    cf = [(w, p) for w in range(j["min_workers"], j["max_workers"] + 1) for p in ps]
    best = max(speed(j, w, p) for w, p in cf)
    r, s, w, p = min((res(j, w, p), -speed(j, w, p), w, p) for w, p in cf if speed(j, w, p) >= 0.9 * best)
    return w, p, -s

arr = [0.0]
def job(name, strategy, t, wcpu, wmem, min_w=1, max_w=16, ps=None, noise=0.03, warm=None,
        wstart=0.5, over=None, cpu_f=None, ps_cpu_f=None, zero=False, rise=0, rise_s=1200,
        strag=0, slow=2.0, params=2e7, batch=64, fixed_user=None):
    j = {"name": name, "strategy": strategy, "t": t, "worker_cpu": wcpu, "worker_mem_mb": wmem,
         "noise": round(noise, 3), "warmup_s": warm if warm is not None else rng.choice([20, 30, 60]),
         "warmup_start": wstart, "min_workers": min_w, "max_workers": max_w,
         "parameters": int(params), "batch": batch}
    if rise:
        j["mem_rise"], j["mem_rise_s"] = rise, rise_s
    if strag:
        j["stragglers"], j["straggler_slowdown"] = strag, slow
    if strategy == "ps":
        j.update(ps)
    w, p, s = oracle(j)
    over = over or rng.uniform(2.0, 4.0)
    uw = max(min_w, min(max_w, round(w * over)))
    if fixed_user:
        uw = fixed_user
    user = {"workers": uw, "cpu": max(0.5, round(wcpu * (cpu_f or rng.uniform(1.5, 2.5)) * 2) / 2),
            "memory_mb": int(wmem * rng.uniform(1.5, 2.5) // 256 * 256)}
    if strategy == "ps":
        up = min(j["max_ps"], max(j["min_ps"], round(p * rng.uniform(1.5, 2.5))))
        need = j["ps_cpu_per_worker"] * uw / up
        user.update({"ps": up, "ps_cpu": max(1.0, round(need * (ps_cpu_f or rng.uniform(1.5, 2.5)) * 2) / 2),
                     "ps_memory_mb": int((math.ceil(j["ps_mem_mb"] / up) + 512) * 2.0 // 256 * 256)})
    j["user"] = user
    if zero:
        j["zero_config"] = True
    j["arrival_s"] = arr[0]
    arr[0] += rng.choice([60, 120, 240, 300])
    j["work"] = float(round(s * rng.uniform(3600, 3 * 3600)))
    return j

def ar_t(opt, t0=None, t1=None):
    t0 = t0 or rng.uniform(0.008, 0.06)
    return [round(t0, 6), round(t1 if t1 is not None else rng.uniform(0.0003, 0.002), 6), round(t0 / opt ** 2, 9)]

def ps_t(t0=None, t1=None, t2=None, t3=None):
    return [round(t0 or rng.uniform(0.03, 0.2), 5), round(t1 if t1 is not None else rng.uniform(0.005, 0.03), 5),
            round(t2 if t2 is not None else rng.uniform(0.0005, 0.003), 6),
            round(t3 if t3 is not None else rng.uniform(0.001, 0.01), 5)]

def psd(c, mem, lo=1, hi=6):
    return {"ps_cpu_per_worker": c, "ps_mem_mb": mem, "min_ps": lo, "max_ps": hi}

J = [
 # optimum at the minimum bound (comm dominates) + 27% noise
 job("h10-ar-min-bound-noisy", "allreduce", [0.006, 0.004, 0.0009], 4, 6144, min_w=4, max_w=20, noise=0.27),
 # optimum at the maximum bound, near-linear, large job (48 workers)
 job("h10-ar-max-bound-large48", "allreduce", ar_t(200, t0=0.4, t1=0.0004), 6, 8192, min_w=8, max_w=48, over=1.0),
 # PS: heavy w/p communication -> many PS pay
 job("h10-ps-many-ps-pay", "ps", ps_t(0.08, 0.06, 0.0008, 0.0008), 4, 8192, max_w=24, ps=psd(0.6, 16384, 1, 8)),
 # PS: large per-PS overhead -> few PS pay; CPU-starved PS request
 job("h10-ps-few-ps-starved", "ps", ps_t(0.12, 0.004, 0.0015, 0.03), 4, 6144, max_w=20, ps=psd(1.0, 8192, 1, 6), ps_cpu_f=0.5),
 # long ramp (420 s from 25%) + straggler
 job("h10-ar-long-ramp-straggler", "allreduce", ar_t(10), 8, 12288, max_w=24, warm=420, wstart=0.25, strag=1, slow=2.5),
 # PS long ramp (300 s) + 25% noise
 job("h10-ps-ramp-noise", "ps", ps_t(), 2, 4096, max_w=32, ps=psd(0.5, 8192, 1, 8), warm=300, wstart=0.3, noise=0.25),
 # late OOM, all-reduce, 28 GiB peak rising 40% over 1500 s
 job("h10-ar-late-oom", "allreduce", ar_t(8), 6, 28672, max_w=16, rise=0.4, rise_s=1500),
 # zero-config PS with late memory rise on the PS (big model)
 job("h10-ps-zero-late-oom", "ps", ps_t(), 4, 8192, max_w=24, ps=psd(0.8, 49152, 1, 8), zero=True, rise=0.35, rise_s=1800, params=8e9),
 # stragglers x3 on PS
 job("h10-ps-stragglers3", "ps", ps_t(), 4, 4096, max_w=32, ps=psd(0.4, 4096, 1, 4), strag=3, slow=3.0),
 # CPU-starved workers (user gives 0.5x the worker CPU)
 job("h10-ar-worker-cpu-starved", "allreduce", ar_t(12), 8, 8192, max_w=32, cpu_f=0.5),
 # CPU-starved workers on PS + zero-config? no: starved PS worker side, 29% noise
 job("h10-ps-worker-starved-noisy", "ps", ps_t(), 6, 8192, max_w=24, ps=psd(0.7, 16384, 1, 6), cpu_f=0.6, noise=0.29),
 # zero-config all-reduce, mid optimum
 job("h10-ar-zero-config", "allreduce", ar_t(6), 4, 10240, max_w=24, zero=True, params=3e8),
 # nearly flat past 2 workers
 job("h10-ar-flat-past-two", "allreduce", [0.005, 0.012, 0.0003], 4, 6144, max_w=16),
 # flat PS curve past 3 workers, zero-config
 job("h10-ps-flat-zero", "ps", ps_t(0.02, 0.003, 0.006, 0.002), 2, 4096, max_w=16, ps=psd(0.5, 4096, 1, 3), zero=True),
 # tiny: 1-3 workers, optimum at max 3
 job("h10-ar-tiny-max3", "allreduce", ar_t(30, t0=0.09), 8, 16384, max_w=3, over=1.0),
 # tiny PS: 1-2 workers, 1-2 PS, 26% noise
 job("h10-ps-tiny-noisy", "ps", ps_t(0.15, 0.01, 0.002, 0.004), 4, 8192, max_w=2, ps=psd(0.9, 8192, 1, 2), noise=0.26),
 # large PS: up to 64 workers, near-linear, many PS, max bound
 job("h10-ps-large64-maxbound", "ps", ps_t(1.2, 0.02, 0.00005, 0.0004), 2, 4096, min_w=8, max_w=64, ps=psd(0.3, 8192, 2, 12), over=1.0),
 # large all-reduce, 40 allowed, optimum mid (~20), late OOM + 12% noise
 job("h10-ar-large40-rise", "allreduce", ar_t(20, t0=0.15), 4, 16384, max_w=40, rise=0.3, rise_s=900, noise=0.12),
]
names = [j["name"] for j in J]
assert len(set(names)) == 18 and all(len(n) <= 40 for n in names)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "holdout10.trace"), "w") as f:
    f.write("# h10: held-out set, 18 jobs on 24 x 48-core x 384 GiB nodes (gen_holdout10.py, seed 1010)\n")
    f.write('{"cluster":{"nodes":24,"node_cpu":48,"node_mem_gb":384}}\n')
    for j in J:
        f.write(json.dumps(j, separators=(",", ":")) + "\n")
for j in J:
    print(j["name"], oracle(j)[:2], j["user"]["workers"], j["user"].get("ps"))
