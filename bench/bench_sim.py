"""Simulator speed: replay the 82,247 real Philly jobs on the reconstructed cluster.

For each policy: the replay (1x), the same workload repeated 4 times back to
back (4x jobs and time at the same load: cost should grow linearly), and the
replay with arrivals compressed 8x (8x the load: the cluster saturates, queues
of thousands form and preemptive policies preempt; a stress test). Also Philly
with migration, and with failures and pre-runs.

Reports wall and CPU seconds of the whole ``simulate`` call (setup, event
loop, result tables), events, events per CPU second. The machine is shared:
CPU seconds are the steadier measure. Prints a table and writes
bench/results/sim.json.

    python bench/bench_sim.py [--quick]    (--quick: 1x replays only)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

from dlcluster.sim import POLICIES, Migration, default_failure_model, public_inputs, simulate

RESULTS = Path(__file__).resolve().parent / "results" / "sim.json"


def timed(workload, topology, policy, quotas, **options):
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate(workload, topology, policy, quotas=quotas, **options)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    s = result.summary
    return {"jobs": s["jobs"], "events": s["events"], "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "loop_wall_s": round(s["wall_s"], 2), "events_per_cpu_s": round(s["events"] / cpu),
            "mean_queueing_delay_s": round(s["queueing_delay_s"]["mean"], 1),
            "preemptions": s["preemptions"], "migrations": s["migrations"],
            "wait_share_by_cause": {k: round(v, 3) for k, v in s["wait_share_by_cause"].items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the 1x replays")
    args = parser.parse_args()
    started = time.perf_counter()
    inputs = public_inputs()
    load_s = time.perf_counter() - started
    w, topo, quotas = inputs.workload, inputs.topology, inputs.quotas
    cases = [(p, "1x", w, {}) for p in sorted(POLICIES)]
    if not args.quick:
        four = w.tile(4)
        heavy = replace(w, arrival_s=w.arrival_s / 8.0)
        cases += [(p, "4x", four, {}) for p in sorted(POLICIES)]
        cases += [(p, "load x8", heavy, {}) for p in sorted(POLICIES)]
        cases += [("philly", "1x +migration", w, {"migration": Migration()}),
                  ("philly", "1x +failures,prerun", w, {"failures": default_failure_model(), "retry": "prerun"})]
    rows = []
    print(f"inputs: {len(w):,} jobs, {topo.describe()} (loaded in {load_s:.1f} s)")
    header = f"{'policy':8} {'case':22} {'jobs':>8} {'events':>9} {'wall s':>7} {'cpu s':>6} {'events/cpu s':>12} " \
             f"{'mean wait s':>11} {'preempt':>8}"
    print(header)
    print("-" * len(header))
    for policy, case, workload, options in cases:
        row = {"policy": policy, "case": case, **timed(workload, topo, policy, quotas, **options)}
        rows.append(row)
        print(f"{policy:8} {case:22} {row['jobs']:>8,} {row['events']:>9,} {row['wall_s']:>7.2f} {row['cpu_s']:>6.2f} "
              f"{row['events_per_cpu_s']:>12,} {row['mean_queueing_delay_s']:>11.1f} {row['preemptions']:>8,}",
              flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                               "load_average": os.getloadavg()},
                                   "inputs_load_s": round(load_s, 2), "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
