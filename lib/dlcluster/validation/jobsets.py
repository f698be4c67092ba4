"""Evidence on the public Philly job sets: what each holds, and which carries the cluster's real demand.

Three public derivations of the Philly job log are compared with each other and
with the raw trace's own definitions:

* Pollux (82,247 jobs: submit time, duration, GPUs, VC),
* RFold (111,549 jobs: arrival *offsets*, GPUs, duration; no VC, no calendar),
* DRE (5,910 complete records: status, submit, start, end, placement).

RFold carries only seconds since its first arrival. :func:`align_offsets`
puts it on the calendar against a reference set with calendar times (Pollux):
cross-correlating hourly arrival counts gives the shift to the hour, then the
arrival differences of jobs with the same (GPUs, duration) give it to the
second (their mode). Done in US/Pacific wall-clock; the same mode computed in
UTC before and after the 2017-11-05 DST change differs by 3600 s when the
offsets were taken from the job log's naive wall-clock times.

Job-to-job matches (:func:`match_nearest`) pair jobs of equal GPU count whose
submit times agree within a tolerance: they tell which statuses a set holds
(DRE has Pass and Failed records) and what its duration measures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.times import localize_pacific, to_local_naive

#: DST change of the trace (US/Pacific, 2017-11-05 02:00 PDT -> 01:00 PST), in UTC.
DST_CHANGE_UTC = pd.Timestamp("2017-11-05 09:00", tz="UTC")


@dataclass(frozen=True)
class Alignment:
    """Where offset 0 of an offset-only job set lies on the calendar, and the evidence."""

    origin_local: pd.Timestamp      # naive US/Pacific wall-clock time of offset 0
    coarse_shift_h: int             # reference's first hour minus offset set's first hour (hours)
    coarse_correlation: float       # Pearson correlation of hourly arrival counts at that shift
    candidate_pairs: int            # (GPUs, duration)-equal pairs within the search window
    supporting_pairs: int           # pairs whose arrival difference equals the mode (to the second)
    utc_mode_before_dst_s: float    # the same mode computed in UTC, before the DST change
    utc_mode_after_dst_s: float     # ... and after it (3600 s apart for wall-clock offsets)

    @property
    def origin_utc(self) -> pd.Timestamp:
        return localize_pacific(pd.Series([self.origin_local])).iloc[0]

    @property
    def offsets_are_wallclock(self) -> bool:
        return abs(self.utc_mode_after_dst_s - self.utc_mode_before_dst_s - 3600.0) < 1.0

    def as_dict(self) -> dict:
        return {"origin_local": str(self.origin_local), "origin_utc": str(self.origin_utc),
                "coarse_shift_h": self.coarse_shift_h, "coarse_correlation": self.coarse_correlation,
                "candidate_pairs": self.candidate_pairs, "supporting_pairs": self.supporting_pairs,
                "utc_mode_before_dst_s": self.utc_mode_before_dst_s,
                "utc_mode_after_dst_s": self.utc_mode_after_dst_s,
                "offsets_are_wallclock": self.offsets_are_wallclock}


def hourly_counts(seconds: np.ndarray) -> np.ndarray:
    """Arrivals per hour from seconds since a start (hour 0 = [0, 3600))."""
    return np.bincount((np.asarray(seconds, dtype=float) // 3600).astype(np.int64))


def best_hour_shift(reference: np.ndarray, other: np.ndarray, min_overlap_h: int = 500) -> tuple[int, float]:
    """Shift ``k`` (hours) maximizing the correlation of ``reference[h]`` with ``other[h + k]``."""
    best = (0, -np.inf)
    for k in range(-len(reference) + min_overlap_h, len(other) - min_overlap_h + 1):
        lo, hi = max(0, -k), min(len(reference), len(other) - k)
        if hi - lo < min_overlap_h:
            continue
        x, y = reference[lo:hi].astype(float), other[lo + k:hi + k].astype(float)
        if x.std() == 0 or y.std() == 0:
            continue
        c = float(np.corrcoef(x, y)[0, 1])
        if c > best[1]:
            best = (k, c)
    if not np.isfinite(best[1]):
        raise ValueError(f"best_hour_shift: no shift overlaps {min_overlap_h} hours with varying counts")
    return best


def align_offsets(offset_s, gpus, duration_s, reference_utc, reference_gpus, reference_duration_s,
                  window_h: float = 72.0, min_overlap_h: int = 500) -> Alignment:
    """Calendar alignment of an offset-only job set against a reference set with submit times (see module doc)."""
    offset_s = np.asarray(offset_s, dtype=float)
    ref_utc = pd.Series(pd.to_datetime(reference_utc)).reset_index(drop=True)
    ref_local = to_local_naive(ref_utc)
    ref_start = ref_local.min().floor("h")
    ref_s = (ref_local - ref_start).dt.total_seconds().to_numpy()
    if (offset_s < 0).any():
        raise ValueError("align_offsets: offsets must be non-negative seconds after the set's origin")
    shift_h, corr = best_hour_shift(hourly_counts(ref_s), hourly_counts(offset_s), min_overlap_h)
    # reference hour h ~ other hour h + shift: offset 0 lies ~shift hours before the reference's first hour
    left = pd.DataFrame({"gpus": np.asarray(reference_gpus, dtype=np.int64),
                         "duration": np.asarray(reference_duration_s, dtype=float), "ref_s": ref_s,
                         "after_dst": (ref_utc >= DST_CHANGE_UTC).to_numpy()})
    right = pd.DataFrame({"gpus": np.asarray(gpus, dtype=np.int64), "duration": np.asarray(duration_s, dtype=float),
                          "offset": offset_s})
    pairs = left.merge(right, on=["gpus", "duration"])
    diff = pairs["ref_s"] - pairs["offset"] + shift_h * 3600.0   # origin relative to the reference's first hour
    pairs = pairs[np.abs(diff) <= window_h * 3600.0].assign(diff=np.round(diff))
    if pairs.empty:
        raise ValueError("align_offsets: no (GPUs, duration)-equal pair within the window of the hourly shift")
    mode = float(pairs["diff"].mode().min())
    origin = ref_start - pd.Timedelta(hours=shift_h) + pd.Timedelta(seconds=mode)
    # the same mode in UTC seconds, split at the DST change
    ref_utc_s = (ref_utc - ref_utc.min()).dt.total_seconds().to_numpy()
    left_utc = left.assign(ref_s=ref_utc_s)
    pairs_utc = left_utc.merge(right, on=["gpus", "duration"])
    utc_diff = np.round(pairs_utc["ref_s"] - pairs_utc["offset"])
    origin_utc_guess = (localize_pacific(pd.Series([origin])).iloc[0] - ref_utc.min()).total_seconds()
    near = np.abs(utc_diff - origin_utc_guess) <= 2 * 3600.0

    def utc_mode(after: bool) -> float:
        sel = utc_diff[near & (pairs_utc["after_dst"] == after)]
        return float(sel.mode().min() - origin_utc_guess) if len(sel) else float("nan")

    return Alignment(origin_local=origin, coarse_shift_h=int(shift_h), coarse_correlation=corr,
                     candidate_pairs=int(len(pairs)), supporting_pairs=int((pairs["diff"] == mode).sum()),
                     utc_mode_before_dst_s=utc_mode(False), utc_mode_after_dst_s=utc_mode(True))


def offsets_to_utc(offset_s, origin_local: pd.Timestamp) -> pd.Series:
    """Offsets (seconds of US/Pacific wall-clock after ``origin_local``) -> UTC submit times."""
    naive = pd.Timestamp(origin_local) + pd.to_timedelta(np.asarray(offset_s, dtype=float), unit="s")
    return localize_pacific(pd.Series(naive))


def match_nearest(left_utc, left_gpus, right_utc, right_gpus, tolerance_s: float = 1.0) -> np.ndarray:
    """For each left job, the position of the right job of equal GPUs submitted nearest in time.

    -1 where none lies within ``tolerance_s``. Many-to-one is possible (two left
    jobs may find the same right job); callers count it.
    """
    left = pd.DataFrame({"t": pd.to_datetime(pd.Series(left_utc)).to_numpy(),
                         "gpus": np.asarray(left_gpus, dtype=np.int64), "pos": np.arange(len(left_gpus))})
    right = pd.DataFrame({"t": pd.to_datetime(pd.Series(right_utc)).to_numpy(),
                          "gpus": np.asarray(right_gpus, dtype=np.int64), "match": np.arange(len(right_gpus))})
    merged = pd.merge_asof(left.sort_values(["t", "pos"], kind="stable"),
                           right.sort_values(["t", "match"], kind="stable"), on="t", by="gpus",
                           tolerance=pd.Timedelta(seconds=tolerance_s), direction="nearest")
    out = np.full(len(left), -1, dtype=np.int64)
    found = merged["match"].notna()
    out[merged.loc[found, "pos"].to_numpy()] = merged.loc[found, "match"].astype(np.int64).to_numpy()
    return out


def status_coverage(records: pd.DataFrame, sets: dict, tolerance_s: float = 1.0) -> pd.DataFrame:
    """Share of complete records (``status``, ``submitted``, ``num_gpus``) found in each job set, per status.

    ``sets``: ``{name: (submitted UTC, num_gpus)}``.
    """
    rows = []
    for name, (submitted, gpus) in sets.items():
        found = match_nearest(records["submitted"], records["num_gpus"], submitted, gpus, tolerance_s) >= 0
        for status, part in pd.Series(found, index=records.index).groupby(records["status"].to_numpy()):
            rows.append({"job_set": name, "status": status, "records": len(part),
                         "found": int(part.sum()), "found_share": float(part.mean())})
    return pd.DataFrame(rows)


def duration_definition(records: pd.DataFrame, duration_s: np.ndarray, tolerance_s: float = 60.0) -> pd.DataFrame:
    """How a matched set's duration relates to a complete record's times, per status.

    ``duration_s``: the matched job's duration for each record (NaN if
    unmatched). Shares (of matched records): equal to the record's run time
    (end - start), longer, shorter, and equal to submit-to-end.
    """
    duration = pd.Series(np.asarray(duration_s, dtype=float), index=records.index)
    run = records["run_time_s"].astype(float)
    whole = run + records["queueing_delay_s"].astype(float)
    ok = duration.notna() & run.notna()
    rows = []
    for status in sorted(records.loc[ok, "status"].unique()):
        sel = ok & (records["status"] == status)
        d, r, w = duration[sel], run[sel], whole[sel]
        rows.append({"status": status, "matched": int(sel.sum()),
                     "equal_run_time": float(((d - r).abs() <= tolerance_s).mean()),
                     "longer_than_run_time": float((d - r > tolerance_s).mean()),
                     "shorter_than_run_time": float((d - r < -tolerance_s).mean()),
                     "equal_submit_to_end": float(((d - w).abs() <= tolerance_s).mean())})
    return pd.DataFrame(rows)


def gpu_seconds_per_day(submitted_utc, num_gpus, duration_s, days: pd.DatetimeIndex) -> pd.Series:
    """GPU-seconds each calendar day (UTC) if every job ran from its submit for its duration.

    The offered load with no queueing: the demand a set puts on the cluster.
    ``days`` are the day starts; the result is indexed by them.
    """
    start = (pd.to_datetime(pd.Series(submitted_utc)) - days[0]).dt.total_seconds().to_numpy()
    g = np.asarray(num_gpus, dtype=float)
    d = np.asarray(duration_s, dtype=float)
    edges = np.append((days - days[0]).total_seconds().to_numpy(), (days[-1] - days[0]).total_seconds() + 86400.0)

    def integral(t):  # GPU-seconds held before time t
        return float(np.sum(g * np.clip(t - start, 0.0, d)))

    cumulative = np.array([integral(t) for t in edges])
    return pd.Series(np.diff(cumulative), index=days, name="gpu_s")


def daily_occupancy(occupancy: pd.DataFrame) -> pd.Series:
    """Real share of servers with a job, per UTC day (mean of the per-minute active/total)."""
    occ = occupancy.set_index("time")
    return (occ["active"] / occ["total"]).resample("D").mean().rename("busy_server_share")


def demand_table(sets: dict, occupancy: pd.DataFrame, capacity_gpus: int) -> pd.DataFrame:
    """Per UTC day of the real occupancy data: each set's offered GPUs (share of capacity) beside the real occupancy.

    ``sets``: ``{name: (submitted UTC, num_gpus, duration_s)}``.
    """
    real = daily_occupancy(occupancy)
    days = real.index
    table = pd.DataFrame({"real_busy_server_share": real.to_numpy()}, index=days)
    for name, (submitted, gpus, duration) in sets.items():
        table[f"{name}_gpu_share"] = gpu_seconds_per_day(submitted, gpus, duration, days).to_numpy() \
            / (capacity_gpus * 86400.0)
    return table


def job_set_facts(trace, alignment: Alignment) -> pd.DataFrame:
    """One row per job set: what it holds, measured on the data (counts, span, statuses, GPU time)."""
    pollux, dre, rfold = trace.jobs_of("pollux"), trace.jobs_of("dre"), trace.rfold_jobs
    rfold_submit = offsets_to_utc(rfold["arrival_offset_s"], alignment.origin_local)
    common = (pollux["submitted"].min(), pollux["submitted"].max())
    in_common = rfold_submit.between(*common).to_numpy()
    rows = [
        {"job_set": "Pollux", "jobs": len(pollux), "first_submit": pollux["submitted"].min(),
         "last_submit": pollux["submitted"].max(), "vcs": pollux["vc"].nunique(),
         "gpu_days": pollux["gpu_time_s"].sum() / 86400.0,
         "jobs_in_pollux_span": len(pollux), "gpu_days_in_pollux_span": pollux["gpu_time_s"].sum() / 86400.0},
        {"job_set": "RFold", "jobs": len(rfold), "first_submit": rfold_submit.min(), "last_submit": rfold_submit.max(),
         "vcs": 0, "gpu_days": float((rfold["num_gpus"] * rfold["duration_s"]).sum() / 86400.0),
         "jobs_in_pollux_span": int(in_common.sum()),
         "gpu_days_in_pollux_span": float((rfold["num_gpus"] * rfold["duration_s"])[in_common].sum() / 86400.0)},
        {"job_set": "DRE", "jobs": len(dre), "first_submit": dre["submitted"].min(),
         "last_submit": dre["submitted"].max(), "vcs": dre["vc"].nunique(),
         "gpu_days": dre["gpu_time_s"].sum() / 86400.0, "jobs_in_pollux_span": np.nan,
         "gpu_days_in_pollux_span": np.nan},
    ]
    return pd.DataFrame(rows).set_index("job_set")


def missing_at_end_share(submitted_utc, num_gpus, duration_s, reference_times, lead_days) -> pd.Series:
    """Share of busy GPUs held by jobs that run on for more than ``lead_days`` (estimated at ``reference_times``).

    A job set holds only jobs that ended before the trace was collected: at a time
    ``lead`` before the collection, the jobs missing are those that would still
    run ``lead`` later. Measured where the record is complete, this share tells
    how much of the demand a replay lacks ``lead`` days before the trace's end.
    """
    t0 = pd.to_datetime(pd.Series(submitted_utc)).min()
    start = (pd.to_datetime(pd.Series(submitted_utc)) - t0).dt.total_seconds().to_numpy()
    end = start + np.asarray(duration_s, float)
    g = np.asarray(num_gpus, float)
    ref = np.array([(pd.Timestamp(t) - t0).total_seconds() for t in reference_times])
    out = {}
    for lead in lead_days:
        held = beyond = 0.0
        for t in ref:
            running = (start <= t) & (end > t)
            held += g[running].sum()
            beyond += g[running & (end > t + lead * 86400.0)].sum()
        out[lead] = beyond / held if held > 0 else float("nan")
    return pd.Series(out, name="missing_share").rename_axis("lead_days")


def completeness_horizon(submitted_utc, num_gpus, duration_s, reference_span: tuple, max_missing: float = 0.05,
                         hole_fraction: float = 0.1) -> dict:
    """Last time up to which a job set holds (nearly) the whole demand, from the set itself.

    Two checks: (1) jobs still running at the trace's end are absent: the horizon
    is the trace end minus the smallest lead (days) at which at most
    ``max_missing`` of busy GPUs belong to such jobs (estimated every 6 h in
    ``reference_span``); (2) a hole in the arrivals: the first day after
    ``reference_span`` with fewer than ``hole_fraction`` x the median daily
    arrivals. The horizon is the earlier of the two.
    """
    submitted = pd.to_datetime(pd.Series(submitted_utc))
    trace_end = submitted.max()
    refs = pd.date_range(reference_span[0], reference_span[1], freq="6h", inclusive="left")
    leads = list(range(0, 61))
    share = missing_at_end_share(submitted, num_gpus, duration_s, refs, leads)
    lead = int(share.index[share <= max_missing].min())
    daily = submitted.dt.floor("D").value_counts().sort_index(kind="stable")
    daily = daily.reindex(pd.date_range(daily.index.min(), daily.index.max(), freq="D"), fill_value=0)
    after = daily[daily.index >= reference_span[1]]
    holes = after.index[after < hole_fraction * daily.median()]
    hole = holes.min() if len(holes) else pd.NaT
    by_end = trace_end - pd.Timedelta(days=lead)
    horizon = by_end if pd.isna(hole) else min(by_end, hole)
    return {"trace_end": trace_end, "lead_days": lead, "horizon_by_running_jobs": by_end, "arrival_hole_from": hole,
            "horizon": horizon, "missing_share": share}
