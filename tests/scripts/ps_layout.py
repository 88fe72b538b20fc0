#!/usr/bin/python3
"""Every re-partition of examples/ps_rover.py from 1..5 PS to 1..5 PS, for
tables whose row count is and is not a multiple of the PS counts: each new
PS's partition, built from the frozen flash checkpoints of the old ones,
holds exactly its rows (global ids) with their values.  Prints one
"ok"/"not ok" line; exits 1 on a failure."""
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
import ps_rover  # noqa: E402


def ps(job, lay, rank):
    os.environ["ROVER_NODE_RANK"] = str(rank)
    p = ps_rover.PS(types.SimpleNamespace(job=job, dump_dir="", port_base=0, poll_s=0.2), lay)
    p.job = job
    return p


def main():
    bad = []
    for rows in (97, 1000, 1003):
        lay = ps_rover.Layout(rows, 4, 2, 2)
        for old in range(1, 6):
            for new in range(1, 6):
                job = f"ps-layout-{os.getpid()}-{rows}-{old}-{new}"
                try:
                    for r in range(old):
                        p = ps(job, lay, r)
                        p.fresh(old)
                        p.counts = lay.global_ids(r, old).clone()  # each row's own id
                        p.target, p.state = new, "frozen"
                        p.save()
                    for q in range(new):
                        p = ps(job, lay, q)
                        want = lay.global_ids(q, new)
                        if not p.build(1, new, 0, old) or not torch.equal(p.counts, want) or \
                                not torch.equal(p.values, lay.init_rows(want)):
                            bad.append(f"rows {rows}: {old} -> {new} PS, PS {q}")
                finally:
                    for f in os.listdir("/dev/shm"):
                        if f.startswith(f"rover-{job}."):
                            os.unlink(os.path.join("/dev/shm", f))
    if bad:
        print(f"not ok - every re-partition gives each PS its rows: {bad[:5]}", flush=True)
        return 1
    print("ok - every re-partition (1..5 PS to 1..5 PS) gives each PS exactly its rows",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
