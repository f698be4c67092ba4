"""The replay held against the real record, each measure in the record's own units, and the calibration objective.

Spans (:func:`spans`: the *fit span*, the first ``fit_days`` of the real occupancy
data, and the *held-out span*, the rest), busy servers against the record's active
count, the GPU allocation against its real lower bound, first-attempt waits job for
job against the DRE complete records (median, p90, KS per size bucket and per VC),
servers spanned against DRE's placements, the waiting by cause and the preemptions.
:func:`evaluate` is the calibration's objective on one span: the occupancy error in
percentage points plus the weighted wait terms (mean |ln replay/real| of the median
and of the p90 first-attempt wait per size bucket, waits floored at a minute, and
their mean KS distance; the weights and why: :data:`MEDIAN_WEIGHT`), with the
placement constraint's violation beside it (:func:`constraint_violation`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..ordering import counts_desc
from .replay import Replay, compare_delays

DELAY_BUCKETS = ("2-4", "5-8", ">8")


def spans(occupancy: pd.DataFrame, fit_days: float, total_days: float | None = None) -> dict:
    """``{"fit": (begin, end), "held_out": (begin, end)}`` over the real occupancy data (UTC, end exclusive).

    ``total_days`` ends the held-out span that many days after the data's start
    (a shorter validation); None runs it to the data's end.
    """
    begin, end = occupancy["time"].min(), occupancy["time"].max() + pd.Timedelta(minutes=1)
    if total_days is not None:
        end = min(end, begin + pd.Timedelta(days=total_days))
    cut = begin + pd.Timedelta(days=fit_days)
    if not begin < cut < end:
        raise ValueError(f"fit_days={fit_days} leaves no held-out span in {begin}..{end}")
    return {"fit": (begin, cut), "held_out": (cut, end)}


def monitoring_gaps(occupancy: pd.DataFrame) -> pd.Series:
    """Minutes whose record says no server had a job (``active == 0``).

    The job sets have hundreds of jobs running at every such minute (the longest
    stretch is most of 2017-10-26), so these are gaps in the monitoring, not an
    empty cluster: they are left out of every error and counted.
    """
    return occupancy["active"] == 0


def real_occupancy(occupancy: pd.DataFrame, freq: str = "1h") -> pd.Series:
    """Real share of servers with a job (active / total), mean per ``freq`` bin, monitoring gaps left out."""
    occ = occupancy[~monitoring_gaps(occupancy)].set_index("time")
    return (occ["active"] / occ["total"]).resample(freq).mean().dropna().rename("real")


def simulated_occupancy(result, freq: str = "1h") -> pd.Series:
    """Replay's share of servers with a job (1 - idle servers / servers), mean per ``freq`` bin (UTC)."""
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    busy = 1.0 - ts["idle_servers"].to_numpy() / result.topology.num_servers
    return pd.Series(busy, index=times).resample(freq).mean().dropna().rename("simulated")


def busy_by_period(result, occupancy: pd.DataFrame, span: tuple, freq: str = "7D") -> pd.DataFrame:
    """Busy servers per period of ``freq`` inside ``span``: the replay's and the record's mean counts and the MAE in
    points of the record's total (:func:`busy_servers`): where the error comes from."""
    table = busy_servers(result, occupancy)
    table = table[(table.index >= span[0]) & (table.index < span[1])]
    period = span[0] + ((table.index - span[0]) // pd.Timedelta(freq)) * pd.Timedelta(freq)
    grouped = table.assign(err=100.0 * (table["simulated"] - table["real"]).abs() / table["total"]).groupby(period)
    out = grouped[["real", "simulated", "total"]].mean()
    out["mae_pp"] = grouped["err"].mean()
    return out.rename_axis("period_start").rename(columns={"real": "real_busy", "simulated": "simulated_busy",
                                                           "total": "record_total"})


def ks_distance(a, b) -> float:
    """Two-sample Kolmogorov-Smirnov distance (max gap between the empirical CDFs).

    The statistic alone, as scipy's ``ks_2samp`` computes it: its p-value, which nothing reads, warned in notebooks'
    outputs (the exact method not converging on large samples, the asymptotic one dividing by zero on tiny ones)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    if np.isnan(a).any() or np.isnan(b).any():
        return float("nan")
    a, b = np.sort(a, kind="stable"), np.sort(b, kind="stable")
    both = np.concatenate([a, b])
    gaps = np.searchsorted(a, both, side="right") / len(a) - np.searchsorted(b, both, side="right") / len(b)
    return float(np.max(np.abs(gaps)))


def paired_delays(rep: Replay, real_waits: pd.DataFrame, column: str = "first_wait_s") -> pd.DataFrame:
    """Real complete records beside the same jobs in the replay: real (``column``) and simulated first wait.

    ``real_waits``: :func:`.workload.dre_first_waits`'s table (``first_wait_s``
    by the official definition, ``recorded_wait_s`` as DRE recorded it). A job
    the replay never started (e.g. a VC without quota when lending is off) gets
    the wait it had when the replay ended, a lower bound, and
    ``never_started`` True.
    """
    sim = rep.result.jobs
    ids = rep.replay.dre_jobid
    have = np.flatnonzero(pd.notna(ids))
    delay = sim["queueing_delay_s"].to_numpy(float)[have]
    never = np.isnan(delay)
    censored = float(rep.result.summary["end_time_s"]) - sim["arrival_s"].to_numpy(float)[have]
    delay = np.where(never, censored, delay + rep.latency_s[have])
    sim_delay = pd.DataFrame({"simulated_s": delay, "never_started": never}, index=ids[have].astype(str))
    real = real_waits.set_index("jobid")
    common = real.index.intersection(sim_delay.index)
    real = real.loc[common]
    return pd.DataFrame({"jobid": common, "vc": real["vc"].to_numpy(), "submitted": real["submitted"].to_numpy(),
                         "num_gpus": real["num_gpus"].to_numpy(), "bucket": real["bucket"].to_numpy(),
                         "real_s": real[column].to_numpy(float),
                         "simulated_s": sim_delay.loc[common, "simulated_s"].to_numpy(),
                         "never_started": sim_delay.loc[common, "never_started"].to_numpy()})


def in_span(frame: pd.DataFrame, span: tuple | None) -> pd.DataFrame:
    if span is None:
        return frame
    t = pd.to_datetime(frame["submitted"])
    return frame[(t >= span[0]) & (t < span[1])]


def delay_table(pairs: pd.DataFrame, span: tuple | None = None) -> pd.DataFrame:
    """Median and p90 queueing delay per size bucket, replay beside real, with the median ratio and KS."""
    part = in_span(pairs, span)
    table = compare_delays(part.rename(columns={"real_s": "delay_s"})[["bucket", "delay_s"]],
                           part.rename(columns={"simulated_s": "delay_s"})[["bucket", "delay_s"]])
    table = table.reindex([b for b in DELAY_BUCKETS if b in table.index])
    table["median_ratio"] = table["simulated_median_s"] / table["real_median_s"]
    table["p90_ratio"] = table["simulated_p90_s"] / table["real_p90_s"]
    return table


def vc_ks(pairs: pd.DataFrame, span: tuple | None = None, top: int = 5) -> pd.DataFrame:
    """KS distance of replay vs real delay per VC, for the ``top`` VCs with most records in the span."""
    part = in_span(pairs, span)
    vcs = counts_desc(part["vc"]).head(top).index
    rows = [{"vc": vc, "records": int((part["vc"] == vc).sum()),
             "real_median_s": float(part.loc[part["vc"] == vc, "real_s"].median()),
             "simulated_median_s": float(part.loc[part["vc"] == vc, "simulated_s"].median()),
             "ks": ks_distance(part.loc[part["vc"] == vc, "real_s"], part.loc[part["vc"] == vc, "simulated_s"])}
            for vc in vcs]
    return pd.DataFrame(rows).set_index("vc")


def log_median_error(table: pd.DataFrame, floor_s: float = 1.0, stat: str = "median") -> float:
    """Mean over buckets of |ln(replay / real)| of the median (or ``stat="p90"``), both floored at ``floor_s``."""
    s = np.maximum(table[f"simulated_{stat}_s"].to_numpy(float), floor_s)
    r = np.maximum(table[f"real_{stat}_s"].to_numpy(float), floor_s)
    return float(np.mean(np.abs(np.log(s / r))))


def either_way(ratios) -> float:
    """The largest of the ratios taken either way (2 and 0.5 both count as 2); NaN if there is none."""
    r = np.asarray(ratios, float)
    r = r[np.isfinite(r) & (r > 0)]
    return float(np.max(np.maximum(r, 1.0 / r))) if len(r) else float("nan")


def allocated_share(result, span: tuple) -> float:
    """Replay's mean share of GPUs allocated in ``span``."""
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    inside = (times >= span[0]) & (times < span[1])
    return float((ts["allocated_gpus"].to_numpy()[inside] / result.topology.total_gpus).mean())


def real_allocated_lower_bound(cdf: pd.DataFrame) -> float:
    """At least this share of the *reporting* GPUs was allocated: 1 - the share of their minutes at 0% utilization.

    A GPU with no job reports 0%, and so can an allocated GPU that idles, so the
    GPU-minutes at 0% bound the unallocated ones from above and the allocated
    share from below. Offline GPUs report nothing: the share is of the GPUs in
    service, the units of :func:`gpu_allocation`.
    """
    at_zero = cdf.loc[cdf["gpu_util_percent"] <= 0.0, "cdf_percent"]
    return 1.0 - (float(at_zero.max() / 100.0) if len(at_zero) else 0.0)


def gpu_allocation(result, cdf: pd.DataFrame, span: tuple) -> dict:
    """The replay's allocated share of its GPUs in service in ``span`` beside the real lower bound
    (:func:`real_allocated_lower_bound`); ``shortfall_pp`` = points below the bound (<= 0: within it)."""
    share = allocated_share(result, span)
    bound = real_allocated_lower_bound(cdf)
    return {"simulated_allocated_share": share, "real_allocated_share_lower_bound": bound,
            "shortfall_pp": 100.0 * (bound - share), "gpus_in_service": int(result.topology.total_gpus)}


def busy_servers(result, occupancy: pd.DataFrame, freq: str = "1h") -> pd.DataFrame:
    """Busy servers in the record's units, per ``freq`` bin: the replay's count beside the record's active count.

    The record (``node_sequence``) counts active servers out of its own total
    (420 on most days), the replay its servers with a job out of the servers in
    service. Both are compared as counts, and errors are taken in points of the
    record's total; monitoring gaps are left out. Columns ``simulated``,
    ``real``, ``total`` (means per bin), the bins both have.
    """
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    simulated = pd.Series(result.topology.num_servers - ts["idle_servers"].to_numpy(), index=times)
    occ = occupancy[~monitoring_gaps(occupancy)].set_index("time")
    table = pd.concat([simulated.resample(freq).mean().rename("simulated"),
                       occ["active"].resample(freq).mean().rename("real"),
                       occ["total"].resample(freq).mean().rename("total")], axis=1, join="inner")
    return table.dropna()


def busy_servers_mae_pp(result, occupancy: pd.DataFrame, span: tuple) -> float:
    """Mean |replay - real| busy servers per hour in ``span``, in points of the record's total
    (:func:`busy_servers`)."""
    table = busy_servers(result, occupancy)
    table = table[(table.index >= span[0]) & (table.index < span[1])]
    if table.empty:
        raise ValueError("busy_servers_mae_pp: the replay and the record share no hour inside the span")
    return float(100.0 * ((table["simulated"] - table["real"]).abs() / table["total"]).mean())


@dataclass(frozen=True)
class Evaluation:
    """The calibration objective's parts on one span, the objective, and how far the placement misses its constraint."""

    busy_servers_mae_pp: float
    allocation_shortfall_pp: float
    log_median_error: float     # first waits, both floored at WAIT_FLOOR_S
    log_p90_error: float        # the same, of the p90s
    mean_ks: float
    spanned_ks: float      # mean KS per size bucket of the servers each DRE job spanned, replay vs real (reported)
    objective: float
    # the placement constraint (:func:`constraint_violation`): the worst bucket's servers-spanned KS, the largest
    # gap in one-server share (points), and the violation (0: the set is feasible)
    spanned_ks_max: float = 0.0
    one_server_gap_pp: float = 0.0
    violation: float = 0.0


#: Weights of the objective's wait terms (issue 47), by what the experiments of notebook 06 measure: mean JCT and the
#: queueing tail. A median first wait of 15 s against 38 s changes no JCT (the replay's mean JCT is ~9 h), so waits
#: are floored at :data:`WAIT_FLOOR_S` before the log error is taken (below a minute no error counts), and the median
#: weighs half the p90: a p90 off by a factor of e is hours of JCT for a tenth of the jobs. The waits' KS, which the
#: bulk of short waits decides, weighs a quarter. One unit of log error (a factor of e) at the p90 costs as much as 10
#: points of busy-server error. Placement is no longer a weight: it is the constraint below.
MEDIAN_WEIGHT, P90_WEIGHT, WAIT_KS_WEIGHT = 5.0, 10.0, 2.5
#: Waits below this many seconds count as this many in the log errors of the objective
WAIT_FLOOR_S = 60.0
#: Kept for callers that pass one weight: the p90's
DELAY_WEIGHT = P90_WEIGHT
#: The placement constraint (issue 47): servers-spanned KS at most this in every size bucket of the fit span ...
SPANNED_KS_LIMIT = 0.2
#: ... and each bucket's share of jobs on one server within this many points of DRE's real share on the same span
ONE_SERVER_GAP_LIMIT_PP = 10.0


def evaluate(rep: Replay, occupancy: pd.DataFrame, real_waits: pd.DataFrame, span: tuple, gpu_util_cdf: pd.DataFrame,
             delay_weight: float = DELAY_WEIGHT) -> Evaluation:
    """The calibration objective on one span, and the placement constraint's violation.

    Objective: busy-server MAE in points of the record (:func:`busy_servers_mae_pp`) + the points by which the
    replay's GPU allocation falls below the real lower bound (0 when within it; :func:`gpu_allocation`) + the wait
    terms of the first-attempt waits per size bucket (the DRE records submitted in the span, job for job), each
    scaled by ``delay_weight`` / :data:`P90_WEIGHT`: :data:`MEDIAN_WEIGHT` x mean |ln(replay/real median)| +
    :data:`P90_WEIGHT` x mean |ln(replay/real p90)| (waits floored at :data:`WAIT_FLOOR_S`) + :data:`WAIT_KS_WEIGHT`
    x mean KS; the weights and why: :data:`MEDIAN_WEIGHT`. The servers each job spanned are a constraint, not a term
    (:func:`constraint_violation`), so that no parameter set can buy the waits with the wrong placement. The full
    trace's Figure 3 never enters it.
    """
    return evaluation_from_parts(busy_servers_mae_pp(rep.result, occupancy, span),
                                 gpu_allocation(rep.result, gpu_util_cdf, span)["shortfall_pp"],
                                 delay_table(paired_delays(rep, real_waits), span),
                                 servers_spanned_table(servers_spanned(rep, real_waits, span)), delay_weight)


def constraint_violation(spanned: pd.DataFrame) -> tuple[float, float, float]:
    """(worst KS, largest one-server gap in points, violation) of a per-bucket servers-spanned table
    (:func:`servers_spanned_table`).

    The violation is 0 when every bucket's KS is at most :data:`SPANNED_KS_LIMIT` and every one-server share is within
    :data:`ONE_SERVER_GAP_LIMIT_PP` points of the real one; else the excess of each, in share units (a KS of 0.25 is
    0.05 over, a gap of 16 points 0.06 over), summed, so that the calibration keeps the set closest to feasible.
    """
    if spanned.empty:   # nothing to judge the placement by: as far from feasible as a KS can be
        return float("nan"), float("nan"), 1.0
    ks_max = float(spanned["ks"].max())
    gap = float(100.0 * (spanned["simulated_one_server_share"] - spanned["real_one_server_share"]).abs().max())
    violation = max(0.0, ks_max - SPANNED_KS_LIMIT) + max(0.0, gap - ONE_SERVER_GAP_LIMIT_PP) / 100.0
    return ks_max, gap, violation


def evaluation_from_parts(busy: float, shortfall_pp: float, delays: pd.DataFrame, spanned: pd.DataFrame,
                          delay_weight: float = DELAY_WEIGHT) -> Evaluation:
    """:func:`evaluate` from its parts: busy-server MAE, allocation shortfall, the per-bucket wait table and the
    per-bucket servers-spanned table."""
    shortfall = max(0.0, shortfall_pp)
    med = log_median_error(delays, floor_s=WAIT_FLOOR_S)
    p90 = log_median_error(delays, floor_s=WAIT_FLOOR_S, stat="p90")
    ks = float(delays["ks_statistic"].mean())
    spanned_ks = float(spanned["ks"].mean())
    scale = delay_weight / P90_WEIGHT
    waits = scale * (MEDIAN_WEIGHT * med + P90_WEIGHT * p90 + WAIT_KS_WEIGHT * ks)
    return Evaluation(busy, shortfall, med, p90, ks, spanned_ks, busy + shortfall + waits,
                      *constraint_violation(spanned))


def servers_spanned(rep: Replay, real_waits: pd.DataFrame, span: tuple | None = None) -> pd.DataFrame:
    """Servers each real multi-GPU job spanned (its DRE record's last attempt) beside the same job in the replay.

    ``real_waits``: :func:`.workload.dre_first_waits`'s table (with ``num_servers``).
    The replay's figure is its last attempt's; jobs the replay never started are left out.
    """
    att = rep.result.attempts
    # a job's attempts are consecutive rows in attempt order (SimResult.build): its last row is its last attempt
    attempt_job = att["jobid"].to_numpy()
    last_row = np.ones(len(attempt_job), dtype=bool)
    last_row[:-1] = attempt_job[1:] != attempt_job[:-1]
    last = pd.Series(att["num_servers"].to_numpy()[last_row], index=attempt_job[last_row])
    dre_jobid = np.asarray(rep.replay.dre_jobid, dtype=object)
    has_record = ~pd.isna(dre_jobid)
    ids = pd.Series(dre_jobid[has_record], index=np.asarray(rep.replay.workload.jobid).astype(str)[has_record])
    simulated = pd.Series(last.reindex(ids.index).to_numpy(), index=ids.astype(str).to_numpy()).dropna()
    real = in_span(real_waits, span).set_index("jobid")
    common = real.index.intersection(simulated.index)
    return pd.DataFrame({"jobid": common, "bucket": real.loc[common, "bucket"].to_numpy(),
                         "num_gpus": real.loc[common, "num_gpus"].to_numpy(),
                         "real_servers": real.loc[common, "num_servers"].to_numpy(int),
                         "simulated_servers": simulated.loc[common].to_numpy(int)})


def servers_spanned_table(spanned: pd.DataFrame) -> pd.DataFrame:
    """Per size bucket: jobs, median and mean servers spanned, real beside replay, and the KS distance."""
    rows = []
    for bucket in DELAY_BUCKETS:
        part = spanned[spanned["bucket"] == bucket]
        if part.empty:
            continue
        rows.append({"bucket": bucket, "jobs": len(part),
                     "real_median": float(part["real_servers"].median()),
                     "simulated_median": float(part["simulated_servers"].median()),
                     "real_mean": float(part["real_servers"].mean()),
                     "simulated_mean": float(part["simulated_servers"].mean()),
                     "real_one_server_share": float((part["real_servers"] == 1).mean()),
                     "simulated_one_server_share": float((part["simulated_servers"] == 1).mean()),
                     "ks": ks_distance(part["real_servers"], part["simulated_servers"])})
    return pd.DataFrame(rows).set_index("bucket")


def wait_by_cause(rep: Replay, span: tuple | None = None) -> dict:
    """Seconds of waiting of the jobs submitted in ``span``, by cause: the simulator's three and the latency."""
    jobs = rep.result.jobs.assign(latency_s=rep.latency_s)
    jobs = jobs[jobs["queueing_delay_s"].notna()]
    if span is not None:
        t = pd.to_datetime(jobs["submitted"])
        jobs = jobs[(t >= span[0]) & (t < span[1])]
    return {"fair_share": float(jobs["delay_fair_share_s"].sum()),
            "fragmentation": float(jobs["delay_fragmentation_s"].sum()),
            "backoff": float(jobs["delay_backoff_s"].sum()), "latency": float(jobs["latency_s"].sum())}


def preemption_figures(rep: Replay, span: tuple | None = None) -> dict:
    """Attempts ended by a reclaim (job preempted) among jobs submitted in ``span``: count, share, GPU-hours lost.

    Lost GPU-hours are the preempted attempts' GPU time when the reclaim loses
    progress; with ``reclaim_keeps_progress`` nothing is lost but the wait.
    """
    att, jobs = rep.result.attempts, rep.result.jobs
    if span is not None:
        t = pd.to_datetime(jobs["submitted"])
        att = att[att["jobid"].isin(jobs.loc[(t >= span[0]) & (t < span[1]), "jobid"])]
    pre = att[att["outcome"] == "preempted"]
    held = float(((pre["end_s"] - pre["start_s"]) * pre["num_gpus"]).sum() / 3600.0)
    return {"count": int(len(pre)), "attempts": int(len(att)),
            "share_of_attempts": float(len(pre) / len(att)) if len(att) else float("nan"),
            "jobs_preempted": int(pre["jobid"].nunique()),
            "gpu_hours_lost": 0.0 if rep.params.reclaim_keeps_progress else held,
            "attempts_per_job": float(len(att) / att["jobid"].nunique()) if len(att) else float("nan")}



def daily_long_waits(rep: Replay, real_waits: pd.DataFrame, occupancy: pd.DataFrame, span: tuple,
                     long_s: float = 1000.0, min_records: int = 10) -> pd.DataFrame:
    """Per day of ``span`` (days with ``min_records``): the share of real first waits over ``long_s``, of the same
    jobs' waits in the replay, and the real share of servers with a job."""
    pairs = in_span(paired_delays(rep, real_waits), span)
    day = pd.to_datetime(pairs["submitted"]).dt.floor("D")
    table = pairs.assign(day=day, real_long=pairs["real_s"] > long_s, simulated_long=pairs["simulated_s"] > long_s) \
        .groupby("day").agg(records=("jobid", "size"), real_long_share=("real_long", "mean"),
                            simulated_long_share=("simulated_long", "mean"))
    busy = real_occupancy(occupancy, "1D")
    table["real_busy_share"] = busy.reindex(table.index).to_numpy()
    return table[table["records"] >= min_records]
