#!/usr/bin/env python3
"""Held-out set h12: 16 jobs on 20 nodes x 96 cores x 1 TiB (fixed seed).

Written apart from h11 with the same brief, before any planning change it
could check: large nodes where memory is cheap beside cores, noise up to
30%, ramps up to 600 s, stragglers, late memory rises, small asks, fixed
PS counts, models from 3e6 to 4e9 parameters.
"""
import json, math, os, random
rng = random.Random(1212)
NODES, NODE_CPU, NODE_GB = 20, 96, 1024
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
    # a low optimum under 30% noise, 24 allowed
    job("h12-ar-noise30-low", "allreduce", ar_t(5), 4, 8192, max_w=24, noise=0.30),
    # a 600 s ramp from 30%
    job("h12-ar-ramp600", "allreduce", ar_t(12, t0=0.15), 6, 8192, max_w=32, warm=600, wstart=0.3),
    # PS with two stragglers 2.5x slower, 10% noise
    job("h12-ps-stragglers2", "ps", ps_t(), 4, 6144, max_w=24, ps=psd(0.5, 8192, 1, 6), strag=2,
        slow=2.5, noise=0.10),
    # zero-config PS, 4e9 parameters, PS memory rising 30%
    job("h12-ps-zero-4e9-rise", "ps", ps_t(0.15, 0.03), 6, 16384, max_w=24,
        ps=psd(0.8, 65536, 1, 8), zero=True, rise=0.3, rise_s=1500, params=4e9),
    # 64 GiB workers whose memory rises 25% late
    job("h12-ar-64g-late-rise", "allreduce", ar_t(6, t0=0.06), 8, 65536, max_w=16, rise=0.25,
        rise_s=2000, params=3e9),
    # a one-worker ask far below the optimum, 15% noise
    job("h12-ar-small-ask-noise", "allreduce", ar_t(16, t0=0.3, t1=0.0008), 4, 6144, max_w=20,
        user_w=1, noise=0.15),
    # PS: many PS pay, up to 10, 30 workers allowed
    job("h12-ps-ten-ps", "ps", ps_t(0.12, 0.1, 0.0004, 0.0005), 4, 8192, max_w=30,
        ps=psd(0.6, 32768, 1, 10)),
    # flat past three workers under 25% noise
    job("h12-ar-flat-noise25", "allreduce", [0.006, 0.01, 0.0002], 4, 6144, max_w=16, noise=0.25),
    # a fixed count of 2 PS under 22% noise
    job("h12-ps-fixed2-noise", "ps", ps_t(), 4, 8192, max_w=20, ps=psd(0.5, 8192, 2, 2),
        noise=0.22),
    # 4 to 8 workers, the optimum at the maximum, 20% noise
    job("h12-ar-4to8-max-noise", "allreduce", ar_t(30, t0=0.2), 6, 8192, min_w=4, max_w=8,
        noise=0.20, over=1.0),
    # 16-core workers asked at 0.7 of their need
    job("h12-ar-heavy-cpu-starved", "allreduce", ar_t(6), 16, 16384, max_w=16, cpu_f=0.7),
    # PS: a 300 s ramp from 40% under 27% noise, 40 workers allowed
    job("h12-ps-ramp-noise27", "ps", ps_t(0.4, 0.02, 0.0004, 0.003), 3, 6144, max_w=40,
        ps=psd(0.4, 8192, 1, 8), warm=300, wstart=0.4, noise=0.27),
    # three stragglers 1.6x slower
    job("h12-ar-stragglers3", "allreduce", ar_t(12), 4, 8192, max_w=24, strag=3, slow=1.6,
        noise=0.05),
    # tiny PS job: 1-3 workers, 1-2 PS
    job("h12-ps-tiny", "ps", ps_t(0.1, 0.01, 0.002, 0.003), 4, 8192, max_w=3,
        ps=psd(0.8, 8192, 1, 2)),
    # zero-config, 3e6 parameters, 18% noise
    job("h12-ar-zero-small-noise", "allreduce", ar_t(3), 2, 2048, max_w=12, zero=True, params=3e6,
        noise=0.18),
    # PS: a two-worker ask where many pay, 10% noise
    job("h12-ps-small-ask", "ps", ps_t(0.3, 0.01, 0.0008, 0.004), 4, 6144, max_w=24,
        ps=psd(0.5, 8192, 1, 6), user_w=2, noise=0.10),
]
names = [j["name"] for j in J]
assert len(set(names)) == len(J) and all(len(n) <= 40 for n in names)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "holdout12.trace"), "w") as f:
    f.write("# h12: held-out set, 16 jobs on 20 x 96-core x 1 TiB nodes "
            "(gen_holdout12.py, seed 1212)\n")
    f.write(json.dumps({"cluster": {"nodes": NODES, "node_cpu": NODE_CPU, "node_mem_gb": NODE_GB}},
                       separators=(",", ":")) + "\n")
    for j in J:
        f.write(json.dumps(j, separators=(",", ":")) + "\n")
for j in J:
    print(j["name"], oracle(j)[:2], j["user"]["workers"], j["user"].get("ps"))
