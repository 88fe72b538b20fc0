#!/usr/bin/python3
"""Write holdout9.trace: a ninth held-out set for rover-sim (fixed seed).

Written from the trace format (tests/sim/README.md), the truth and the oracle
(tests/sim/model.c) and the way the shipped sets were made (gen_traces.py),
without looking at the planning algorithms.  The oracle below mirrors
model.c (cost = cores + GiB / GiB-per-core of the node, every node must fit
one cluster node) and is used only to size each user's request the way real
users over-ask (2-4x the workers, 1.5-2.5x the CPU, about 2x the memory), the
job's work, and to confirm each family's truth is what its comment says.

Cluster: 20 nodes of 64 cores and 320 GiB (5 GiB per core).
"""
import json, math, os, random, sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from holdgen import speed  # noqa: E402  (the truth tests/sim/model.c plays)

rng = random.Random(88017)
NODE_CPU, NODE_MEM_GB, NODES = 64, 320, 20
GB_PER_CORE = NODE_MEM_GB / NODE_CPU
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "holdout9.trace")
arrival = [0.0]


def tenths_up(x):
    return math.ceil(x * 10 - 1e-9) / 10


def oracle(j):
    """(workers, ps, speed) as model.c's oracle_compute picks them."""
    ps = range(j["min_ps"], j["max_ps"] + 1) if j["strategy"] == "ps" else [0]
    wcpu, wmem = tenths_up(j["worker_cpu"]), j["worker_mem_mb"]

    def node(w, p):
        if not p:
            return wcpu, wmem, 0, 0
        return wcpu, wmem, tenths_up(j["ps_cpu_per_worker"] * w / p), \
            -(-j["ps_mem_mb"] // p) + 512

    def fits(w, p):
        a, b, c, d = node(w, p)
        return a <= NODE_CPU and b <= NODE_MEM_GB * 1024 and c <= NODE_CPU and \
            d <= NODE_MEM_GB * 1024

    def cost(w, p):
        a, b, c, d = node(w, p)
        return w * a + p * c + (w * b + p * d) / 1024 / GB_PER_CORE

    cfgs = [(w, p) for w in range(j["min_workers"], j["max_workers"] + 1) for p in ps
            if fits(w, p)]
    best = max(speed(j, w, p) for w, p in cfgs)
    ok = [(cost(w, p), -speed(j, w, p), w, p) for w, p in cfgs if speed(j, w, p) >= 0.9 * best]
    c, s, w, p = min(ok)
    return w, p, -s


def job(name, strategy, t, wcpu, wmem, min_w=1, max_w=16, noise=None, ps=None, params=5e7,
        batch=64, over=None, cpu_over=None, mem_over=None, zero=False):
    j = {"name": name, "strategy": strategy, "t": t, "worker_cpu": wcpu, "worker_mem_mb": wmem,
         "noise": noise if noise is not None else round(rng.uniform(0.02, 0.05), 3),
         "warmup_s": rng.choice([20, 30, 45, 60]), "min_workers": min_w, "max_workers": max_w,
         "parameters": int(params), "batch": batch}
    if strategy == "ps":
        j.update(ps)
    w, p, s = oracle(j)
    over = over or rng.uniform(2.0, 4.0)
    uw = max(min_w, min(max_w, round(w * over)))
    cpu_over = cpu_over or rng.uniform(1.5, 2.5)
    mem_over = mem_over or rng.uniform(1.6, 2.4)
    user = {"workers": uw, "cpu": round(wcpu * cpu_over * 2) / 2,
            "memory_mb": int(wmem * mem_over // 256 * 256)}
    if strategy == "ps":
        up = min(j["max_ps"], max(j["min_ps"], round(p * rng.uniform(1.5, 2.5))))
        need = j["ps_cpu_per_worker"] * uw / up
        psneed = math.ceil(j["ps_mem_mb"] / up) + 512
        user.update({"ps": up,
                     "ps_cpu": min(NODE_CPU, max(2.0, round(need * cpu_over * 2) / 2)),
                     "ps_memory_mb": int(psneed * mem_over // 256 * 256)})
    j["user"] = user
    if zero:
        j["zero_config"] = True
    j["arrival_s"] = arrival[0]
    arrival[0] += rng.choice([60, 120, 180, 300, 600])
    j["work"] = float(round(s * rng.uniform(3600, 4 * 3600)))
    return j


def ps_spec(c, mem, min_ps=1, max_ps=8):
    return {"ps_cpu_per_worker": c, "ps_mem_mb": mem, "min_ps": min_ps, "max_ps": max_ps}


def r(lo, hi, nd=6):
    return round(rng.uniform(lo, hi), nd)


J = []

# 1. Optimum at the minimum worker bound (min 4): gradient exchange grows
#    faster with workers than compute falls; one straggler, slowdown 3.
j = job("h9-min-ar-straggler", "allreduce", [0.012, 0.0015, r(0.0012, 0.002)], 6, 10240,
        min_w=4, max_w=24)
j.update(stragglers=1, straggler_slowdown=3.0)
J.append(j)

# 2. Optimum at the minimum worker bound (min 3) for a PS job, under 22% noise:
#    per-worker PS contention (t2 w) saturates the speed by 3 workers.
J.append(job("h9-min-ps-noise", "ps", [0.001, 0.001, r(0.005, 0.008), 0.0002], 4, 8192,
             min_w=3, max_w=20, noise=0.22, ps=ps_spec(0.6, 12288, 1, 6)))

# 3. Optimum at the maximum bound (min 4, max 40): near-linear all-reduce,
#    a 480 s ramp from 30% after every change.
j = job("h9-max-ar-warm", "allreduce", [r(0.8, 1.2, 5), 0.0002, 0.0000005], 8, 16384,
        min_w=4, max_w=40, over=0.4)
j.update(warmup_s=480, warmup_start=0.3)
J.append(j)

# 4. Optimum at the maximum bound (min 2, max 30) for a PS job whose memory
#    rises late (30% over 1500 s); the user sized memory for the start.
j = job("h9-max-ps-late-oom", "ps", [0.9, 0.003, 0.00002, 0.0008], 4, 12288, min_w=2,
        max_w=30, over=0.5, ps=ps_spec(0.35, 16384, 1, 6))
j.update(mem_rise=0.3, mem_rise_s=1500)
j["user"]["memory_mb"] = int(12288 * 0.7 * 1.15 // 256 * 256)
J.append(j)

# 5. Many PS pay: transfer (t1 w/p) dominates, up to 14 PS, 25% noise.
J.append(job("h9-ps-many-noise", "ps", [r(0.05, 0.08, 5), r(0.12, 0.18, 5), 0.0004, 0.00012],
             2, 6144, max_w=24, noise=0.25, ps=ps_spec(r(0.3, 0.5, 2), 8192, 1, 14)))

# 6. Few PS pay (per-PS overhead t3), and the user's PS are short of CPU.
j = job("h9-ps-few-starved", "ps", [r(0.08, 0.12, 5), 0.002, 0.0006, r(0.035, 0.05, 5)], 4,
        8192, max_w=20, ps=ps_spec(0.8, 8192, 1, 8))
need = j["ps_cpu_per_worker"] * j["user"]["workers"] / j["user"]["ps"]
j["user"]["ps_cpu"] = max(1.0, round(need * 0.45, 1))
J.append(j)

# 7. Zero-config PS job with a large model (6e9 parameters, 120 GiB of PS
#    state), many PS pay.
J.append(job("h9-zero-ps-huge", "ps", [0.12, r(0.08, 0.12, 5), 0.0006, 0.0003], 8, 24576,
             max_w=24, ps=ps_spec(0.7, 122880, 1, 16), params=6e9, batch=256, zero=True))

# 8. Zero-config all-reduce job whose memory rises late (45% over 900 s).
j = job("h9-zero-ar-late-oom", "allreduce", [r(0.02, 0.04), 0.0008, r(0.0001, 0.0003, 7)], 4,
        20480, max_w=24, params=3e8, zero=True)
j.update(mem_rise=0.45, mem_rise_s=900)
J.append(j)

# 9. A 650 s ramp from 25% on a PS job with two stragglers (slowdown 2).
j = job("h9-warm-ps-stragglers", "ps", [r(0.1, 0.16, 5), r(0.01, 0.02, 5), 0.001, 0.004], 4,
        8192, max_w=24, ps=ps_spec(0.5, 16384, 1, 8))
j.update(warmup_s=650, warmup_start=0.25, stragglers=2, straggler_slowdown=2.0)
J.append(j)

# 10. 28% noise, and a user who over-asks CPU 3.5x and memory 3x.
J.append(job("h9-noise-ar-overask", "allreduce", [r(0.02, 0.05), 0.001, r(0.0002, 0.0004, 7)], 4,
             8192, max_w=24, noise=0.28, cpu_over=3.5, mem_over=3.0))

# 11. Workers short of CPU (the user asks 45% of the need), a 300 s ramp from 50%.
j = job("h9-starved-ar-warm", "allreduce", [r(0.03, 0.06), 0.0006, r(0.0001, 0.0002, 7)], 10,
        12288, max_w=24)
j["user"]["cpu"] = 4.5
j.update(warmup_s=300, warmup_start=0.5)
J.append(j)

# 12. A fixed worker count (min = max = 10) whose memory rises late (35% over
#     600 s), under 20% noise.
j = job("h9-fixed-ar-late-oom", "allreduce", [r(0.03, 0.05), 0.001, 0.0002], 6, 16384,
        min_w=10, max_w=10, noise=0.2)
j.update(mem_rise=0.35, mem_rise_s=600)
j["user"]["memory_mb"] = int(16384 * 0.65 * 1.2 // 256 * 256)
J.append(j)

# 13. A single allowed PS count (3), the user over-asks CPU 4x and memory 3x.
J.append(job("h9-one-ps-overask", "ps", [r(0.06, 0.1, 5), r(0.02, 0.04, 5), 0.0006, 0.003], 2,
             6144, max_w=16, ps=ps_spec(0.5, 24576, 3, 3), cpu_over=4.0, mem_over=3.0))

# 14. A small all-reduce job (at most 3 workers) under 20% noise.
J.append(job("h9-small-ar-noise", "allreduce", [r(0.01, 0.02), 0.0015, 0.0004], 4, 6144,
             max_w=3, noise=0.2))

# 15. A small PS job (at most 4 workers, 2 PS) with one straggler (slowdown 1.5).
j = job("h9-small-ps-straggler", "ps", [r(0.05, 0.08, 5), 0.01, 0.002, 0.004], 2, 4096,
        max_w=4, ps=ps_spec(0.6, 4096, 1, 2))
j.update(stragglers=1, straggler_slowdown=1.5)
J.append(j)

# 16. Near-linear all-reduce scaling to 48 workers, under 20% noise.
J.append(job("h9-linear-ar-noise", "allreduce", [r(0.6, 0.9, 5), 0.0001, 0.0000004], 4, 8192,
             max_w=48, noise=0.2, over=0.4))

# 17. Near-linear PS job to 44 workers, a 360 s ramp from 40%.
j = job("h9-linear-ps-warm", "ps", [r(1.0, 1.4, 5), 0.002, 0.00001, 0.0004], 2, 6144,
        max_w=44, over=0.4, ps=ps_spec(0.25, 8192, 1, 8))
j.update(warmup_s=360, warmup_start=0.4)
J.append(j)

# 18. Zero-config PS job with three stragglers (slowdown 4) whose memory
#     rises late (50% over 1800 s) on both roles.
j = job("h9-zero-ps-straggler-oom", "ps", [r(0.1, 0.2, 5), r(0.01, 0.03, 5), 0.0008, 0.005], 4,
        10240, max_w=24, ps=ps_spec(0.4, 20480, 1, 6), zero=True)
j.update(stragglers=3, straggler_slowdown=4.0, mem_rise=0.5, mem_rise_s=1800)
J.append(j)

names = [j["name"] for j in J]
assert len(J) == 18 and len(set(names)) == 18
assert all(len(n) <= 40 and n.startswith("h9-") for n in names)
with open(OUT, "w") as f:
    f.write("# A ninth held-out set (gen_holdout9.py, seed 88017): 18 mixed\n"
            "# families on 20 nodes of 64 cores and 320 GiB; written before any change it checks.\n")
    f.write(json.dumps({"cluster": {"nodes": NODES, "node_cpu": NODE_CPU,
                                    "node_mem_gb": NODE_MEM_GB}}) + "\n")
    for j in J:
        f.write(json.dumps(j, separators=(",", ":")) + "\n")
for j in J:
    w, p, s = oracle(j)
    print("%-26s oracle w=%d/%d..%d p=%d speed=%.1f user w=%d%s" % (
        j["name"], w, j["min_workers"], j["max_workers"], p, s, j["user"]["workers"],
        " ps=%d" % j["user"]["ps"] if "ps" in j["user"] else ""))
