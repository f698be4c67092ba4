"""Write files in the raw Philly trace format: the counterpart of the readers beside it.

The format has one owner, this package: :mod:`.joblog`, :mod:`.rawdir` and
:mod:`.utilcsv` read it, this module writes it. Whoever produces a raw-format
directory (the simulator's run writer, the synthetic benchmark trace) builds
its rows and hands them here, so the conventions below live in one place:

* ``cluster_job_log``: a JSON list of jobs, times as naive US/Pacific
  wall-clock strings (the repeated hour of a DST change is ambiguous, as in
  the real log);
* ``cluster_gpu_util`` / ``cluster_cpu_util`` / ``cluster_mem_util``: CSV with
  the headers below, one row per machine and minute, times with a PDT/PST
  suffix, ``NA`` for a GPU a server does not have and a trailing comma on each
  GPU row;
* ``cluster_machine_list``: ``machineId, number of GPUs, single GPU mem``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .times import TRACE_TZ

GPU_SLOTS = 8
UTIL_HEADERS = {
    "cluster_gpu_util": "time,machineId," + ",".join(f"gpu{g}_util" for g in range(GPU_SLOTS)),
    "cluster_cpu_util": "time,machine_id,cpu_util",
    "cluster_mem_util": "time,machine_id,mem_total,mem_free",
}
MACHINE_LIST_HEADER = "machineId, number of GPUs, single GPU mem"


def pacific_wallclock(epoch: pd.Timestamp, seconds) -> np.ndarray:
    """Job-log times: ``epoch + seconds`` (rounded to whole seconds) as naive US/Pacific strings."""
    times = (epoch + pd.to_timedelta(np.round(np.asarray(seconds, dtype=float)), unit="s")).tz_convert(TRACE_TZ)
    return np.asarray(times.strftime("%Y-%m-%d %H:%M:%S"), dtype=object)


def pacific_minute_stamps(epoch: pd.Timestamp, minutes) -> np.ndarray:
    """Utilization-file times: minute ``m`` after ``epoch`` as ``YYYY-MM-DD HH:MM:SS PDT|PST``."""
    stamps = (epoch + pd.to_timedelta(np.asarray(minutes, dtype=np.int64) * 60, unit="s")).tz_convert(TRACE_TZ)
    return np.asarray(stamps.strftime("%Y-%m-%d %H:%M:%S %Z"), dtype=object)


def write_job_log(records: list[dict], path: str | Path) -> None:
    """``records``: ``{status, vc, jobid, user, submitted_time, attempts: [{start_time, end_time, detail}]}``."""
    with open(path, "w") as fh:
        json.dump(records, fh)


def write_machine_list(path: str | Path, names, gpus, gpu_mem) -> None:
    """One row per machine: name, number of GPUs, memory of one GPU (e.g. ``12GB``)."""
    with open(path, "w") as fh:
        fh.write(MACHINE_LIST_HEADER + "\n")
        for name, count, mem in zip(names, gpus, gpu_mem, strict=True):
            fh.write(f"{name},{count}, {mem}\n")


def write_gpu_util_rows(fh, stamps, machines, util: np.ndarray) -> None:
    """Append GPU rows to an open ``cluster_gpu_util``: ``util`` is (rows, 8), NaN written as ``NA``."""
    frame = pd.DataFrame(util.reshape(len(stamps), GPU_SLOTS))
    frame.insert(0, "machineId", machines)
    frame.insert(0, "time", stamps)
    frame["trailing"] = ""
    frame.to_csv(fh, header=False, index=False, na_rep="NA", float_format="%.1f")
