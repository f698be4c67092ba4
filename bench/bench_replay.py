"""Replay speed on the largest real workload: RFold's 111,549 Philly jobs, calendar-aligned, with VCs.

For each policy, the replay of the whole workload on the reconstructed cluster
with the public VC quotas and lending (the validation's setting, ideal speed).
Target: at most 10 s per policy on a 2-core machine. Reports wall and CPU
seconds of the ``simulate`` call and of building the workload. The machine is
shared: CPU seconds are the steadier measure. Writes bench/results/replay.json.

    python bench/bench_replay.py
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from dlcluster.sim import POLICIES, simulate, topology_from_machines
from dlcluster.trace import load_trace
from dlcluster.validation.calibrate import vc_quotas
from dlcluster.validation.workload import rfold_replay_workload

RESULTS = Path(__file__).resolve().parent / "results" / "replay.json"
TARGET_S = 10.0


def main() -> None:
    trace = load_trace("public")
    wall, cpu = time.perf_counter(), time.process_time()
    replay = rfold_replay_workload(trace)
    build = {"wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2)}
    workload = replay.workload
    topology = topology_from_machines(trace.machines)
    quotas = vc_quotas(trace.vc_quotas, workload, topology.total_gpus, "none")
    print(f"workload: {len(workload):,} jobs ({workload.source}), built in {build['wall_s']} s; {topology.describe()}")
    print(f"{'policy':8} {'wall s':>7} {'cpu s':>6} {'events':>9} {'mean wait s':>11}  target <= {TARGET_S:g} s")
    rows = []
    for policy in sorted(POLICIES):
        wall, cpu = time.perf_counter(), time.process_time()
        result = simulate(workload, topology, policy, quotas=quotas, lending=True, slowdown=None)
        row = {"policy": policy, "jobs": len(workload), "wall_s": round(time.perf_counter() - wall, 2),
               "cpu_s": round(time.process_time() - cpu, 2), "events": result.summary["events"],
               "mean_queueing_delay_s": round(result.summary["queueing_delay_s"]["mean"], 1)}
        row["within_target"] = row["cpu_s"] <= TARGET_S
        rows.append(row)
        print(f"{policy:8} {row['wall_s']:>7.2f} {row['cpu_s']:>6.2f} {row['events']:>9,} "
              f"{row['mean_queueing_delay_s']:>11.1f}", flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                               "load_average": os.getloadavg()},
                                   "workload_build": build, "target_s": TARGET_S, "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
