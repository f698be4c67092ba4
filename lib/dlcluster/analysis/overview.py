"""Section 2 of the study: what is in the trace (counts, arrivals, run times, machines)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.schema import SIZE_BUCKETS, size_bucket


def with_size_bucket(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs.assign(size_bucket=size_bucket(jobs["num_gpus"].astype("float64")))


def job_counts(jobs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Jobs and GPU-hours per group (``by`` may include 'size_bucket'); missing keys shown as 'unknown'."""
    frame = with_size_bucket(jobs)
    keys = {}
    for col in by:
        series = frame[col]
        if isinstance(series.dtype, pd.CategoricalDtype):
            keys[col] = series
        else:
            keys[col] = series.astype("string").fillna("unknown")
    grouped = frame.groupby([keys[c] for c in by], observed=True, dropna=False)
    out = grouped.agg(jobs=("jobid", "size"), gpu_hours=("gpu_time_s", lambda s: s.sum(min_count=1) / 3600))
    out["share_of_jobs"] = out["jobs"] / out["jobs"].sum()
    return out.reset_index()


def submissions_per_day(jobs: pd.DataFrame, tz: str = "America/Los_Angeles") -> pd.DataFrame:
    """Jobs submitted per local calendar day and source (long form: day, source, jobs)."""
    day = jobs["submitted"].dt.tz_convert(tz).dt.floor("D").dt.tz_localize(None)
    return (jobs.assign(day=day).groupby(["day", "source"]).size().rename("jobs").reset_index())


def run_time_quantiles(jobs: pd.DataFrame, quantiles=(0.5, 0.9, 0.99)) -> pd.DataFrame:
    """Run-time quantiles (seconds) per size bucket, for jobs with a known run time."""
    frame = with_size_bucket(jobs[jobs["run_time_s"].notna()])
    q = frame.groupby("size_bucket", observed=False)["run_time_s"].quantile(list(quantiles)).unstack()
    q.columns = [f"p{int(round(c * 100))}_s" for c in q.columns]
    q.insert(0, "jobs", frame.groupby("size_bucket", observed=False).size())
    return q.reindex(list(SIZE_BUCKETS))


def machine_list_comparison(machines: pd.DataFrame) -> pd.DataFrame:
    """Servers per (official GPU count, reconstructed GPU count): the disagreement of issue #8."""
    table = pd.crosstab(machines["num_gpus_listed"].astype("string").fillna("absent"),
                        machines["num_gpus"].astype("string").fillna("unknown"),
                        rownames=["official list: GPUs"], colnames=["reconstructed: GPUs"])
    return table


def gpu_totals(machines: pd.DataFrame) -> dict:
    return {
        "servers": int(len(machines)),
        "gpus_reconstructed": int(machines["num_gpus"].fillna(0).sum()),
        "gpus_official": int(machines["num_gpus_listed"].fillna(0).sum()),
        "servers_disagreeing": int(machines["gpu_count_disagrees"].sum()),
    }


def span_days(jobs: pd.DataFrame) -> float:
    s = jobs["submitted"].dropna()
    return float((s.max() - s.min()) / pd.Timedelta(days=1)) if len(s) else np.nan
