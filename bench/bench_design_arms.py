"""Notebook 06's sweep at default parameters, one simulation at a time: the CPU each arm costs.

Every simulation of the full grid (the calibrated replay of every RFold job, one per arm; the interference
scenarios "none" and "paper" as the notebook runs them; cells that share a simulation run once,
``experiments.shared_simulations``), in this process: CPU seconds of the ``simulate`` call and of measuring its
weekly blocks. The calibration comes from the cache (``make reports`` leaves it), else it is computed first (minutes).

Target: the whole sweep within 450 CPU-s on this 2-core machine, and no arm above 40 CPU-s. The budget: ``make
reports`` has 15 minutes; the calibration (notebook 01) takes about 5 of them (7 on an unoptimised build of Python,
which ``make`` avoids: scripts/pick_python.py) before notebooks 05 and 06 can start, so the two share 2 cores for
about 8 minutes (960 CPU-s), of which notebook 05's replays take about 300 and the notebooks' own work about 100. CPU
seconds are those of the interpreter .venv was made with. Writes bench/results/design_arms.json.

    python bench/bench_design_arms.py
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import pandas as pd

from dlcluster import experiments as E
from dlcluster.experiments.common import cached_trace, resample_periods, scale_load
from dlcluster.experiments.grid import cell_inputs, measure_blocks, simulation_options
from dlcluster.paths import cache_dir
from dlcluster.report.reference import published
from dlcluster.sim import simulate

RESULTS = Path(__file__).resolve().parent / "results" / "design_arms.json"
TARGET_TOTAL_S, TARGET_ARM_S = 450.0, 40.0


def main() -> None:
    trace, spec, cache = "public", E.grid_spec("full"), str(cache_dir())
    started = time.perf_counter()
    calibration = spec.replay.calibration(trace, cache)
    fingerprint = E.inputs_fingerprint(trace, replay=spec.replay, cache_dir=cache)
    ips = {k: published(f"util.table4.ips.{k}")["value"] for k in ("SameServer", "DiffServer", "IntraServer",
                                                                    "InterServer")}
    scenarios = {"none": (1.0, 1.0),
                 "paper": (ips["IntraServer"] / ips["SameServer"], ips["InterServer"] / ips["DiffServer"])}
    cells = E.experiment_cells(spec, trace, fingerprint, [0], None, calibration.params.relax_after_s, cache,
                               scenarios)
    same_as = E.shared_simulations(cells)
    runs = list({json.dumps(same_as(c), sort_keys=True): same_as(c) for c in cells}.values())
    print(f"{len(cells)} cells, {len(runs)} simulations (inputs ready in {time.perf_counter() - started:.0f} s)")
    print(f"{'experiment':13} {'arm':44} {'load':>5} {'sim cpu s':>9} {'measure s':>9} {'events':>9}")
    rows = []
    for cell in runs:
        inputs = cell_inputs(cell)
        workload = scale_load(resample_periods(inputs.workload, int(cell["seed"]), 0.0), float(cell["load"]),
                              inputs.anchor_s)
        policy, options, workload, extras = simulation_options(cell, workload, inputs.philly,
                                                               inputs.options.get("slowdown", "default"))
        cpu = time.process_time()
        result = simulate(workload, inputs.topology, policy, quotas=inputs.quotas, seed=int(cell["seed"]),
                          **{**inputs.options, **options})
        sim_s = time.process_time() - cpu
        measure_blocks(result, workload, extras, inputs, float(cell["load"]), cached_trace(trace).occupancy)
        measure_s = time.process_time() - cpu - sim_s
        arm = str(E.with_arms(pd.DataFrame([cell]))["arm"].iloc[0])
        row = {"experiment": cell["experiment"], "arm": arm, "load": cell["load"], "sim_cpu_s": round(sim_s, 2),
               "measure_cpu_s": round(measure_s, 2), "events": result.summary["events"]}
        row["within_target"] = sim_s + measure_s <= TARGET_ARM_S
        rows.append(row)
        print(f"{row['experiment']:13} {arm[:44]:44} {row['load']:>5g} {sim_s:>9.2f} {measure_s:>9.2f} "
              f"{row['events']:>9,}", flush=True)
    total = sum(r["sim_cpu_s"] + r["measure_cpu_s"] for r in rows)
    print(f"total {total:.0f} CPU-s (target <= {TARGET_TOTAL_S:g}); slowest arm "
          f"{max(r['sim_cpu_s'] + r['measure_cpu_s'] for r in rows):.1f} CPU-s (target <= {TARGET_ARM_S:g})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                               "load_average": os.getloadavg()},
                                   "cells": len(cells), "simulations": len(runs), "total_cpu_s": round(total, 1),
                                   "target_total_s": TARGET_TOTAL_S, "target_arm_s": TARGET_ARM_S,
                                   "within_target": total <= TARGET_TOTAL_S and all(r["within_target"] for r in rows),
                                   "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
