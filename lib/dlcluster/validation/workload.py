"""The replay workload: every job the real cluster ran, with arrival, size, service time and VC.

Built from the evidence of :mod:`.jobsets`: RFold's job set holds passed *and*
failed jobs (the DRE records of both statuses are in it) and its duration is
last end - first start (retries included), so it carries the cluster's whole
demand; Pollux holds passed jobs only. Definitions, the same for every source:

* arrival = submit time (RFold: its offset placed on the calendar by
  :func:`.jobsets.align_offsets`);
* size = GPUs requested; service time = last attempt end - first attempt
  start (``run_time_s`` of the trace tables, RFold's ``duration``);
* VC, by the first rule that applies, each job labelled with its rule
  (``vc_source``): the VC of the DRE complete record of the same job
  (``"dre record"``), of the Pollux job of the same size submitted in the same
  second (``"pollux match"``), else drawn from the VC shares of Pollux jobs of
  the same size bucket with a fixed seed (``"drawn"``).

A replay is measured from ``measure_start`` (the first minute of the real
occupancy data); jobs submitted up to ``warmup_days`` before it, and earlier
jobs still running at it, are replayed too, so the cluster is warm then.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..sim.workload import Workload, workload_from_jobs
from ..trace.schema import size_bucket
from . import jobsets

VC_SOURCES = ("dre record", "pollux match", "drawn")


@dataclass(frozen=True)
class ReplayWorkload:
    """A workload and, per job, where its VC came from and which DRE record it is (if any)."""

    workload: Workload
    vc_source: np.ndarray
    dre_jobid: np.ndarray           # DRE jobid of the same job, None where it has none
    measure_start: pd.Timestamp
    info: dict = field(default_factory=dict)
    # servers the job's DRE record spanned (its real placement, for the replay's slowdown), 0 where it has none
    real_servers: np.ndarray | None = None

    def servers_spanned(self) -> np.ndarray:
        """:attr:`real_servers`, or 0 for every job where none were read."""
        return np.zeros(len(self.dre_jobid), dtype=np.int64) if self.real_servers is None else self.real_servers

    def take(self, index) -> "ReplayWorkload":
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        return ReplayWorkload(self.workload.take(index), self.vc_source[index], self.dre_jobid[index],
                              self.measure_start, dict(self.info), self.servers_spanned()[index])

    def vc_source_shares(self) -> dict:
        counts = pd.Series(self.vc_source).value_counts(sort=False)
        return {s: float(counts.get(s, 0) / len(self.vc_source)) for s in VC_SOURCES}


def match_exact(left_utc, left_gpus, left_duration, right_utc, right_gpus, right_duration) -> np.ndarray:
    """One-to-one match of jobs with the same submit second and GPUs (ties paired in duration order).

    Returns, for each left job, the position of its right job or -1.
    """
    def keyed(t, g, d):
        frame = pd.DataFrame({"t": pd.to_datetime(pd.Series(t)).dt.round("s").to_numpy(),
                              "g": np.asarray(g, dtype=np.int64), "d": np.asarray(d, dtype=float),
                              "pos": np.arange(len(g))})
        frame = frame.sort_values(["t", "g", "d", "pos"], kind="stable")
        frame["rank"] = frame.groupby(["t", "g"]).cumcount()
        return frame

    left = keyed(left_utc, left_gpus, left_duration)
    right = keyed(right_utc, right_gpus, right_duration).rename(columns={"pos": "match", "d": "d_right"})
    merged = left.merge(right, on=["t", "g", "rank"], how="left")
    out = np.full(len(left), -1, dtype=np.int64)
    found = merged["match"].notna()
    out[merged.loc[found, "pos"].to_numpy()] = merged.loc[found, "match"].astype(np.int64).to_numpy()
    return out


def draw_vcs(num_gpus: np.ndarray, reference_vc, reference_gpus, seed: int) -> np.ndarray:
    """VCs drawn per job from the reference's VC shares within the job's size bucket (fixed seed)."""
    rng = np.random.default_rng(seed)
    ref = pd.DataFrame({"vc": np.asarray(reference_vc, dtype=object),
                        "bucket": size_bucket(pd.Series(np.asarray(reference_gpus, dtype=float))).astype(str)})
    buckets = size_bucket(pd.Series(np.asarray(num_gpus, dtype=float))).astype(str).to_numpy()
    overall = ref["vc"].value_counts(normalize=True).sort_index(kind="stable")
    out = np.empty(len(buckets), dtype=object)
    for bucket in sorted(set(buckets)):
        shares = ref.loc[ref["bucket"] == bucket, "vc"].value_counts(normalize=True).sort_index(kind="stable")
        if shares.empty:
            shares = overall
        where = np.flatnonzero(buckets == bucket)
        out[where] = rng.choice(shares.index.to_numpy(dtype=object), size=len(where), p=shares.to_numpy())
    return out


def warm_start_mask(arrival_s: np.ndarray, service_s: np.ndarray, measure_start_s: float,
                    warmup_s: float | None) -> np.ndarray:
    """Jobs to replay: submitted from ``warmup_s`` before the measurement start on, or still running at it.

    ``warmup_s=None`` keeps every job; ``0`` gives a cold start (nothing from
    before ``measure_start`` runs).
    """
    arrival_s, service_s = np.asarray(arrival_s, float), np.asarray(service_s, float)
    if warmup_s is None:
        return np.ones(len(arrival_s), dtype=bool)
    if warmup_s == 0:
        return arrival_s >= measure_start_s
    return (arrival_s >= measure_start_s - warmup_s) | (arrival_s + service_s > measure_start_s)


def rfold_replay_workload(trace, alignment: jobsets.Alignment | None = None, seed: int = 0,
                          warmup_days: float | None = None) -> ReplayWorkload:
    """RFold's jobs on the calendar, each with a VC (module doc); measured from the occupancy data's start."""
    pollux, dre, rfold = trace.jobs_of("pollux"), trace.jobs_of("dre"), trace.rfold_jobs
    if rfold is None or trace.occupancy is None:
        raise ValueError("rfold_replay_workload needs the public data's rfold_jobs and occupancy tables")
    if alignment is None:
        alignment = jobsets.align_offsets(rfold["arrival_offset_s"], rfold["num_gpus"], rfold["duration_s"],
                                          pollux["submitted"], pollux["num_gpus"], pollux["run_time_s"])
    submitted = jobsets.offsets_to_utc(rfold["arrival_offset_s"], alignment.origin_local)
    gpus = rfold["num_gpus"].to_numpy(dtype=np.int64)
    duration = rfold["duration_s"].to_numpy(dtype=float)
    vc = np.full(len(rfold), None, dtype=object)
    source = np.full(len(rfold), "drawn", dtype=object)
    dre_id = np.full(len(rfold), None, dtype=object)
    # DRE records first: their VC and jobid are the job's own
    to_dre = match_exact(submitted, gpus, duration, dre["submitted"], dre["num_gpus"], dre["run_time_s"])
    hit = to_dre >= 0
    vc[hit] = dre["vc"].to_numpy(dtype=object)[to_dre[hit]]
    dre_id[hit] = dre["jobid"].to_numpy(dtype=object)[to_dre[hit]]
    source[hit] = "dre record"
    to_pollux = match_exact(submitted, gpus, duration, pollux["submitted"], pollux["num_gpus"],
                            pollux["run_time_s"])
    use = (to_pollux >= 0) & ~hit
    vc[use] = pollux["vc"].to_numpy(dtype=object)[to_pollux[use]]
    source[use] = "pollux match"
    rest = source == "drawn"
    vc[rest] = draw_vcs(gpus[rest], pollux["vc"], pollux["num_gpus"], seed)
    epoch = submitted.min().floor("min")
    workload = Workload(jobid=np.array([f"rfold-{i}" for i in rfold["rfold_id"]], dtype=object), vc=vc,
                        user=np.full(len(rfold), None, dtype=object),
                        arrival_s=(submitted - epoch).dt.total_seconds().to_numpy(), num_gpus=gpus,
                        service_s=duration, epoch=epoch, source="RFold jobs (calendar-aligned)")
    measure_start = trace.occupancy["time"].min()
    replay = ReplayWorkload(workload, source, dre_id, measure_start,
                            {"alignment": alignment.as_dict(), "seed": seed,
                             "dre_records_matched": int(hit.sum()), "dre_records": len(dre),
                             "pollux_jobs_matched": int((to_pollux >= 0).sum()), "pollux_jobs": len(pollux)},
                            _record_servers(dre, to_dre))
    return _warm(replay, warmup_days)


def _record_servers(dre: pd.DataFrame, to_dre: np.ndarray) -> np.ndarray:
    """Per job, the servers its matched DRE record spanned (``to_dre``: the record's row or -1); 0 without one."""
    spanned = pd.to_numeric(dre["num_servers"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
    return np.where(to_dre >= 0, spanned[np.maximum(to_dre, 0)], 0).astype(np.int64)


def pollux_replay_workload(trace, warmup_days: float | None = None) -> ReplayWorkload:
    """Pollux's passed jobs with their own VCs (for the ablation: the passed-jobs-only workload)."""
    pollux, dre = trace.jobs_of("pollux"), trace.jobs_of("dre")
    workload = workload_from_jobs(pollux.drop(columns=["gpu_time_s"]), source="pollux")
    to_dre = match_exact(pollux["submitted"], pollux["num_gpus"], pollux["run_time_s"], dre["submitted"],
                         dre["num_gpus"], dre["run_time_s"])
    hit = to_dre >= 0
    dre_id = np.full(len(pollux), None, dtype=object)
    dre_id[hit] = dre["jobid"].to_numpy(dtype=object)[to_dre[hit]]
    source = np.full(len(pollux), "pollux match", dtype=object)
    replay = ReplayWorkload(workload, source, dre_id, trace.occupancy["time"].min(),
                            {"dre_records_matched": int(hit.sum()), "dre_records": len(dre)},
                            _record_servers(dre, to_dre))
    return _warm(replay, warmup_days)


def first_days(replay: ReplayWorkload, days: float | None) -> ReplayWorkload:
    """Only the jobs submitted before ``measure_start + days`` (a shorter replay; None keeps all)."""
    if days is None:
        return replay
    w = replay.workload
    end_s = (replay.measure_start + pd.Timedelta(days=days) - w.epoch) / pd.Timedelta(seconds=1)
    out = replay.take(w.arrival_s < end_s)
    out.info["replay_days"] = days
    return out


def measurement_window(replay: ReplayWorkload, start: pd.Timestamp, days: float, warmup_days: float) -> ReplayWorkload:
    """The jobs to replay for a measurement window of ``days`` from ``start``, warm-started ``warmup_days`` before.

    Jobs submitted in the warm-up or the window, and earlier jobs still running
    at ``start``; the result's ``measure_start`` is ``start``.
    """
    shifted = ReplayWorkload(replay.workload, replay.vc_source, replay.dre_jobid, pd.Timestamp(start),
                             dict(replay.info), replay.servers_spanned())
    return first_days(_warm(shifted, warmup_days), days)


def _warm(replay: ReplayWorkload, warmup_days: float | None) -> ReplayWorkload:
    w = replay.workload
    start_s = (replay.measure_start - w.epoch) / pd.Timedelta(seconds=1)
    keep = warm_start_mask(w.arrival_s, w.service_s, start_s, None if warmup_days is None else warmup_days * 86400.0)
    out = replay.take(keep)
    out.info.update({"warmup_days": warmup_days, "jobs_before_warmup_dropped": int((~keep).sum()),
                     "jobs_running_at_measure_start_if_no_wait": int(
                         ((w.arrival_s < start_s) & (w.arrival_s + w.service_s > start_s))[keep].sum())})
    return out


def workload_from_job_log(trace) -> tuple[Workload, dict]:
    """The same kind of workload from a raw job log (``load_trace("philly")`` or a raw-format directory).

    Every job that started and ended (any status), with its own VC; service time
    = ``run_time_s`` (last end - first start, as RFold's duration). Jobs that
    never started, or whose start or end is unknown (still running), cannot
    be replayed: they are counted in the returned ``excluded``.
    """
    jobs = trace.jobs
    excluded = {}
    never = jobs["first_start"].isna() & jobs["last_end"].isna()
    no_end = ~never & jobs["run_time_s"].isna()
    if never.any():
        excluded["never started (no attempt start or end)"] = int(never.sum())
    if no_end.any():
        excluded["start or end unknown (e.g. still running at the trace's end)"] = int(no_end.sum())
    kept = jobs[~never & ~no_end].drop(columns=["gpu_time_s"])
    workload = workload_from_jobs(kept, source=None)
    excluded.update(workload.excluded)
    return Workload(**{**{k: getattr(workload, k) for k in ("jobid", "vc", "user", "arrival_s", "num_gpus",
                                                            "service_s", "epoch")},
                       "excluded": excluded, "source": f"job log ({trace.name})"}), excluded


#: A DRE record whose last attempt started more than this after its first (its recorded wait that much longer than
#: its reconstructed first wait) had earlier attempts: one minute, the reconstruction's tolerance.
RETRY_GAP_S = 60.0


def retried_mask(first_waits: pd.DataFrame, min_gap_s: float = RETRY_GAP_S) -> np.ndarray:
    """Per row of :func:`dre_first_waits`'s table: True where the record's last attempt started more than
    ``min_gap_s`` after its first (recorded wait - reconstructed first wait), i.e. the job ran earlier attempts."""
    earlier = first_waits["recorded_wait_s"].to_numpy(float) - first_waits["first_wait_s"].to_numpy(float)
    return earlier > min_gap_s


def dre_first_waits(replay: ReplayWorkload, dre_jobs: pd.DataFrame,
                    tolerance_s: float = 60.0) -> tuple[pd.DataFrame, dict]:
    """The DRE records' first-attempt queueing delay, by the official definition (first start - submit).

    DRE keeps only the *last* attempt's start, so its recorded wait includes the
    earlier attempts of a retried job. The first start is recovered from the
    same job in RFold, whose duration is last end - first start:
    first start = DRE end - duration. Returns a table (jobid, vc, submitted,
    num_gpus, bucket, recorded_wait_s, first_wait_s, num_servers and run_time_s: of the last attempt) and the
    counts of records left out (no RFold match; first start before submit by more than ``tolerance_s``, i.e.
    inconsistent), so none is lost silently.
    """
    ids = replay.dre_jobid
    have = np.flatnonzero(pd.notna(ids))
    duration = pd.Series(replay.workload.service_s[have], index=ids[have].astype(str))
    dre = dre_jobs.set_index("jobid")
    matched = dre.index.intersection(duration.index)
    rec = dre.loc[matched]
    first = (rec["last_end"] - pd.to_timedelta(duration.loc[matched].to_numpy(), unit="s") - rec["submitted"]
             ).dt.total_seconds()
    bad = first < -tolerance_s
    excluded = {"no matching job in the replay workload": int(len(dre) - len(matched)),
                "first start before submit (inconsistent)": int(bad.sum())}
    rec, first = rec[~bad], first[~bad].clip(lower=0.0)
    table = pd.DataFrame({"jobid": rec.index.to_numpy(), "vc": rec["vc"].to_numpy(),
                          "submitted": rec["submitted"].to_numpy(), "num_gpus": rec["num_gpus"].astype(int).to_numpy(),
                          "bucket": size_bucket(rec["num_gpus"].astype(float)).astype(str).to_numpy(),
                          "recorded_wait_s": rec["queueing_delay_s"].astype(float).to_numpy(),
                          "first_wait_s": first.to_numpy(), "num_servers": rec["num_servers"].astype(int).to_numpy(),
                          "run_time_s": rec["run_time_s"].astype(float).to_numpy()})
    return table, excluded
