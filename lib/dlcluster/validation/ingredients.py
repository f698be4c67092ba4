"""What the replay's candidate ingredients take from the data, and the assumptions where the data has nothing.

* :func:`burst_users`: RFold's jobs name no user. YARN's user limits
  (:mod:`dlcluster.sim.users`) need users, so the replay names them by an
  **assumption**: a *burst* of submissions of one size to one VC, each within
  ``gap_s`` of the previous, is one user's (a sweep). Every other job is its own
  user. The DRE records carry users, but for 5% of the jobs only; they are not
  used to fit this.
* :func:`fit_attempt_split` / :func:`planned_first_attempts`: which replayed jobs
  ran as more than one attempt, and how much of their work came before their
  last attempt. RFold's duration is last end - first start and DRE's record
  is the last attempt's, so a DRE record whose RFold duration is longer than its
  own run time had earlier attempts (more than ``min_gap_s`` longer); the share
  of such records, and the share of the duration that came before the last
  attempt, are read off the DRE records (multi-GPU jobs of at least 5 minutes:
  applied to every job, an assumption). Each such job is replayed as one
  earlier attempt and the rest (:mod:`dlcluster.sim.attempts`); the data cannot
  tell how many earlier attempts there were.
* :func:`placement_facts`: what DRE's placements say about Philly's placement (issue 38's candidates in
  :mod:`dlcluster.sim.packing`): which servers multi-GPU jobs used, by GPU memory size and server size.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .workload import RETRY_GAP_S, retried_mask

#: Quantiles kept of the share of a retried job's duration before its last attempt.
SPLIT_POINTS = 21


def burst_users(workload, gap_s: float = 60.0) -> np.ndarray:
    """A user name per job: ``burst-<k>`` for bursts of one size and VC (module doc), ordered by first arrival."""
    frame = pd.DataFrame({"vc": np.asarray(workload.vc, dtype=str), "gpus": workload.num_gpus,
                          "t": workload.arrival_s, "i": np.arange(len(workload))})
    frame = frame.sort_values(["vc", "gpus", "t", "i"], kind="stable")
    same = (frame["vc"] == frame["vc"].shift()) & (frame["gpus"] == frame["gpus"].shift()) & \
        (frame["t"] - frame["t"].shift() <= gap_s)
    frame["burst"] = np.cumsum(~same.to_numpy())
    first = frame.groupby("burst")[["t", "i"]].min().sort_values(["t", "i"], kind="stable")
    rank = pd.Series(np.arange(len(first)), index=first.index)
    out = np.empty(len(workload), dtype=object)
    out[frame["i"].to_numpy()] = [f"burst-{k}" for k in rank.reindex(frame["burst"]).to_numpy()]
    return out


def fit_attempt_split(waits: pd.DataFrame, min_gap_s: float = RETRY_GAP_S) -> tuple:
    """``(share retried, q_0, ..., q_1)`` from :func:`.workload.dre_first_waits`'s table: the share of records whose
    first start lies more than ``min_gap_s`` before their last (recorded - first wait), and :data:`SPLIT_POINTS`
    quantiles of (last start - first start) / (end - first start) among them, rounded to 6 decimals."""
    earlier = waits["recorded_wait_s"].to_numpy(float) - waits["first_wait_s"].to_numpy(float)
    retried = retried_mask(waits, min_gap_s)
    if not retried.any():
        return (0.0,)
    span = earlier + waits["run_time_s"].to_numpy(float)
    share = earlier[retried] / span[retried]
    quantiles = np.quantile(share, np.linspace(0, 1, SPLIT_POINTS))
    return tuple(round(float(v), 6) for v in (retried.mean(), *quantiles))


def planned_first_attempts(service_s, split: tuple, seed: int = 0) -> np.ndarray:
    """Each job's first-attempt length (s) under ``split`` (:func:`fit_attempt_split`), NaN for a single attempt.

    A job is split with probability ``split[0]``; its first attempt does the drawn share of its service time (by
    inverse transform of the stored quantiles). Seeded.
    """
    service_s = np.asarray(service_s, dtype=float)
    out = np.full(len(service_s), np.nan)
    if len(split) < 2 or split[0] <= 0:
        return out
    rng = np.random.default_rng([seed, 0x5B17])
    hit = rng.random(len(service_s)) < split[0]
    u = rng.random(len(service_s))
    quantiles = np.asarray(split[1:], dtype=float)
    share = np.interp(u, np.linspace(0, 1, len(quantiles)), quantiles)
    first = share * service_s
    planned = hit & (first > 0) & (first < service_s)
    out[planned] = first[planned]
    return out


def placement_facts(placements: pd.DataFrame, machines: pd.DataFrame) -> dict:
    """What DRE's last-attempt placements, joined with the machine list, say about Philly's placement.

    ``placements``: one row per GPU of each job's recorded attempt (``jobid``, ``attempt``, ``machine``); only each
    job's last recorded attempt counts. ``machines``: ``machine``, ``num_gpus``, ``gpu_mem``. Returns counts: the jobs,
    those that spanned more than one GPU memory size, the servers of each (memory, size) kind and how many of them
    ran a multi-GPU job, and per job size bucket (2-4, 5-8, >8 GPUs) the jobs, those on one server and those only on
    servers of 8 or more GPUs.
    """
    last = placements.merge(placements.groupby("jobid", sort=False)["attempt"].max().rename("last"), on="jobid")
    last = last[last["attempt"] == last["last"]].merge(machines[["machine", "num_gpus", "gpu_mem"]], on="machine",
                                                        how="left")
    if last["num_gpus"].isna().any():
        missing = sorted(last.loc[last["num_gpus"].isna(), "machine"].unique())[:5]
        raise ValueError(f"placement_facts: placements name machines the machine list lacks, e.g. {missing}")
    per_job = last.groupby("jobid", sort=True).agg(gpus=("machine", "size"), servers=("machine", "nunique"),
                                                   memory_sizes=("gpu_mem", "nunique"),
                                                   smallest_server=("num_gpus", "min"))
    facts = {"jobs": int(len(per_job)), "jobs_on_both_memory_sizes": int((per_job["memory_sizes"] > 1).sum())}
    used = set(last.loc[last["jobid"].isin(per_job.index[per_job["gpus"] > 1]), "machine"])
    kinds = machines.assign(multi_gpu_job=machines["machine"].isin(used)) \
        .groupby(["gpu_mem", "num_gpus"], sort=True)["multi_gpu_job"].agg(["size", "sum"])
    for (memory, size), row in kinds.iterrows():
        facts[f"servers.{memory}.{int(size)}gpu"] = int(row["size"])
        facts[f"servers.{memory}.{int(size)}gpu.with_multi_gpu_job"] = int(row["sum"])
    for bucket, (low, high) in {"2-4": (2, 4), "5-8": (5, 8), ">8": (9, None)}.items():
        part = per_job[(per_job["gpus"] >= low) & ((per_job["gpus"] <= high) if high else True)]
        facts[f"{bucket}.jobs"] = int(len(part))
        facts[f"{bucket}.one_server"] = int((part["servers"] == 1).sum())
        facts[f"{bucket}.only_on_8gpu_servers"] = int((part["smallest_server"] >= 8).sum())
    return facts
