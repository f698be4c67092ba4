"""Per-job GPU utilization of the full trace, joined out of core with DuckDB (Figures 5-6, Table 3).

The ingested GPU table (``gpu_util/part-*.parquet``: one row per server and
minute, ``gpu0``..``gpu7``) holds ~45 million rows (~260 million GPU samples)
for the full trace: too much for pandas on a laptop. This module attributes
every sample to the attempt that held the GPU, with the rule of
:func:`dlcluster.analysis.utilization.gpu_minutes` (time basis):

* a sample at ``time`` on ``machine``/``gpu`` belongs to the attempt on that
  GPU that started last at or before ``time``, if that attempt has not ended
  (``start <= time < end``); an attempt still running at the end of the trace
  is open-ended; attempts with an unknown start, an unknown end (not running)
  or an end before the start are left out and counted;
* where attempts on one GPU overlap (should not happen), the later start takes
  over; such spans are counted.

Each attempt-GPU span is cut at the next start on the same GPU, so spans do
not overlap, and split into hours; the join is then a hash join on
(machine, hour) with a range check, streaming over the Parquet parts. A
``NA`` cell inside an attempt is counted, not attributed.

Results (``per``):

* ``"sample"``: every attributed GPU minute (columns of
  ``utilization.SAMPLE_COLUMNS``); in memory, or written to Parquet at ``out``
  (row order unspecified there);
* ``"attempt"`` / ``"job"``: per attempt / job: GPU minutes, distinct
  minutes, GPUs observed, mean utilization (summed exactly as decimals, so
  results do not depend on thread scheduling);
* ``"value_counts"``: samples per (status, num_gpus, util): the exact
  distribution for CDFs and means by job size, in a few thousand rows.

Every call returns ``dropped`` (table, reason, rows), zero counts included.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..trace.ingest import read_manifest, util_parts

PER = ("sample", "attempt", "job", "value_counts")
_HOUR_US = 3_600_000_000
_GPU_COLUMNS = 8
SAMPLE_COLUMNS = ["jobid", "attempt", "machine", "gpu", "minute", "time", "util", "num_gpus", "status"]


@dataclass(frozen=True)
class JobGpuUtil:
    """The join's result: ``frame`` (None when written to ``path``) and what was left out, by reason."""

    frame: pd.DataFrame | None
    dropped: pd.DataFrame
    per: str
    path: Path | None = None


def ingested_directory(source) -> Path:
    """The ingested directory of ``source``: a ``Trace`` loaded from one (``trace.location``) or a path."""
    location = getattr(source, "location", source)
    if location is None:
        raise ValueError("this trace has no location on disk; pass the ingested directory")
    directory = Path(location)
    read_manifest(directory)        # a clear error unless it is a complete ingest
    return directory


def job_gpu_util(source, per: str = "job", *, only: pd.DataFrame | None = None, out: str | Path | None = None,
                 memory_limit: str = "3GB", threads: int | None = None) -> JobGpuUtil:
    """Attribute the GPU samples of an ingested trace to job attempts (see the module docstring).

    ``source``: ``load_trace("philly")`` (or any Trace whose ``location`` is an
    ingested directory), or the directory itself. ``only`` (columns jobid,
    attempt) restricts the join to those attempts, e.g. attempts on dedicated
    servers (``utilization.dedicated_attempts``). ``out``: with
    ``per="sample"``, write the samples to this Parquet file instead of memory.
    """
    if per not in PER:
        raise ValueError(f"per must be one of {PER}, got {per!r}")
    if out is not None and per != "sample":
        raise ValueError("out is only for per='sample' (the other results are small)")
    directory = ingested_directory(source)
    jobs = pd.read_parquet(directory / "jobs.parquet", columns=["jobid", "num_gpus", "status"])
    attempts = pd.read_parquet(directory / "attempts.parquet",
                               columns=["jobid", "attempt", "start", "end", "running"])
    placements = pd.read_parquet(directory / "placements.parquet")
    drops: list[tuple[str, str, int]] = []
    spans = attempt_gpu_spans(attempts, placements, drops, only=only)
    spans = spans.merge(jobs.drop_duplicates("jobid"), on="jobid", how="left", indicator=True)
    unknown_job = spans["_merge"] == "left_only"
    drops.append(("gpu_util", "job not in the jobs table (its spans left out)", int(unknown_job.sum())))
    spans = spans[~unknown_job].drop(columns="_merge")
    spans["num_gpus"] = spans["num_gpus"].astype("Int64")
    spans["status"] = spans["status"].astype("string")

    import duckdb

    spill = tempfile.TemporaryDirectory(prefix="dlcluster-job-util-")
    con = duckdb.connect()
    try:
        con.execute(f"SET temp_directory = '{_quote(spill.name)}'")     # where DuckDB spills past memory_limit
        con.execute(f"SET memory_limit = '{memory_limit}'")
        con.execute(f"SET threads = {int(threads or os.cpu_count() or 1)}")
        con.execute("SET preserve_insertion_order = false")
        con.execute("SET TimeZone = 'UTC'")
        parts = _quote(util_parts(directory, "gpu"))
        gpus = ", ".join(f"gpu{g}" for g in range(_GPU_COLUMNS))
        con.execute(f"CREATE TEMP VIEW util AS SELECT machine::VARCHAR AS machine, epoch_ns(time) // 1000 AS us, "
                    f"{gpus} FROM read_parquet('{parts}')")
        lo, hi = con.execute("SELECT min(us), max(us) FROM util").fetchall()[0]
        con.register("spans", _hour_buckets(spans, lo, hi))
        gpu_value = "CASE s.gpu " + " ".join(f"WHEN {g} THEN u.gpu{g}" for g in range(_GPU_COLUMNS)) + " END"
        con.execute(f"""
            CREATE TEMP VIEW joined AS
            SELECT s.jobid, s.attempt, s.machine, s.gpu, u.us, {gpu_value} AS util, s.num_gpus, s.status
            FROM (SELECT *, us // {_HOUR_US} AS hour FROM util) u
            JOIN spans s ON u.machine = s.machine AND u.hour = s.hour
            WHERE u.us >= s.start_us AND u.us < s.end_us""")
        if per == "sample":
            frame, path, attributed, missing = _samples(con, out)
        else:
            (frame, attributed, missing), path = _aggregate(con, per), None
    finally:
        con.close()
        spill.cleanup()
    samples = int(read_manifest(directory)["util"]["gpu_util"]["samples"])
    drops.append(("gpu_util", "utilization NA inside an attempt (offline GPU)", int(missing)))
    drops.append(("gpu_util", "GPU minute outside every attempt (idle or unattributed)", samples - int(attributed)))
    return JobGpuUtil(frame, pd.DataFrame(drops, columns=["table", "reason", "rows"]), per, path)


def _quote(path: str) -> str:
    return path.replace("'", "''")


def attempt_gpu_spans(attempts: pd.DataFrame, placements: pd.DataFrame, drops: list,
                      only: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per GPU of each usable attempt: [start_us, end_us) in epoch microseconds, cut at the next
    start on the same GPU (the later start takes over, as with ``merge_asof``)."""
    spans = attempts[["jobid", "attempt", "start", "end", "running"]].reset_index(drop=True)
    spans["order"] = np.arange(len(spans))
    no_start = spans["start"].isna()
    drops.append(("attempts", "attempt start unknown", int(no_start.sum())))
    spans = spans[~no_start]
    running = spans["running"].fillna(False).astype(bool)
    no_end = spans["end"].isna() & ~running
    drops.append(("attempts", "attempt end unknown (not running)", int(no_end.sum())))
    spans = spans[~no_end]
    start = spans["start"].astype("datetime64[ns, UTC]").astype("int64") // 1000
    end = spans["end"].astype("datetime64[ns, UTC]")
    end_us = np.where(end.isna(), np.iinfo(np.int64).max, end.astype("int64") // 1000)
    spans = spans.assign(start_us=start.to_numpy(), end_us=end_us)
    backwards = spans["end_us"] < spans["start_us"]
    drops.append(("attempts", "attempt ends before it starts", int(backwards.sum())))
    spans = spans[~backwards]
    if only is not None:
        chosen = spans.merge(only[["jobid", "attempt"]].drop_duplicates(), on=["jobid", "attempt"])
        drops.append(("attempts", "attempt not selected", len(spans) - len(chosen)))
        spans = chosen
    spans = spans.drop(columns=["start", "end", "running"]).merge(
        placements[["jobid", "attempt", "machine", "gpu"]].astype({"gpu": "int64", "machine": "str"}),
        on=["jobid", "attempt"], how="inner")
    outside = spans["gpu"] >= _GPU_COLUMNS
    drops.append(("attempts", f"GPU index above {_GPU_COLUMNS - 1} (not in the utilization file)",
                  int(outside.sum())))
    spans = spans[~outside].sort_values(["machine", "gpu", "start_us", "order"], kind="stable")
    same_gpu = spans.groupby(["machine", "gpu"], sort=False)
    prior_end = same_gpu["end_us"].cummax().groupby([spans["machine"], spans["gpu"]], sort=False).shift()
    drops.append(("attempts", ("GPU-attempt spans overlapping an earlier span on the same GPU "
                   "(samples go to the later start)"), int((spans["start_us"] < prior_end).sum())))
    next_start = same_gpu["start_us"].shift(-1)
    has_next = next_start.notna().to_numpy()
    end = spans["end_us"].to_numpy(dtype=np.int64)
    spans["end_us"] = np.where(has_next, np.minimum(end, next_start.fillna(0).to_numpy(dtype=np.int64)), end)
    return spans.drop(columns="order").reset_index(drop=True)


def _hour_buckets(spans: pd.DataFrame, lo_us, hi_us) -> pd.DataFrame:
    """One row per span and hour it covers within the utilization's time range (open ends cut there)."""
    columns = ["jobid", "attempt", "machine", "gpu", "start_us", "end_us", "num_gpus", "status", "hour"]
    if lo_us is None or spans.empty:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c in ("attempt", "gpu", "start_us", "end_us", "hour")
                                          else "str") for c in columns})
    first = np.maximum(spans["start_us"].to_numpy(), lo_us) // _HOUR_US
    last = (np.minimum(spans["end_us"].to_numpy(), hi_us + 1) - 1) // _HOUR_US
    count = np.maximum(last - first + 1, 0)
    rows = np.repeat(np.arange(len(spans)), count)
    offset = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
    out = spans.iloc[rows].reset_index(drop=True)
    out["hour"] = first[rows] + offset
    return out[columns]


def _samples(con, out) -> tuple[pd.DataFrame | None, Path | None, int, int]:
    select = ("SELECT jobid, attempt, machine, gpu, make_timestamp(us)::TIMESTAMPTZ AS time, util, "
              "num_gpus, status FROM joined")
    if out is not None:     # out of core: one pass to write, one to count
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        con.execute(f"COPY ({select} WHERE util IS NOT NULL) TO '{_quote(str(tmp))}' "
                    "(FORMAT parquet, COMPRESSION zstd)")
        attributed, missing = con.execute("SELECT count(util), count(*) - count(util) FROM joined").fetchall()[0]
        os.replace(tmp, out)
        return None, out, int(attributed), int(missing)
    frame = con.sql(select).to_arrow_table().to_pandas()
    missing = int(frame["util"].isna().sum())
    frame = frame[frame["util"].notna()].copy()
    frame["time"] = frame["time"].astype("datetime64[ns, UTC]")
    frame["minute"] = pd.NA
    frame = frame.sort_values(["jobid", "attempt", "machine", "gpu", "time"], kind="stable")
    return _typed(frame[SAMPLE_COLUMNS]), None, len(frame), missing


def _aggregate(con, per: str) -> tuple[pd.DataFrame, int, int]:
    """The aggregate table, samples attributed, NA cells inside attempts (one pass of the join)."""
    if per == "value_counts":
        frame = con.sql("""
            SELECT status, num_gpus, util, count(*) AS samples FROM joined
            GROUP BY ALL ORDER BY status, num_gpus, util""").to_arrow_table().to_pandas()
        missing = int(frame.loc[frame["util"].isna(), "samples"].sum())
        frame = frame[frame["util"].notna()]
        return _typed(frame), int(frame["samples"].sum()), missing
    keys = "jobid, attempt" if per == "attempt" else "jobid"
    frame = con.sql(f"""
        SELECT {keys}, any_value(num_gpus) AS num_gpus, any_value(status) AS status,
               count(util) AS gpu_minutes, count(*) - count(util) AS na_minutes,
               count(DISTINCT us) FILTER (WHERE util IS NOT NULL) AS minutes,
               count(DISTINCT machine || '/' || gpu) FILTER (WHERE util IS NOT NULL) AS gpus_observed,
               sum(util::DECIMAL(18, 9))::DOUBLE / count(util) AS mean_util
        FROM joined GROUP BY {keys} ORDER BY {keys}""").to_arrow_table().to_pandas()
    missing = int(frame["na_minutes"].sum())
    frame = frame[frame["gpu_minutes"] > 0].drop(columns="na_minutes")
    return _typed(frame), int(frame["gpu_minutes"].sum()), missing


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    types = {"jobid": "str", "machine": "str", "attempt": "int64", "gpu": "int64", "num_gpus": "Int64",
             "status": "string", "util": "float64", "samples": "int64", "gpu_minutes": "int64",
             "minutes": "int64", "gpus_observed": "int64", "mean_util": "float64"}
    return frame.astype({c: t for c, t in types.items() if c in frame.columns}).reset_index(drop=True)
