#!/usr/bin/env python3
"""Held-out set h13: 16 jobs on 14 nodes x 128 cores x 256 GiB (fixed seed).

Written from the trace format, the truth and the oracle before any planning
change it could check: few wide nodes where memory is dear (2 GiB a core,
so a GiB costs half a core), a model-size mix of mostly tiny models (1e6 to
5e7 parameters) beside two very large ones (6e9 and 1e10), noise up to 30%,
ramps up to 700 s, stragglers, memory that rises early and late.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import holdgen  # noqa: E402

holdgen.setup(1313, 14, 128, 256)
from holdgen import ar_t, job, ps_t, psd  # noqa: E402

J = [
    # a tiny model, steady usage, optimum 6, 2 GiB workers
    job("h13-ar-tiny-steady", "allreduce", ar_t(6), 2, 2048, max_w=24, params=1e6, noise=0.02),
    # a one-worker ask where about 12 pay, 10% noise
    job("h13-ar-one-ask-climb", "allreduce", ar_t(12, t0=0.25, t1=0.0008), 4, 4096, max_w=32,
        user_w=1, noise=0.10),
    # 30% noise, optimum 7 of 24
    job("h13-ar-noise30-mid", "allreduce", ar_t(7), 3, 4096, max_w=24, noise=0.30, params=2e7),
    # PS: a 700 s ramp from 30% under 12% noise
    job("h13-ps-ramp700", "ps", ps_t(), 4, 6144, max_w=32, ps=psd(0.5, 8192, 1, 8), warm=700,
        wstart=0.3, noise=0.12),
    # a 1e10-parameter model: 96 GiB workers, optimum 3, memory rising 20% late
    job("h13-ar-1e10-rise", "allreduce", ar_t(3, t0=0.04), 16, 98304, max_w=8, rise=0.2,
        rise_s=1800, params=1e10),
    # zero-config PS job of 6e9 parameters, PS memory dominates
    job("h13-ps-zero-6e9", "ps", ps_t(0.2, 0.05), 8, 24576, max_w=16, ps=psd(1.0, 131072, 1, 8),
        zero=True, params=6e9),
    # four stragglers 1.5x slower, 48 workers allowed
    job("h13-ar-stragglers4", "allreduce", ar_t(20, t0=0.4, t1=0.0006), 3, 4096, max_w=48,
        strag=4, slow=1.5, noise=0.06),
    # PS under 28% noise, two-worker ask where many pay
    job("h13-ps-small-ask-noise28", "ps", ps_t(0.25, 0.01, 0.0008, 0.004), 3, 4096, max_w=24,
        ps=psd(0.4, 4096, 1, 6), user_w=2, noise=0.28),
    # flat past two workers, 5e6 parameters, 20% noise
    job("h13-ar-flat2-noise20", "allreduce", [0.004, 0.012, 0.0004], 2, 2048, max_w=16,
        params=5e6, noise=0.20),
    # PS: one PS best (large per-PS overhead), 8 allowed
    job("h13-ps-one-ps-best", "ps", ps_t(0.1, 0.002, 0.001, 0.03), 4, 6144, max_w=20,
        ps=psd(0.3, 4096, 1, 8), noise=0.05),
    # memory rising 60% early (an embedding table), 15% noise
    job("h13-ar-rise60-early", "allreduce", ar_t(8), 4, 8192, max_w=20, rise=0.6, rise_s=400,
        noise=0.15),
    # the optimum at the maximum bound of 10, 25% noise
    job("h13-ar-max10-noise25", "allreduce", ar_t(40, t0=0.35), 4, 4096, max_w=10, noise=0.25,
        over=1.0),
    # zero-config all-reduce, 1e6 parameters, 26% noise
    job("h13-ar-zero-tiny-noise", "allreduce", ar_t(4), 1, 1024, max_w=16, zero=True, params=1e6,
        noise=0.26),
    # PS workers asked at 0.5 of their CPU, a 400 s ramp, a straggler
    job("h13-ps-starved-ramp-strag", "ps", ps_t(), 8, 8192, max_w=24, ps=psd(0.6, 8192, 1, 6),
        cpu_f=0.5, warm=400, wstart=0.4, strag=1, slow=2.0, noise=0.08),
    # minimum 3 workers, optimum at it, steady
    job("h13-ar-min3", "allreduce", [0.003, 0.008, 0.0015], 4, 6144, min_w=3, max_w=16,
        noise=0.04, params=5e7),
    # PS: fixed 4 PS, 22% noise, 5e7 parameters
    job("h13-ps-fixed4-noise22", "ps", ps_t(), 3, 4096, max_w=24, ps=psd(0.5, 16384, 4, 4),
        noise=0.22, params=5e7),
]
holdgen.write(os.path.join(HERE, "holdout13.trace"),
              "# h13: held-out set, 16 jobs on 14 x 128-core x 256 GiB nodes "
              "(gen_holdout13.py, seed 1313)\n",
              J)
