#!/usr/bin/env python3
"""Held-out set h11: 16 jobs on 36 nodes x 24 cores x 96 GiB (fixed seed).

Written from the trace format, the truth and the oracle (tests/sim/README.md)
before any planning change it could check: small asks far below the
optimum, noise up to 30%, ramps up to 500 s, stragglers, memory that rises,
models from 7e6 to 2e9 parameters, on nodes smaller than the default's.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import holdgen  # noqa: E402

holdgen.setup(1111, 36, 24, 96)
from holdgen import ar_t, job, ps_t, psd  # noqa: E402

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
holdgen.write(os.path.join(HERE, "holdout11.trace"),
              "# h11: held-out set, 16 jobs on 36 x 24-core x 96 GiB nodes "
              "(gen_holdout11.py, seed 1111)\n",
              J)
