"""What the held-out set generators h11 and h12 share: the truth (speed,
resources), the oracle over configurations that fit on one node, and the
job, curve and PS-need builders, drawing from one seeded generator.
setup() first.  speed() alone, the truth tests/sim/model.c plays, serves
every generator (gen_traces.py too)."""
import json
import math
import random

rng = None
NODES = NODE_CPU = NODE_GB = GBPC = None


def setup(seed, nodes, node_cpu, node_gb):
    """The generator's seed and the cluster: nodes of node_cpu cores and
    node_gb GiB."""
    global rng, NODES, NODE_CPU, NODE_GB, GBPC
    rng = random.Random(seed)
    NODES, NODE_CPU, NODE_GB = nodes, node_cpu, node_gb
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


def write(path, header, jobs):
    """The trace at path: the header comment, the cluster, one job a line;
    then each job's oracle and user ask on stdout."""
    names = [j["name"] for j in jobs]
    assert len(set(names)) == len(jobs) and all(len(n) <= 40 for n in names)
    with open(path, "w") as f:
        f.write(header)
        f.write(json.dumps({"cluster": {"nodes": NODES, "node_cpu": NODE_CPU, "node_mem_gb": NODE_GB}},
                           separators=(",", ":")) + "\n")
        for j in jobs:
            f.write(json.dumps(j, separators=(",", ":")) + "\n")
    for j in jobs:
        print(j["name"], oracle(j)[:2], j["user"]["workers"], j["user"].get("ps"))
