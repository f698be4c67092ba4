"""Workloads: the jobs a simulation replays, from the trace tables or a generator.

A job is its arrival, gang size (GPUs, all or nothing), service time at ideal
placement, VC and user, plus optional failure class and convergence point.
Times are seconds since ``epoch`` (a UTC timestamp: the first submission,
floored to the minute).

Service time from a trace is the time the job actually held its GPUs,
``gpu_time_s / num_gpus`` (equal to ``run_time_s`` for the public Pollux jobs,
which have one attempt each); it is treated as the time at ideal placement.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..trace.quality import QualityReport

REQUIRED_JOB_COLUMNS = ("jobid", "vc", "submitted", "num_gpus")


@dataclass(frozen=True, eq=False)
class Workload:
    """Jobs as parallel arrays (one entry per job; index = job number in results)."""

    jobid: np.ndarray
    vc: np.ndarray
    user: np.ndarray
    arrival_s: np.ndarray
    num_gpus: np.ndarray
    service_s: np.ndarray
    epoch: pd.Timestamp
    fail_class: np.ndarray | None = None
    converge_frac: np.ndarray | None = None
    excluded: dict = field(default_factory=dict)
    source: str = "workload"

    def __post_init__(self):
        n = len(self.jobid)
        arrays = {"jobid": self.jobid, "vc": self.vc, "user": self.user, "arrival_s": self.arrival_s,
                  "num_gpus": self.num_gpus, "service_s": self.service_s}
        if self.fail_class is not None:
            arrays["fail_class"] = self.fail_class
        if self.converge_frac is not None:
            arrays["converge_frac"] = self.converge_frac
        for name, values in arrays.items():
            if len(values) != n:
                raise ValueError(f"workload field {name!r}: {len(values)} entries for {n} jobs")
        _check(self.jobid, pd.isna(self.jobid), "jobid", "missing")
        _check(self.jobid, pd.Series(self.jobid).duplicated().to_numpy(), "jobid", "duplicated")
        _check(self.jobid, pd.isna(self.vc), "vc", "missing")
        _check(self.jobid, ~np.isfinite(self.arrival_s), "arrival_s", "not a finite number")
        _check(self.jobid, (self.num_gpus < 1) | (self.num_gpus != np.floor(self.num_gpus)),
               "num_gpus", "not a positive integer")
        _check(self.jobid, ~np.isfinite(self.service_s) | (self.service_s < 0), "service_s",
               "not a non-negative finite number")
        if self.converge_frac is not None:
            c = self.converge_frac
            _check(self.jobid, ~np.isnan(c) & ((c <= 0) | (c > 1)), "converge_frac", "not in (0, 1] or NaN")
        if self.epoch.tzinfo is None:
            raise ValueError("workload field 'epoch': must be timezone-aware (UTC)")

    def __len__(self) -> int:
        return len(self.jobid)

    @property
    def span_s(self) -> float:
        return float(self.arrival_s.max() - self.arrival_s.min()) if len(self) else 0.0

    def _per_job_fields(self) -> dict:
        fields = {"jobid": self.jobid, "vc": self.vc, "user": self.user, "arrival_s": self.arrival_s,
                  "num_gpus": self.num_gpus, "service_s": self.service_s}
        for name in ("fail_class", "converge_frac"):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        return fields

    def update_digest(self, digest) -> None:
        """Feed what a simulation reads of the jobs (arrivals, sizes, service times, VCs) into a hashlib digest."""
        for array in (self.arrival_s.astype(float), self.num_gpus.astype(np.int64), self.service_s.astype(float)):
            digest.update(np.ascontiguousarray(array).tobytes())
        digest.update("\x1f".join(map(str, self.vc)).encode())

    def take(self, index) -> "Workload":
        """The jobs at ``index`` (positions or boolean mask), in that order."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        return replace(self, **{name: values[index] for name, values in self._per_job_fields().items()})

    def tile(self, copies: int) -> "Workload":
        """``copies`` back-to-back repetitions, each shifted by the arrival span plus one day.

        Same load, ``copies`` times the jobs and the time: a workload whose
        simulation cost should grow linearly (used by the benchmark).
        """
        if copies < 1:
            raise ValueError(f"tile: copies must be >= 1, got {copies}")
        shift = self.span_s + 86400.0
        fields = self._per_job_fields()
        tiled = {name: np.concatenate([values] * copies) for name, values in fields.items()}
        tiled["arrival_s"] = np.concatenate([self.arrival_s + k * shift for k in range(copies)])
        tiled["jobid"] = np.concatenate([self.jobid] + [np.array([f"{j}-copy{k}" for j in self.jobid], dtype=object)
                                                        for k in range(1, copies)])
        return replace(self, **tiled, source=f"{self.source} x{copies}")


def _check(jobid, bad, name, what):
    bad = np.asarray(bad, dtype=bool)
    if bad.any():
        first = jobid[np.flatnonzero(bad)[0]]
        raise ValueError(f"workload field {name!r}: {what} for {int(bad.sum())} job(s), first jobid {first!r}")


def workload_from_jobs(jobs: pd.DataFrame, source: str | None = "pollux") -> Workload:
    """Workload from a jobs table with the columns of :mod:`dlcluster.trace.schema`.

    ``source`` keeps only rows of that ``source`` value (None keeps all). Needs
    ``jobid, vc, submitted, num_gpus`` and ``gpu_time_s`` or ``run_time_s``;
    ``user`` is optional. Rows whose VC, submit time, GPU count or service time
    is unknown cannot be replayed: they are dropped and counted in ``excluded``.
    """
    missing = [c for c in REQUIRED_JOB_COLUMNS if c not in jobs.columns]
    if "gpu_time_s" not in jobs.columns and "run_time_s" not in jobs.columns:
        missing.append("gpu_time_s or run_time_s")
    if missing:
        raise ValueError(f"jobs table: missing column(s) {missing}")
    if source is not None:
        if "source" not in jobs.columns:
            raise ValueError(f"jobs table: no 'source' column to select source={source!r} (pass source=None)")
        jobs = jobs[jobs["source"] == source]
    submitted = pd.to_datetime(jobs["submitted"])
    if submitted.dt.tz is None:
        raise ValueError("jobs table: column 'submitted' must be timezone-aware (UTC)")
    gpus = pd.to_numeric(jobs["num_gpus"], errors="coerce").astype("float64")
    service = pd.Series(np.nan, index=jobs.index)
    if "gpu_time_s" in jobs.columns:
        service = pd.to_numeric(jobs["gpu_time_s"], errors="coerce").astype("float64") / gpus
    if "run_time_s" in jobs.columns:
        service = service.fillna(pd.to_numeric(jobs["run_time_s"], errors="coerce").astype("float64"))
    reasons = {
        "unknown VC": jobs["vc"].isna(),
        "unknown submit time": submitted.isna(),
        "unknown or zero GPU count": gpus.isna() | (gpus < 1),
        "unknown service time (never ran or times missing)": service.isna(),
    }
    keep = pd.Series(True, index=jobs.index)
    excluded = {}
    for reason, bad in reasons.items():
        bad = bad.fillna(True).astype(bool) & keep
        if bad.any():
            excluded[reason] = int(bad.sum())
        keep &= ~bad
    jobs, submitted, gpus, service = jobs[keep], submitted[keep], gpus[keep], service[keep]
    if len(jobs) == 0:
        raise ValueError("jobs table: no job can be replayed (all rows lack VC, submit time, GPUs or service time)")
    epoch = submitted.min().floor("min")
    user = jobs["user"].astype(object).where(jobs["user"].notna(), None) if "user" in jobs.columns \
        else pd.Series([None] * len(jobs))
    return Workload(
        jobid=jobs["jobid"].astype(str).to_numpy(dtype=object), vc=jobs["vc"].astype(str).to_numpy(dtype=object),
        user=user.to_numpy(dtype=object), arrival_s=(submitted - epoch).dt.total_seconds().to_numpy(),
        num_gpus=gpus.to_numpy().astype(np.int64), service_s=service.to_numpy(), epoch=epoch,
        excluded=excluded, source=source or "jobs table")


def workload_from_trace(trace, source: str = "pollux") -> Workload:
    """Workload from a :class:`dlcluster.trace.Trace` (default: its 82,247 real Pollux jobs)."""
    return workload_from_jobs(trace.jobs, source=source)


def quotas_from_table(vc_quotas: pd.DataFrame) -> dict[str, int]:
    """``{vc: GPU quota}`` from a ``vc_quotas`` table (columns ``vc``, ``gpus``)."""
    for column in ("vc", "gpus"):
        if column not in vc_quotas.columns:
            raise ValueError(f"vc_quotas table: missing column {column!r}")
    gpus = pd.to_numeric(vc_quotas["gpus"], errors="coerce")
    if gpus.isna().any() or (gpus < 0).any():
        raise ValueError("vc_quotas table: column 'gpus' must hold non-negative numbers")
    return {str(v): int(g) for v, g in zip(vc_quotas["vc"], gpus, strict=True)}


# The generator's defaults are rounded from the 82,247 public Philly jobs
# (pollux_jobs.csv.gz): 93% use 1 GPU; median run time ~19 minutes with a very
# long tail (a log-normal with sigma 2.4 has a similar spread).
DEFAULT_SIZE_MIX = {1: 0.93, 2: 0.022, 4: 0.023, 8: 0.02, 16: 0.004, 32: 0.001}


def generate_workload(num_jobs: int, *, seed: int = 0, mean_interarrival_s: float = 120.0,
                      size_mix: dict[int, float] | None = None, median_service_s: float = 1150.0,
                      service_sigma: float = 2.4, max_service_s: float = 30 * 86400.0,
                      vcs: tuple[str, ...] = ("vc0", "vc1", "vc2", "vc3"), users_per_vc: int = 8,
                      epoch: str = "2017-10-01 07:00:00") -> Workload:
    """Synthetic jobs: Poisson arrivals, sizes from ``size_mix``, log-normal service times.

    VCs are drawn with Zipf-like weights (1, 1/2, 1/3, ...), users uniformly
    within a VC; ``epoch`` is a UTC time. Deterministic for a given ``seed``.
    """
    if num_jobs < 1:
        raise ValueError(f"generate_workload: num_jobs must be >= 1, got {num_jobs}")
    mix = size_mix or DEFAULT_SIZE_MIX
    sizes = np.array(list(mix), dtype=np.int64)
    weights = np.array(list(mix.values()), dtype=float)
    if (sizes < 1).any() or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError("generate_workload: size_mix needs GPU counts >= 1 and non-negative weights")
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(mean_interarrival_s, num_jobs)) - mean_interarrival_s
    arrival = np.round(np.maximum(arrival, 0.0))
    gpus = rng.choice(sizes, size=num_jobs, p=weights / weights.sum())
    service = np.round(np.minimum(median_service_s * np.exp(service_sigma * rng.standard_normal(num_jobs)),
                                  max_service_s)) + 1
    vc_weights = 1.0 / np.arange(1, len(vcs) + 1)
    vc_index = rng.choice(len(vcs), size=num_jobs, p=vc_weights / vc_weights.sum())
    user_index = rng.integers(0, users_per_vc, size=num_jobs)
    return Workload(jobid=np.array([f"gen-{i:06d}" for i in range(num_jobs)], dtype=object),
                    vc=np.array(vcs, dtype=object)[vc_index],
                    user=np.array([f"{vcs[v]}-u{u}" for v, u in zip(vc_index, user_index, strict=True)], dtype=object),
                    arrival_s=arrival, num_gpus=gpus, service_s=service, epoch=pd.Timestamp(epoch, tz="UTC"),
                    source=f"generated(seed={seed})")


def workload_from_job_table(path, columns=None, **options) -> tuple[Workload, QualityReport]:
    """Workload from another cluster's job table (CSV, CSV.gz or Parquet); returns ``(workload, quality)``.

    ``columns`` and ``options`` are those of :func:`dlcluster.trace.jobtable.load_job_table`.
    Rows that cannot be replayed are counted in ``quality`` (and in the
    workload's ``excluded``) with their reason.
    """
    from ..trace.jobtable import load_job_table

    jobs, quality = load_job_table(path, columns, **options)
    file = Path(path).name
    if len(jobs) == 0:
        raise ValueError(f"{path}: no job can be replayed; {quality.counts(file)['quarantined']}")
    workload = workload_from_jobs(jobs, source=None)
    excluded = {**quality.counts(file)["quarantined"], **workload.excluded}
    return replace(workload, excluded=excluded, source=f"job table {file}"), quality
