#!/usr/bin/env python3
"""Held-out set h11: 16 jobs on 36 nodes x 24 cores x 96 GiB (fixed seed).

Written from the trace format, the truth and the oracle (tests/sim/README.md)
before any planning change it could check: small asks far below the
optimum, noise up to 30%, ramps up to 500 s, stragglers, memory that rises,
models from 7e6 to 2e9 parameters, on nodes smaller than the default's.
"""
import json, math, os, random
rng = random.Random(1111)
NODES, NODE_CPU, NODE_GB = 36, 24, 96
GBPC = NODE_GB / NODE_CPU


def speed(j, w, p):
    t = j["t"]
    if j["strategy"] == "allreduce":
        return 1.0 / (t[0] / w + t[1] + t[2] * w)
    return w / (t[0] + t[1] * w / p + t[2] * w + t[3] * p)


def ps_need(j, w, p):
    cpu = math.ceil(j["ps_cpu_per_worker"] * w / p * 10 - 1e-9) / 10
    return cpu, (math.ceil(j["ps_mem_mb"] / p) + 512) / 1024


def fits(j, w, p):
    if j["worker_cpu"] > NODE_CPU or j["worker_mem_mb"] / 1024 > NODE_GB:
        return False
    if not p:
        return True
    cpu, gb = ps_need(j, w, p)
    return cpu <= NODE_CPU and gb <= NODE_GB


def res(j, w, p):
    c = w * math.ceil(j["worker_cpu"] * 10 - 1e-9) / 10 + w * j["worker_mem_mb"] / 1024 / GBPC
    if p:
        cpu, gb = ps_need(j, w, p)
        c += p * (cpu + gb / GBPC)
    return c


def oracle(j):
    ps = range(j["min_ps"], j["max_ps"] + 1) if j["strategy"] == "ps" else [0]
    cf = [(w, p) for w in range(j["min_workers"], j["max_workers"] + 1) for p in ps if fits(j, w, p)]
    best = max(speed(j, w, p) for w, p in cf)
    r, s, w, p = min((res(j, w, p), -speed(j, w, p), w, p) for w, p in cf
                     if speed(j, w, p) >= 0.9 * best)
    return w, p, -s


arr = [0.0]


def job(name, strategy, t, wcpu, wmem, min_w=1, max_w=16, ps=None, noise=0.03, warm=None,
        wstart=0.5, user_w=None, over=None, cpu_f=None, ps_cpu_f=None, zero=False, rise=0,
        rise_s=1200, strag=0, slow=2.0, params=5e7, batch=64):
    j = {"name": name, "strategy": strategy, "t": t, "worker_cpu": wcpu, "worker_mem_mb": wmem,
         "noise": round(noise, 3), "warmup_s": warm if warm is not None else rng.choice([20, 30, 45]),
         "warmup_start": wstart, "min_workers": min_w, "max_workers": max_w,
         "parameters": int(params), "batch": batch}
    if rise:
        j["mem_rise"], j["mem_rise_s"] = rise, rise_s
    if strag:
        j["stragglers"], j["straggler_slowdown"] = strag, slow
    if strategy == "ps":
        j.update(ps)
    w, p, s = oracle(j)
    uw = user_w or max(min_w, min(max_w, round(w * (over or rng.uniform(2.0, 3.5)))))
    user = {"workers": uw,
            "cpu": min(NODE_CPU, max(0.5, round(wcpu * (cpu_f or rng.uniform(1.5, 2.5)) * 2) / 2)),
            "memory_mb": int(min(NODE_GB * 1024, wmem * rng.uniform(1.6, 2.2)) // 256 * 256)}
    if strategy == "ps":
        up = min(j["max_ps"], max(j["min_ps"], round(p * rng.uniform(1.5, 2.5))))
        need = j["ps_cpu_per_worker"] * uw / up
        user.update({"ps": up,
                     "ps_cpu": min(NODE_CPU, max(1.0, round(need * (ps_cpu_f or rng.uniform(1.5, 2.5)) * 2) / 2)),
                     "ps_memory_mb": int((math.ceil(j["ps_mem_mb"] / up) + 512) * 2.0 // 256 * 256)})
    j["user"] = user
    if zero:
        j["zero_config"] = True
    j["arrival_s"] = arr[0]
    arr[0] += rng.choice([90, 180, 240])
    j["work"] = float(round(s * rng.uniform(3600, 2 * 3600)))
    return j


def ar_t(opt, t0=None, t1=None):
    t0 = t0 or rng.uniform(0.01, 0.08)
    return [round(t0, 6), round(t1 if t1 is not None else rng.uniform(0.0005, 0.003), 6),
            round(t0 / opt ** 2, 9)]


def ps_t(t0=None, t1=None, t2=None, t3=None):
    return [round(t0 or rng.uniform(0.04, 0.25), 5),
            round(t1 if t1 is not None else rng.uniform(0.004, 0.04), 5),
            round(t2 if t2 is not None else rng.uniform(0.0008, 0.004), 6),
            round(t3 if t3 is not None else rng.uniform(0.002, 0.012), 5)]


def psd(c, mem, lo=1, hi=6):
    return {"ps_cpu_per_worker": c, "ps_mem_mb": mem, "min_ps": lo, "max_ps": hi}


J = [
    # a one-worker ask far below the optimum
    job("h11-ar-small-ask-climb", "allreduce", ar_t(14, t0=0.2, t1=0.001), 3, 6144, max_w=24, user_w=1),
    # a mid optimum under 30% noise
    job("h11-ar-mid-noise30", "allreduce", ar_t(8), 4, 8192, max_w=20, noise=0.30),
    # PS, a shallow curve under 28% noise
    job("h11-ps-flat-noise28", "ps", ps_t(0.03, 0.004, 0.005, 0.003), 2, 4096, max_w=20,
        ps=psd(0.4, 4096, 1, 4), noise=0.28),
    # a 500 s ramp from 35% under 15% noise
    job("h11-ar-ramp500-noise", "allreduce", ar_t(10), 4, 6144, max_w=24, warm=500, wstart=0.35,
        noise=0.15),
    # two stragglers, 1.8x slower
    job("h11-ar-stragglers2", "allreduce", ar_t(10), 4, 8192, max_w=24, strag=2, slow=1.8),
    # zero-config PS job whose worker memory rises 45% over 1000 s
    job("h11-ps-zero-rise", "ps", ps_t(), 3, 12288, max_w=20, ps=psd(0.6, 8192, 1, 6), zero=True,
        rise=0.45, rise_s=1000, params=4e8),
    # 40 GiB workers of a 2e9-parameter model, optimum 4
    job("h11-ar-bigmem-2e9", "allreduce", ar_t(4, t0=0.05), 6, 40960, max_w=12, params=2e9),
    # PS: many PS pay, 20% noise
    job("h11-ps-many-ps-noise", "ps", ps_t(0.1, 0.08, 0.0006, 0.0006), 3, 6144, max_w=24,
        ps=psd(0.5, 16384, 1, 8), noise=0.20),
    # the optimum at the maximum bound under 25% noise
    job("h11-ar-max-bound-noise", "allreduce", ar_t(40, t0=0.3), 4, 6144, max_w=12, noise=0.25,
        over=1.0),
    # the optimum at the minimum bound of 2
    job("h11-ar-min-bound2", "allreduce", [0.004, 0.006, 0.0012], 4, 6144, min_w=2, max_w=16,
        noise=0.10),
    # PS: a 360 s ramp and a straggler
    job("h11-ps-ramp360-straggler", "ps", ps_t(), 4, 8192, max_w=24, ps=psd(0.6, 8192, 1, 6),
        warm=360, wstart=0.4, strag=1, slow=2.2),
    # zero-config all-reduce, 5e8 parameters, 20% noise
    job("h11-ar-zero-noise20", "allreduce", ar_t(6), 4, 10240, max_w=20, zero=True, params=5e8,
        noise=0.20),
    # PS workers asked at 0.6 of their CPU need, 12% noise
    job("h11-ps-worker-starved", "ps", ps_t(), 6, 8192, max_w=20, ps=psd(0.7, 8192, 1, 6),
        cpu_f=0.6, noise=0.12),
    # a two-worker ask below the optimum, worker memory rising 30%
    job("h11-ar-small-ask-rise", "allreduce", ar_t(9, t0=0.12), 4, 12288, max_w=20, user_w=2,
        rise=0.3, rise_s=900),
    # a 7e6-parameter PS model, few PS, 30% noise
    job("h11-ps-small-model-noise30", "ps", ps_t(0.06, 0.003, 0.004, 0.01), 2, 2048, max_w=16,
        ps=psd(0.3, 1024, 1, 4), noise=0.30, params=7e6),
    # 40 workers allowed, a mid optimum, 8% noise
    job("h11-ar-large40", "allreduce", ar_t(24, t0=0.5, t1=0.0008), 3, 6144, max_w=40, noise=0.08),
]
names = [j["name"] for j in J]
assert len(set(names)) == len(J) and all(len(n) <= 40 for n in names)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "holdout11.trace"), "w") as f:
    f.write("# h11: held-out set, 16 jobs on 36 x 24-core x 96 GiB nodes "
            "(gen_holdout11.py, seed 1111)\n")
    f.write(json.dumps({"cluster": {"nodes": NODES, "node_cpu": NODE_CPU, "node_mem_gb": NODE_GB}},
                       separators=(",", ":")) + "\n")
    for j in J:
        f.write(json.dumps(j, separators=(",", ":")) + "\n")
for j in J:
    print(j["name"], oracle(j)[:2], j["user"]["workers"], j["user"].get("ps"))
