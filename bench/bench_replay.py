"""Replay speed on the largest real workload: RFold's 111,549 Philly jobs, calendar-aligned, with VCs.

For each policy, the replay of the whole workload on the reconstructed cluster
with the public VC quotas, three times: unlimited lending (the setting before the
contention mechanism), contention as the calibration models it (each VC
capped at 1.5x its quota, reclaim after 300 s; :mod:`dlcluster.sim.sharing`),
and issue 29's ingredients as a calibration may take them (360 servers in
service, unlimited lending, back-off for every job size under Philly's policy,
gangs holding GPUs while they wait, jobs split into the attempts the DRE records
show), at ideal speed.
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

from dlcluster.sim import POLICIES, make_policy, simulate, topology_from_machines
from dlcluster.trace import load_trace
from dlcluster.validation.calibrate import ReplayParams, replay_setup, sharing_options, vc_quotas
from dlcluster.validation.ingredients import fit_attempt_split
from dlcluster.validation.workload import dre_first_waits, rfold_replay_workload

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
    contention = sharing_options(ReplayParams(max_capacity_factor=1.5, reclaim_after_s=300.0), quotas,
                                 topology.total_gpus, sorted(set(map(str, workload.vc))))
    waits, _ = dre_first_waits(replay, trace.jobs_of("dre"))
    ingredients = replay_setup(replay, trace.machines, trace.vc_quotas,
                               ReplayParams(servers_in_service=360, backoff="every", gang_hold=True,
                                            attempt_split=fit_attempt_split(waits)))
    ingredient_options = {k: v for k, v in ingredients.options.items() if k not in ("placement", "slowdown")}
    settings = {"unlimited lending": ({"lending": True}, topology, quotas),
                "contention (cap 1.5x, reclaim 300 s)": (contention, topology, quotas),
                "issue 29 (360 servers, back-off, holds, split)": (ingredient_options, ingredients.topology,
                                                                   ingredients.quotas)}
    print(f"{'policy':8} {'sharing':46} {'wall s':>7} {'cpu s':>6} {'events':>9} {'mean wait s':>11} {'preempted':>9}"
          f"  target <= {TARGET_S:g} s")
    rows = []
    for setting, (options, cluster, vc_quota) in settings.items():
        for policy in sorted(POLICIES):
            wall, cpu = time.perf_counter(), time.process_time()
            chosen = make_policy(policy, backoff="every") if setting.startswith("issue 29") and policy == "philly" \
                else policy
            result = simulate(workload, cluster, chosen, quotas=vc_quota, slowdown=None, **options)
            row = {"policy": policy, "sharing": setting, "jobs": len(workload),
                   "wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2),
                   "events": result.summary["events"], "preemptions": result.summary["preemptions"],
                   "mean_queueing_delay_s": round(result.summary["queueing_delay_s"]["mean"], 1)}
            row["within_target"] = row["cpu_s"] <= TARGET_S
            rows.append(row)
            print(f"{policy:8} {setting:46} {row['wall_s']:>7.2f} {row['cpu_s']:>6.2f} {row['events']:>9,} "
                  f"{row['mean_queueing_delay_s']:>11.1f} {row['preemptions']:>9,}", flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                               "load_average": os.getloadavg()},
                                   "workload_build": build, "target_s": TARGET_S, "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
