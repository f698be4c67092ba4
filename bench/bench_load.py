"""Loader speed and memory: the embedded public data and a raw-format GPU-utilization file.

Writes bench/results/load.json. Run with `make bench` (or directly with the venv's python).
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dlcluster import paths
from dlcluster.trace import QualityReport, load_trace
from dlcluster.trace.public import build_public
from dlcluster.trace.utilcsv import read_util

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def write_gpu_util(path: Path, machines: int, minutes: int, seed: int = 0) -> int:
    """A synthetic file in the raw cluster_gpu_util format (speed only; never used for results)."""
    rng = np.random.default_rng(seed)
    lines = ["time,machineId," + ",".join(f"gpu{i}_util" for i in range(8))]
    base = np.datetime64("2017-10-03T00:00")
    for minute in range(minutes):
        stamp = str(base + np.timedelta64(minute, "m")).replace("T", " ") + ":00 PDT"
        values = rng.uniform(0, 100, size=(machines, 8)).round(2)
        for m in range(machines):
            lines.append(f"{stamp},m{m}," + ",".join(map(str, values[m])) + ",")
    path.write_text("\n".join(lines) + "\n")
    return machines * minutes


def main() -> int:
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = {}
    _, report["load_public_s"] = timed(lambda: load_trace("public"))
    with tempfile.TemporaryDirectory() as tmp:
        _, report["build_public_s"] = timed(lambda: build_public(paths.external_dir(), Path(tmp) / "public"))
        util = Path(tmp) / "cluster_gpu_util"
        rows = write_gpu_util(util, machines=552, minutes=600)
        _, seconds = timed(lambda: read_util(util, "gpu", QualityReport()))
        report["gpu_util_rows"] = rows
        report["gpu_util_read_s"] = seconds
        report["gpu_util_rows_per_s"] = rows / seconds
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (RESULTS / "load.json").write_text(json.dumps(report, indent=2))
    for k, v in report.items():
        print(f"{k:>24}: {v:,.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
