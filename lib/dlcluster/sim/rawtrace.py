"""Write a simulated run in the raw Philly trace format (readable by ``load_trace(dir)``).

Files: ``cluster_job_log`` (JSON list of jobs with attempts and GPU
placements; naive US/Pacific wall-clock times), ``cluster_gpu_util`` (CSV
``time,machineId,gpu0_util..gpu7_util``, one row per server and minute, time
with a PDT/PST suffix, ``NA`` for GPUs a server does not have, a trailing
comma on each data row), ``cluster_machine_list`` (``machineId, number of
GPUs, single GPU mem``), plus ``README.md`` and ``metadata.json`` that label
the directory as SIMULATED.

GPU utilization is synthetic (the simulator models time, not kernels): an idle
GPU reads 0; a GPU held by an attempt reads the job's base level times the
speed factor of the attempt's placement (colocation ignored), plus per-minute
noise (normal, sd 5 points), clipped to [0, 100]. Base levels are drawn per
job from the real cluster-wide GPU utilization CDF (``cluster_gpu_util_cdf``
of the public data, 1,000 quantiles), with the idle GPUs taken out of its mass
at 0% by the run's own allocated share (:func:`draw_job_levels`).
A minute's row describes the state at the start of that minute.

Statuses: ``Pass`` and ``Failed`` as simulated; jobs the simulator rejected
(they can never run) are written as ``Killed`` with no attempts, as the real
log records jobs killed while queued.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..trace.rawwrite import (GPU_SLOTS, UTIL_HEADERS, pacific_minute_stamps, pacific_wallclock, write_gpu_util_rows,
                              write_job_log, write_machine_list)
from .results import SimResult

UTIL_NOISE_SD = 5.0


def real_gpu_quantiles(cdf: pd.DataFrame | None = None) -> np.ndarray:
    """The real cluster-wide GPU utilization as equally likely levels (%): one per 0.1% quantile of GPU-minutes.

    ``cdf``: the public ``cluster_gpu_util_cdf`` table (``gpu_util_percent``, ``cdf_percent``); None reads it
    from ``data/public``.
    """
    if cdf is None:
        from .. import paths
        cdf = pd.read_parquet(paths.public_dir() / "cluster_gpu_util_cdf.parquet")
    levels = cdf["gpu_util_percent"].to_numpy(float)
    if not len(levels):
        raise ValueError("cluster GPU utilization CDF has no rows")
    return levels


def draw_job_levels(n: int, rng, allocated_share: float, quantiles: np.ndarray | None = None) -> np.ndarray:
    """Each job's base GPU utilization (%), drawn from the real cluster-wide distribution of GPUs in use.

    The real CDF mixes idle GPUs (all at 0%) with GPUs in use. With the run's
    share ``allocated_share`` of GPUs allocated, GPUs in use are the CDF with
    ``1 - allocated_share`` of its mass taken off 0%: a held GPU is at 0% with
    probability ``max(0, (F(0) - (1 - allocated_share)) / allocated_share)``,
    else at a level drawn from the CDF's part above 0%.
    """
    quantiles = real_gpu_quantiles() if quantiles is None else np.asarray(quantiles, float)
    if not 0 < allocated_share <= 1:
        raise ValueError(f"allocated_share must be in (0, 1], got {allocated_share!r}")
    at_zero = float(np.mean(quantiles <= 0))
    busy = quantiles[quantiles > 0]
    zero_share = min(1.0, max(0.0, (at_zero - (1.0 - allocated_share)) / allocated_share)) if len(busy) else 1.0
    levels = rng.choice(busy, size=n) if len(busy) else np.zeros(n)
    return np.where(rng.random(n) < zero_share, 0.0, levels)


def write_raw_trace(result: SimResult, directory: str | Path, *, util_hours: float | None = 24.0, seed: int = 0,
                    slowdown="default", gpu_mem: str = "12GB") -> Path:
    """Write ``result`` as a raw Philly trace into ``directory``; returns the directory.

    ``util_hours``: hours of per-minute utilization from the start of the run
    (None = the whole run; the real cluster's 539 servers give ~776,000 rows a day).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _write_job_log(result, directory / "cluster_job_log")
    mem = result.topology.gpu_mem or (gpu_mem,) * result.topology.num_servers
    write_machine_list(directory / "cluster_machine_list", result.topology.server_names,
                       result.topology.server_gpus, [m or gpu_mem for m in mem])
    end = float(result.jobs["end_s"].max()) if len(result.jobs) else 0.0
    window_end = end if util_hours is None else min(end, util_hours * 3600.0)
    _write_gpu_util(result, directory / "cluster_gpu_util", window_end, seed, slowdown)
    meta = {
        "simulated": True,
        "generator": "dlcluster.sim (discrete-event simulator); NOT real Philly data",
        "summary": json.loads(json.dumps(result.summary, default=str)),
        "epoch_utc": str(result.epoch),
        "gpu_util": {"synthetic": True, "window_s": [0.0, window_end],
                     "model": "job base level drawn from the real cluster GPU utilization CDF (cluster_gpu_util_cdf) "
                              "less its idle GPUs at the run's allocated share x placement speed factor + "
                              f"N(0, {UTIL_NOISE_SD}) "
                              "per minute, clipped to [0, 100]; idle GPUs 0; absent GPUs NA", "seed": seed},
        "statuses": "Pass/Failed as simulated; rejected jobs written as Killed without attempts",
    }
    (directory / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    (directory / "README.md").write_text(
        "# SIMULATED trace (not real Philly data)\n\n"
        "Written by `dlcluster.sim.write_raw_trace` in the raw Philly trace format, so the analyses can read "
        "it like the real trace (`load_trace(<this directory>)`).\n\n"
        f"- policy: {result.summary.get('policy')}\n- workload: {result.summary.get('workload')}\n"
        f"- topology: {result.summary.get('topology')}\n"
        "- job log times are naive US/Pacific wall-clock (the repeated hour of a DST change is ambiguous, "
        "as in the real trace)\n"
        f"- `cluster_gpu_util` is SYNTHETIC for the first {window_end / 3600:.1f} hours: "
        f"{meta['gpu_util']['model']}\n- see metadata.json for the run summary\n")
    return directory


def _write_job_log(result: SimResult, path: Path) -> None:
    jobs, attempts = result.jobs, result.attempts
    names = result.topology.server_names
    submitted = pacific_wallclock(result.epoch, jobs["arrival_s"].to_numpy())
    starts = pacific_wallclock(result.epoch, attempts["start_s"].to_numpy())
    ends = pacific_wallclock(result.epoch, attempts["end_s"].to_numpy())
    per_job: dict[str, list] = {}
    for jobid, start, end, alloc in zip(attempts["jobid"], starts, ends, result.attempt_gpus, strict=True):
        detail = [{"ip": names[s], "gpus": [f"gpu{g}" for g in range(mask.bit_length()) if mask >> g & 1]}
                  for s, mask in alloc]
        per_job.setdefault(jobid, []).append({"start_time": start, "end_time": end, "detail": detail})
    records = []
    for jobid, vc, user, status, sub in zip(jobs["jobid"], jobs["vc"], jobs["user"], jobs["status"], submitted,
                                            strict=True):
        records.append({"status": "Killed" if status == "Rejected" else status, "vc": vc, "jobid": jobid,
                        "user": None if user is None or user is pd.NA else str(user), "submitted_time": sub,
                        "attempts": per_job.get(jobid, [])})
    write_job_log(records, path)


def _write_gpu_util(result: SimResult, path: Path, window_end: float, seed: int, slowdown) -> None:
    from .slowdown import default_slowdown_model, no_slowdown

    model = default_slowdown_model() if slowdown == "default" else (slowdown or no_slowdown)
    speed = getattr(model, "speed", model)
    topo = result.topology
    n_servers = topo.num_servers
    rng = np.random.default_rng([seed, 0x0711])
    base = draw_job_levels(len(result.jobs), rng, run_allocated_share(result))
    job_pos = pd.Index(result.jobs["jobid"]).get_indexer(result.attempts["jobid"])
    rack_of = topo.server_rack
    levels = np.array([base[j] * speed([mask.bit_count() for _, mask in alloc],
                                       len({rack_of[s] for s, _ in alloc}), 0)
                       for j, alloc in zip(job_pos, result.attempt_gpus, strict=True)])
    start = result.attempts["start_s"].to_numpy()
    end = result.attempts["end_s"].to_numpy()
    absent = np.arange(GPU_SLOTS)[None, :] >= np.asarray(topo.server_gpus)[:, None]
    minutes = int(np.ceil(window_end / 60.0))
    with open(path, "w", newline="") as fh:
        fh.write(UTIL_HEADERS["cluster_gpu_util"] + "\n")
        for first in range(0, minutes, 1440):
            count = min(1440, minutes - first)
            t0, t1 = first * 60.0, (first + count) * 60.0
            util = np.zeros((count, n_servers, GPU_SLOTS))
            busy = np.zeros((count, n_servers, GPU_SLOTS), dtype=bool)
            for a in np.flatnonzero((start < t1) & (end > t0)):
                m0 = max(int(np.ceil(start[a] / 60.0)) - first, 0)
                m1 = min(int(np.ceil(end[a] / 60.0)) - first, count)
                if m1 <= m0:
                    continue
                for s, mask in result.attempt_gpus[a]:
                    gpus = [g for g in range(mask.bit_length()) if mask >> g & 1]
                    util[m0:m1, s, gpus] = levels[a]
                    busy[m0:m1, s, gpus] = True
            util = np.where(busy, np.clip(util + rng.normal(0.0, UTIL_NOISE_SD, util.shape), 0.0, 100.0), 0.0)
            util[:, absent] = np.nan
            stamps = pacific_minute_stamps(result.epoch, np.arange(first, first + count))
            write_gpu_util_rows(fh, np.repeat(stamps, n_servers),
                                np.tile(np.asarray(topo.server_names, dtype=object), count), util)


def run_allocated_share(result: SimResult) -> float:
    """The run's mean share of GPUs allocated (at least one GPU's worth, so that a tiny run still draws levels)."""
    return float(min(1.0, max(result.summary.get("mean_allocation", 1.0), 1.0 / result.topology.total_gpus)))
