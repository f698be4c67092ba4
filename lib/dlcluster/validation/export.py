"""The replay's own record, exported as Parquet so that readers and other tools can hold it against data we lack.

Two tables (:func:`replay_tables`), written beside a notebook's results by
:func:`write_replay_tables`:

* ``replay_attempts.parquet``, one row per attempt: ``jobid``, ``vc``,
  ``num_gpus``, ``submitted`` (the job's real submit time, UTC: before the
  scheduler overhead the replay adds to its arrival), ``attempt`` (0 first),
  ``start`` and ``end`` (UTC), ``outcome``, ``num_servers`` and ``servers``
  (the machine names, comma-separated, in placement order);
* ``replay_minutes.parquet``, one row per sample of the replay's time series
  (every minute): ``time`` (UTC), ``allocated_gpus``, ``gpus_in_service``,
  ``busy_servers`` (servers with a job), ``servers_in_service``, and
  ``pending_jobs_<bucket>`` / ``pending_gpus_<bucket>``: jobs waiting and the
  GPUs they ask for, per size bucket (1, 2-4, 5-8, gt8).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import atomic_target
from ..sim.sampler import PENDING_BUCKETS
from .replay import Replay

ATTEMPT_COLUMNS = ("jobid", "vc", "num_gpus", "submitted", "attempt", "start", "end", "outcome", "num_servers",
                   "servers")
MINUTE_COLUMNS = ("time", "allocated_gpus", "gpus_in_service", "busy_servers", "servers_in_service",
                  *(f"pending_jobs_{b}" for b in PENDING_BUCKETS), *(f"pending_gpus_{b}" for b in PENDING_BUCKETS))


def replay_tables(rep: Replay) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per attempt, per minute) tables of a replay (module doc)."""
    result = rep.result
    jobs, att = result.jobs.set_index("jobid"), result.attempts
    latency = pd.Series(rep.latency_s if rep.latency_s is not None else np.zeros(len(result.jobs)),
                        index=result.jobs["jobid"].to_numpy())
    ids = att["jobid"].to_numpy()
    names = result.topology.server_names
    servers = [",".join(names[s] for s, _ in alloc) for alloc in result.attempt_gpus]
    attempts = pd.DataFrame({
        "jobid": ids, "vc": jobs["vc"].reindex(ids).astype(str).to_numpy(),
        "num_gpus": jobs["num_gpus"].reindex(ids).to_numpy(np.int64),
        "submitted": pd.DatetimeIndex(jobs["submitted"].reindex(ids))
        - pd.to_timedelta(latency.reindex(ids).to_numpy(), "s"),
        "attempt": att["attempt"].to_numpy(np.int64),
        "start": result.epoch + pd.to_timedelta(att["start_s"].to_numpy(), unit="s"),
        "end": result.epoch + pd.to_timedelta(att["end_s"].to_numpy(), unit="s"),
        "outcome": att["outcome"].astype(str).to_numpy(), "num_servers": att["num_servers"].to_numpy(np.int64),
        "servers": servers})
    ts = result.timeseries
    minutes = pd.DataFrame({
        "time": result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s"),
        "allocated_gpus": ts["allocated_gpus"].to_numpy(np.int64),
        "gpus_in_service": np.full(len(ts), result.topology.total_gpus, dtype=np.int64),
        "busy_servers": (result.topology.num_servers - ts["idle_servers"]).to_numpy(np.int64),
        "servers_in_service": np.full(len(ts), result.topology.num_servers, dtype=np.int64),
        **{c: ts[c].to_numpy(np.int64) for c in MINUTE_COLUMNS if c.startswith("pending_")}})
    return attempts[list(ATTEMPT_COLUMNS)], minutes[list(MINUTE_COLUMNS)]


def _write_parquet(frame: pd.DataFrame, path: Path) -> Path:
    with atomic_target(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return path


def write_replay_tables(rep: Replay, folder: str | Path) -> dict[str, Path]:
    """Write :func:`replay_tables` as ``replay_attempts.parquet`` and ``replay_minutes.parquet`` (atomically)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    attempts, minutes = replay_tables(rep)
    return {"attempts": _write_parquet(attempts, folder / "replay_attempts.parquet"),
            "minutes": _write_parquet(minutes, folder / "replay_minutes.parquet")}
