"""Why jobs waited: each wait split into fair-share, fragmentation and other delay (paper section 3.1, Table 2).

:func:`attribute_waits` replays the cluster from the trace itself
(:mod:`.timeline`) and splits each wait; :func:`causes_by_bucket` turns that
(or a simulator's ground truth) into Table 2.

Attribution rule (documented here because Table 2 depends on it). At each
instant of a wait of a job of ``g`` GPUs in VC ``v``:

1. **fair-share** if fewer GPUs that VC ``v`` may use are free than ``g``: its
   quota is used up (``usage(v) + g > quota(v)``), or the whole cluster has
   fewer than ``g`` free GPUs (its quota is held by others). With
   ``lending=True`` a VC may borrow idle GPUs beyond its quota (as the
   simulator's default does), so only the second condition applies;
2. else **fragmentation** if no placement meets the locality requirement
   (the tightest placement the job's size allows on this cluster). Two rules:

   * ``"fewest_servers"`` (default; the trace names no racks): the job must fit
     on ``m = ceil(g / S)`` servers, ``S`` the largest server size (8 on
     Philly). The best ``m`` servers hold ``sum_k min(N_k, m)`` free GPUs,
     ``N_k`` being the number of servers with at least ``k`` free GPUs;
     locality is met when that is ``>= g``. For ``g <= 8``: one server with
     ``g`` free GPUs; ``g = 16``: two whole free 8-GPU servers; ``g = 12``: two
     servers with 12 free GPUs between them.
   * ``"rack"`` (given a server -> rack map, e.g. the simulator's topology):
     one server with ``g`` free GPUs if ``g <= S``; else one rack with ``g``
     free GPUs if some rack is that large; else ``g`` free GPUs anywhere.
3. else **other**: quota and a local placement were both available, yet the job
   waited (scheduler back-off before relaxing locality, queue order, anything
   the trace cannot see).

Fair-share is checked first, so a wait that was blocked by both counts as
fair-share. Time before the first event in the trace sees an empty cluster.

The simulator's Table 2 (:data:`SIM_CAUSE_COLUMNS`) has the same definition,
from its own state: fragmentation is the time its VC had the GPUs (within
quota, or lent), its user limit admitted it and its pool had them free (YARN's
headroom) while no placement met the locality it asked for then (its back-off
towards relaxing locality included, as in the paper); the time a back-off timer
alone held a job, which no pass tried, is other. The replay's relax timer runs
only in that time (``relax_clock="headroom"``, :mod:`dlcluster.sim.causes`), so a
stretch that ends at the timeout is time with headroom and no local placement.
:func:`fragmentation_endings` says how that fragmentation ended: at the relax
timeout, at a placement freeing up, or with the GPUs gone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.schema import SIZE_BUCKETS, size_bucket
from .delays import bucket_label, format_seconds, reason_counts, require_columns
from .timeline import ClusterTimeline, build_cluster_timeline, time_where

CAUSES = ("fair_share", "fragmentation", "other")
#: How a stretch of fragmentation ended -> the simulator's per-job column (:mod:`dlcluster.sim.results`).
LOCALITY_END_COLUMNS = {"relaxed": "locality_relaxed_s", "placed": "locality_placed_s",
                        "contended": "locality_contended_s"}
#: The simulator's per-job columns as Table 2 causes (module docstring): fragmentation is every stretch in which
#: no placement met the job's locality while its VC had the GPUs, however it ended; a back-off timer alone is other.
SIM_CAUSE_COLUMNS = {"fair_share": "delay_fair_share_s",
                     "fragmentation": list(LOCALITY_END_COLUMNS.values()),
                     "other": "held_by_timer_s"}


def _quota_map(quotas) -> dict:
    if isinstance(quotas, pd.DataFrame):
        require_columns(quotas, ["vc", "gpus"], "quotas")
        return dict(zip(quotas["vc"], quotas["gpus"].astype(float), strict=True))
    return {k: float(v) for k, v in dict(quotas).items()}


@dataclass(frozen=True)
class Attribution:
    """Each wait split into seconds of fair-share, fragmentation and other delay."""

    table: pd.DataFrame
    dropped: pd.Series
    timeline: ClusterTimeline


def attribute_waits(waits: pd.DataFrame, jobs: pd.DataFrame, attempts: pd.DataFrame,
                    placements: pd.DataFrame, machines: pd.DataFrame, quotas,
                    locality: str = "fewest_servers", racks: pd.Series | dict | None = None,
                    lending: bool = False) -> Attribution:
    """Split every wait into fair-share / fragmentation / other time (rules: module docstring).

    ``quotas`` maps VC -> GPUs (a dict, or a DataFrame with ``vc`` and ``gpus``
    such as ``trace.vc_quotas``). Without lending, waits of VCs without a quota
    cannot be judged for fair-share and are left out, counted in ``dropped``.
    ``locality`` is ``"fewest_servers"`` or ``"rack"`` (which needs ``racks``:
    server -> rack). ``lending``: VCs may borrow idle GPUs beyond their quota.
    """
    if locality not in ("fewest_servers", "rack"):
        raise ValueError(f"locality must be 'fewest_servers' or 'rack', got {locality!r}")
    if locality == "rack" and racks is None:
        raise ValueError("locality='rack' needs racks (a server -> rack mapping)")
    quota = _quota_map(quotas)
    has_quota = waits["vc"].isin(list(quota)) | lending
    dropped = reason_counts({"VC has no quota": int((~has_quota).sum())})
    w = waits.loc[has_quota].copy()
    origin = float(w["wait_begin"].min()) if len(w) else None
    timeline = build_cluster_timeline(jobs, attempts, placements, machines, origin=origin, racks=racks)

    fair = np.zeros(len(w))
    frag = np.zeros(len(w))
    begin = w["wait_begin"].to_numpy()
    end = w["wait_end"].to_numpy()
    total_free = timeline.servers_with_free.sum(axis=0)
    fits_cache: dict[int, np.ndarray] = {}
    for (vc, gpus), pos in w.groupby(["vc", "num_gpus"], sort=True).indices.items():
        gpus = int(gpus)
        if gpus not in fits_cache:
            fits_cache[gpus] = timeline.local_placement_exists(gpus, locality)
        no_gpus_for_vc = total_free < gpus
        if not lending:
            no_gpus_for_vc |= timeline.usage_of(vc) + gpus > quota[vc]
        no_local_placement = ~no_gpus_for_vc & ~fits_cache[gpus]
        fair[pos] = time_where(timeline.times, no_gpus_for_vc, begin[pos], end[pos])
        frag[pos] = time_where(timeline.times, no_local_placement, begin[pos], end[pos])
    w["fair_share_s"] = fair
    w["fragmentation_s"] = frag
    w["other_s"] = np.clip(w["delay_s"].to_numpy() - fair - frag, 0.0, None)
    return Attribution(table=w.reset_index(drop=True), dropped=dropped, timeline=timeline)


def time_over_quota(timeline: ClusterTimeline, quotas) -> pd.DataFrame:
    """Per VC: quota, peak GPUs held, and the share of time it held more than its quota.

    Time runs from the timeline's first to its last event. A VC that often
    holds more than its quota shows that the cluster lent idle GPUs beyond
    quotas, i.e. that ``lending=True`` describes it better.
    """
    quota = _quota_map(quotas)
    seg_len = np.diff(timeline.times)
    span = float(seg_len.sum())
    rows = []
    for v, vc in enumerate(timeline.vcs):
        usage = timeline.vc_usage[v]
        q = quota.get(vc, np.nan)
        over = float((seg_len * (usage[:-1] > q)).sum() / span) if span > 0 and np.isfinite(q) else np.nan
        rows.append({"vc": vc, "quota_gpus": q, "peak_gpus": int(usage.max()), "time_over_quota": over})
    return pd.DataFrame(rows).set_index("vc")


#: A share of waiting time must move by at least this much (1 percentage point, the precision the sentence shows)
#: between the smallest and the largest jobs before the finding names a direction.
MATERIAL_SHARE = 0.01
#: Bootstrap resamples of each cause's share of a bucket's waiting time (over the rows that waited).
SHARE_RESAMPLES = 999


def _share_interval(cause_s: np.ndarray, total_s: np.ndarray) -> tuple[float, float]:
    """95% percentile bootstrap (scipy, over the rows that waited) of sum(cause) / sum(total)."""
    from scipy import stats

    if len(total_s) < 2 or np.ptp(cause_s / total_s) == 0:
        share = float(cause_s.sum() / total_s.sum())
        return share, share
    res = stats.bootstrap((cause_s, total_s), lambda c, t, axis=-1: c.sum(axis=axis) / t.sum(axis=axis),
                          paired=True, vectorized=True, method="percentile", n_resamples=SHARE_RESAMPLES,
                          batch=100, rng=np.random.default_rng(0))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def causes_by_bucket(table: pd.DataFrame, cause_columns: dict[str, str | list[str]] | None = None) -> pd.DataFrame:
    """Table 2: per size bucket, waiting time and each cause's part of it, measured two ways.

    ``table`` has ``bucket`` (or ``num_gpus``) and seconds columns per cause;
    ``cause_columns`` maps cause name -> column, or list of columns to add up
    (default the columns written by :func:`attribute_waits`), so a simulator's
    ground truth goes through the same code. Columns per bucket: ``waits``
    (rows: waits, or jobs), ``waited`` (rows with any waiting time), ``wait_h``, and per cause:

    * ``<cause>_share``: the cause's **share of all waiting seconds** in the bucket (with ``_share_low`` /
      ``_share_high``, its 95% bootstrap interval over the rows that waited). A few long waits weigh the most.
    * ``<cause>_frequency``: the **share of the rows that waited** in which the cause is the largest part of the
      wait (so the frequencies of a bucket add up to 1), and ``<cause>_median_wait_s`` the median wait of those
      rows. Every waiting job counts once, however long it waited.

    The two answer different questions and can disagree: many jobs that wait minutes for a local placement make
    fragmentation the commoner cause by count, while a few jobs that wait days for a quota make fair-share hold
    most of the seconds.
    """
    cause_columns = cause_columns or {c: f"{c}_s" for c in CAUSES}
    cause_columns = {c: [cols] if isinstance(cols, str) else list(cols) for c, cols in cause_columns.items()}
    df = table.copy()
    if "bucket" not in df.columns:
        df["bucket"] = size_bucket(df["num_gpus"])
    require_columns(df, [col for cols in cause_columns.values() for col in cols], "cause table")
    seconds = pd.DataFrame({c: df[cols].astype(float).sum(axis=1) for c, cols in cause_columns.items()})
    total = seconds.sum(axis=1)
    dominant = seconds.idxmax(axis=1).where(total > 0)
    rows = []
    for bucket in SIZE_BUCKETS:
        in_bucket = (df["bucket"] == bucket).to_numpy()
        if not in_bucket.any():
            continue
        sec = seconds[in_bucket].sum()
        bucket_total = float(sec.sum())
        waited = in_bucket & (total > 0).to_numpy()
        row = {"bucket": bucket, "waits": int(in_bucket.sum()), "waited": int(waited.sum()),
               "wait_h": bucket_total / 3600.0}
        for cause in cause_columns:
            row[f"{cause}_share"] = float(sec[cause] / bucket_total) if bucket_total > 0 else np.nan
            low, high = (_share_interval(seconds.loc[waited, cause].to_numpy(float), total[waited].to_numpy(float))
                         if bucket_total > 0 else (np.nan, np.nan))
            row[f"{cause}_share_low"], row[f"{cause}_share_high"] = low, high
        for cause in cause_columns:
            mine = waited & (dominant == cause).to_numpy()
            row[f"{cause}_frequency"] = float(mine.sum() / waited.sum()) if waited.any() else np.nan
            row[f"{cause}_median_wait_s"] = float(np.median(total[mine])) if mine.any() else np.nan
        rows.append(row)
    return pd.DataFrame(rows).set_index("bucket")


#: What ended each stretch of fragmentation, in words.
LOCALITY_ENDS = {"relaxed": "at the relax timeout", "placed": "by a placement freeing up",
                 "contended": "with the GPUs gone (fair-share)"}


def fragmentation_endings(table: pd.DataFrame, end_columns: dict[str, str] | None = None) -> pd.DataFrame:
    """Per size bucket: the fragmentation delay and how its stretches ended.

    ``table`` has ``bucket`` (or ``num_gpus``) and one seconds column per ending (default the simulator's,
    :data:`LOCALITY_END_COLUMNS`). Columns: ``rows`` and ``fragmented`` (rows with any fragmentation),
    ``fragmentation_h``, ``median_fragmentation_s`` (per fragmented row), and per ending ``<end>_h`` (its total),
    ``<end>_share`` (of the fragmentation seconds; NaN without any), ``<end>_jobs`` (rows with that ending) and
    ``<end>_median_s`` (median per row that has that ending; NaN when none has). Every bucket's fragmentation
    ending at the timeout is the relax timer, not a placement: read with :func:`fragmentation_endings_finding`.
    """
    end_columns = end_columns or LOCALITY_END_COLUMNS
    df = table.copy()
    if "bucket" not in df.columns:
        df["bucket"] = size_bucket(df["num_gpus"])
    require_columns(df, list(end_columns.values()), "fragmentation table")
    seconds = pd.DataFrame({end: df[col].astype(float) for end, col in end_columns.items()})
    total = seconds.sum(axis=1)
    rows = []
    for bucket in SIZE_BUCKETS:
        mine = (df["bucket"] == bucket).to_numpy()
        if not mine.any():
            continue
        hit = mine & (total > 0).to_numpy()
        frag = float(total[mine].sum())
        row = {"bucket": bucket, "rows": int(mine.sum()), "fragmented": int(hit.sum()), "fragmentation_h": frag / 3600,
               "median_fragmentation_s": float(np.median(total[hit])) if hit.any() else np.nan}
        for end in end_columns:
            part = seconds.loc[mine, end]
            row[f"{end}_h"] = float(part.sum()) / 3600
            row[f"{end}_share"] = float(part.sum() / frag) if frag > 0 else np.nan
            row[f"{end}_jobs"] = int((part > 0).sum())
            row[f"{end}_median_s"] = float(part[part > 0].median()) if (part > 0).any() else np.nan
        rows.append(row)
    return pd.DataFrame(rows).set_index("bucket")


#: Fragmentation is called the relax timer's when at least this share of its seconds ended at the timeout.
TIMER_DOMINATES = 0.5


def fragmentation_endings_finding(endings: pd.DataFrame, relax_after_s: float | None = None) -> str:
    """One sentence: per bucket, how much of the fragmentation delay ended at the relax timeout and how much at a
    placement freeing up; and whether that makes the fragmentation the timer's (a property of the model, not a finding
    about the cluster) or the placements'."""
    have = endings[endings["fragmentation_h"] > 0]
    if have.empty:
        return "No fragmentation delay: no job waited while its VC had the GPUs but no placement met its locality."
    ends = [e for e in LOCALITY_ENDS if f"{e}_share" in have.columns]
    listed = "; ".join(f"{bucket_label(b)}: {format_seconds(3600 * r['fragmentation_h'])} over "
                       f"{int(r['fragmented']):,} jobs, " + ", ".join(f"{_pct(r[f'{e}_share'])} {LOCALITY_ENDS[e]}"
                                                                       for e in ends)
                       for b, r in have.iterrows())
    timed = float((have["relaxed_share"] * have["fragmentation_h"]).sum() / have["fragmentation_h"].sum()) \
        if "relaxed_share" in have.columns else 0.0
    timer = f" ({format_seconds(relax_after_s)})" if relax_after_s else ""
    if timed >= TIMER_DOMINATES:
        verdict = (f"overall {_pct(timed)} of it ended at the relax timeout{timer}: this fragmentation is mostly the "
                   "relax timer the replay's placement runs into (by construction of the model), not time spent "
                   "waiting for a local placement to free up, so it is not a finding about Philly")
    else:
        verdict = (f"overall {_pct(timed)} of it ended at the relax timeout{timer}; the rest ended with the cluster's "
                   "state (a placement freeing up, or the GPUs taken): fragmentation from the mechanism")
    return f"How the fragmentation delay ended, by job size ({listed}): {verdict}."


def table2_finding(table: pd.DataFrame) -> str:
    """One sentence: how fragmentation's share of waiting time changes with job size.

    A direction (it grows, it is larger for the largest jobs) is named only when the largest bucket's share is at
    least :data:`MATERIAL_SHARE` above the smallest's and, where the table has them, their 95% intervals do not
    overlap; otherwise the sentence says there is no such difference.
    """
    shares = table["fragmentation_share"].dropna()
    if shares.empty:
        return "No waiting time to attribute."
    listed = ", ".join(f"{_pct(s)} ({bucket_label(b)})" for b, s in shares.items())
    first, last = shares.index[0], shares.index[-1]
    separated = True
    if {"fragmentation_share_low", "fragmentation_share_high"} <= set(table.columns):
        separated = bool(table.loc[last, "fragmentation_share_low"] > table.loc[first, "fragmentation_share_high"])
    material = shares.iloc[-1] - shares.iloc[0] >= MATERIAL_SHARE
    if len(shares) == 1:
        trend = "only one size bucket has waiting time"
    elif material and separated and shares.is_monotonic_increasing:
        trend = "it grows with job size"
    elif material and separated:
        trend = "it is larger for the largest jobs than for the smallest, but not steadily"
    elif shares.iloc[-1] > shares.iloc[0] and not material:
        trend = (f"the largest jobs' share is not larger than the smallest's by {MATERIAL_SHARE:.0%} of the waiting "
                 "time or more, so it does not grow with job size")
    elif shares.iloc[-1] > shares.iloc[0]:
        trend = "no significant difference between the smallest and the largest jobs (95% intervals overlap)"
    else:
        trend = "it does not grow with job size"
    causes = table.loc[last, [f"{c}_share" for c in CAUSES if f"{c}_share" in table.columns]]
    top = causes.idxmax().removesuffix("_share").replace("_", "-")
    return (f"Fragmentation's share of waiting time is {listed}: {trend}; "
            f"for {last}-GPU jobs the largest cause is {top} ({_pct(causes.max())}).")


def table2_frequency_finding(table: pd.DataFrame) -> str:
    """One sentence per bucket of the other measure: of the jobs (or waits) that waited, in how many each cause was
    the largest part, and how long those waited (median)."""
    causes = [c.removesuffix("_frequency") for c in table.columns if c.endswith("_frequency")]
    parts = []
    for bucket, row in table.iterrows():
        if not row.get("waited", 0):
            continue
        listed = ", ".join(f"{c.replace('_', '-')} {row[f'{c}_frequency']:.0%}"
                           + (f" (median wait {format_seconds(row[f'{c}_median_wait_s'])})"
                              if np.isfinite(row[f"{c}_median_wait_s"]) else "")
                           for c in causes if row[f"{c}_frequency"] > 0)
        parts.append(f"{bucket_label(bucket)}: of {int(row['waited']):,} that waited, {listed}")
    return "By count, the largest cause of each wait: " + "; ".join(parts) + "." if parts else \
        "By count: no row waited."


def _pct(share: float) -> str:
    """A share with the precision it needs: whole percent, or two significant digits below 1%."""
    if not np.isfinite(share):
        return "n/a"
    if share == 0 or share >= 0.01:
        return f"{share:.0%}"
    return f"{100 * share:.2g}%"


CAUSE_COLORS = {"fair_share": "#DD8452", "fragmentation": "#C44E52", "other": "#8C8C8C"}


#: What each measure of Table 2 is, for axes and captions.
MEASURES = {"share": ("share of waiting time (seconds)", "waits"),
            "frequency": ("share of the jobs that waited, by largest cause", "waited")}


def plot_causes(table: pd.DataFrame, ax, title: str = "", measure: str = "share") -> None:
    """Table 2 as stacked bars per size bucket: each cause's share of the waiting seconds (``measure="share"``) or
    of the rows that waited, by the largest part of their wait (``"frequency"``)."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {sorted(MEASURES)}, got {measure!r}")
    causes = [c for c in CAUSE_COLORS if f"{c}_{measure}" in table.columns]
    left = np.zeros(len(table))
    count = MEASURES[measure][1]
    counts = table[count] if count in table.columns else table["waits"]
    labels = [f"{b} GPU\n({n:,} {'waited' if count == 'waited' else 'waits'})"
              for b, n in zip(table.index, counts, strict=True)]
    for cause in causes:
        share = table[f"{cause}_{measure}"].fillna(0).to_numpy()
        ax.barh(labels, share, left=left, color=CAUSE_COLORS[cause], label=cause.replace("_", "-"))
        for y, (x0, w) in enumerate(zip(left, share, strict=True)):
            if w >= 0.06:
                ax.text(x0 + w / 2, y, f"{w:.0%}", ha="center", va="center", color="white", fontsize=8)
        left += share
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel(MEASURES[measure][0])
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=len(causes), frameon=False)


def share_agreement(estimate: pd.DataFrame, truth: pd.DataFrame, causes=("fair_share", "fragmentation", "other")
                    ) -> pd.DataFrame:
    """Per size bucket: each cause's share in two Table 2s, and how far apart they are.

    ``agreement`` is 1 minus the total-variation distance between the two
    splits (1 = identical split of the waiting time, 0 = disjoint); NaN where
    either table has no waiting time in the bucket. A cause missing from one
    table counts as a share of 0 there.
    """
    buckets = [b for b in SIZE_BUCKETS if b in estimate.index and b in truth.index]
    rows = []
    for b in buckets:
        row = {"bucket": b}
        distance = 0.0
        judged = estimate.loc[b, "wait_h"] > 0 and truth.loc[b, "wait_h"] > 0
        for c in causes:
            est = float(estimate.loc[b].get(f"{c}_share", 0.0)) if judged else np.nan
            tru = float(truth.loc[b].get(f"{c}_share", 0.0)) if judged else np.nan
            row[f"{c}_estimate"], row[f"{c}_truth"] = est, tru
            distance += abs(est - tru)
        row["agreement"] = 1.0 - distance / 2.0
        rows.append(row)
    return pd.DataFrame(rows).set_index("bucket")


def per_job_agreement(attributed: pd.DataFrame, truth: pd.DataFrame,
                      cause_columns: dict[str, str | list[str]] = None) -> float:
    """Share of all waiting seconds put under the same cause, job by job, in two attributions.

    ``attributed`` has one row per wait (``jobid`` and the ``<cause>_s``
    columns of :func:`attribute_waits`); ``truth`` one row per job (``jobid``
    and the columns named by ``cause_columns``, default the simulator's).
    Per job and cause the smaller of the two amounts matches; the result is
    the matched seconds over the larger of the two totals (1 = identical).
    """
    cause_columns = cause_columns or SIM_CAUSE_COLUMNS
    est = attributed.groupby("jobid")[[f"{c}_s" for c in CAUSES]].sum()
    est.columns = list(CAUSES)
    tru = pd.DataFrame({c: truth[[cols] if isinstance(cols, str) else list(cols)].astype(float).sum(axis=1)
                        for c, cols in cause_columns.items()})
    tru.index = truth["jobid"].to_numpy()
    tru = tru.reindex(columns=list(CAUSES), fill_value=0.0)
    est, tru = est.align(tru, join="outer", fill_value=0.0)
    total = max(float(est.to_numpy().sum()), float(tru.to_numpy().sum()))
    return float(np.minimum(est.to_numpy(), tru.to_numpy()).sum() / total) if total > 0 else np.nan
