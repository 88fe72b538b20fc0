#!/usr/bin/env python3
"""Held-out set h12: 16 jobs on 20 nodes x 96 cores x 1 TiB (fixed seed).

Written apart from h11 with the same brief, before any planning change it
could check: large nodes where memory is cheap beside cores, noise up to
30%, ramps up to 600 s, stragglers, late memory rises, small asks, fixed
PS counts, models from 3e6 to 4e9 parameters.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import holdgen  # noqa: E402

holdgen.setup(1212, 20, 96, 1024)
from holdgen import ar_t, job, ps_t, psd  # noqa: E402

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
holdgen.write(os.path.join(HERE, "holdout12.trace"),
              "# h12: held-out set, 16 jobs on 20 x 96-core x 1 TiB nodes "
              "(gen_holdout12.py, seed 1212)\n",
              J)
