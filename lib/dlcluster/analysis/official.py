"""Our figures held against the full trace's own: the official notebook's Figures 2-7, digitized.

The trace's authors drew Figures 2-7 from the **full trace** (:mod:`dlcluster.sources.official`). Each of our
curves is set beside the matching digitized curve, in the same units and definitions as the official code, and
given a distance and a verdict:

* KS: the largest vertical gap in CDF points (:func:`dlcluster.sources.official.curves.ks_distance`, which
  allows a steep stretch to sit anywhere within the line's width);
* ``reproduced`` when the KS is within the digitization's measured worst error plus the 5% sampling margin of
  our sample's size (``136 / sqrt(n)`` points, n = the jobs behind our sample: samples of one job are not
  independent), else ``differs`` by how much beyond that.

:func:`digitization` measures the digitizer's error on known CDFs drawn in the same style (the margin above).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..codeversion import cached_result
from ..report.plotting import mark_reference
from ..sources.official import accuracy, curves
from ..trace.schema import SIZE_BUCKETS, size_bucket

#: The known figures the digitization error is measured on (seeded, so the margin is the same on every run).
ROUND_TRIP = {"seed": 0, "count": 16}
OFFICIAL_COLOR = "0.15"


@dataclass(frozen=True)
class Digitization:
    """The digitizer's measured error (:func:`dlcluster.sources.official.accuracy.round_trip`)."""

    summary: dict

    @property
    def margin_pp(self) -> float:
        """What a verdict allows for the digitization: the worst error over every visible point of the known
        figures, lines touching each other included (the KS reads those points too)."""
        return float(max(self.summary["worst_error_pp"], self.summary["worst_error_pp_touching"]))


def digitization(seed: int = ROUND_TRIP["seed"], count: int = ROUND_TRIP["count"]) -> Digitization:
    """The round trip's summary, measured once per installation (~7 s; notebooks 00, 01 and 02 each ask): it depends
    on the digitizer's code and the installed packages (matplotlib draws the known figures), which key its cache."""
    summary = cached_result("official-digitization", {"seed": int(seed), "count": int(count)},
                            ["dlcluster.sources.official", __name__],
                            lambda: accuracy.round_trip(seed, count).summary())
    return Digitization(summary)


def compare(points: pd.DataFrame, sample, margin_pp: float, weights=None, n: float | None = None) -> dict:
    """One of our samples against one digitized official curve: KS, where, n, allowed, verdict and its text.

    ``n``: the independent units behind ``sample`` (jobs), for the sampling margin; default its length.
    """
    values = np.asarray(sample, dtype=float)
    n = float(len(values) if n is None else n)
    ks, at = curves.ks_distance(points, values, weights)
    outcome, allowed, text = curves.verdict(ks, n, margin_pp) if n > 0 else ("not comparable", np.nan,
                                                                              "no sample of ours")
    return {"ks": ks, "ks_at": at, "n": n, "allowed_pp": allowed, "verdict": outcome, "detail": text}


def weighted_quantile(values, weights, q: float) -> float:
    values, weights = np.asarray(values, float), np.asarray(weights, float)
    if len(values) == 0:
        return float("nan")
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, q * cum[-1])])


# --------------------------------------------------------------------------- Figure 2


def fig2_table(points: pd.DataFrame, job_sets: dict[str, pd.DataFrame], margin_pp: float) -> pd.DataFrame:
    """Figure 2, per size bucket and job set: our run times (``num_gpus``, ``run_time_min``) against the full
    trace's curve. Rows: bucket, job_set, n, median_min (ours), official_median_min, ks, allowed_pp, verdict,
    detail."""
    official = points[points["figure"] == 2]
    rows = []
    for bucket in SIZE_BUCKETS:
        curve = official[official["series"] == bucket]
        for name, jobs in job_sets.items():
            part = jobs.loc[size_bucket(jobs["num_gpus"].astype(float)).astype(str) == bucket, "run_time_min"]
            part = part[np.isfinite(part.to_numpy(dtype=float))]
            row = compare(curve, part, margin_pp)
            rows.append({"bucket": bucket, "job_set": name,
                         "median_min": float(np.median(part)) if len(part) else np.nan,
                         "official_median_min": curves.crossing(curve, 50.0), **row})
    return pd.DataFrame(rows)


def closest_job_set(table: pd.DataFrame) -> pd.DataFrame:
    """Per job set: the largest and the mean KS over the size buckets it has; the smallest largest first."""
    out = table.dropna(subset=["ks"]).groupby("job_set")["ks"].agg(["max", "mean", "count"])
    return out.rename(columns={"max": "worst_ks", "mean": "mean_ks", "count": "buckets"}).sort_values(
        ["worst_ks", "mean_ks"], kind="stable")


# --------------------------------------------------------------------------- Figure 3


def official_delay_summary(points: pd.DataFrame) -> pd.DataFrame:
    """Figure 3 per VC and size bucket, from the full trace's digitized curves: the delay (minutes) at the
    median and 90th percentile (NaN where the curve reaches them outside the axes or under another line)."""
    fig3 = points[points["figure"] == 3]
    rows = [{"vc": vc, "bucket": bucket, "median_min": curves.crossing(part, 50.0),
             "p90_min": curves.crossing(part, 90.0), "cdf_at_0.1_min": float(curves.visible(part)["cdf"].min())}
            for (vc, bucket), part in fig3.groupby(["panel", "series"], sort=True)]
    return pd.DataFrame(rows)


def fig3_table(points: pd.DataFrame, waits: pd.DataFrame, margin_pp: float) -> pd.DataFrame:
    """Figure 3 per VC and size bucket: our waits (``vc``, ``bucket``, ``wait_min``; zeros already dropped, as
    the official code drops them) against the full trace's curve, beside its median and p90."""
    fig3 = points[points["figure"] == 3]
    summary = official_delay_summary(points).set_index(["vc", "bucket"])
    rows = []
    for (vc, bucket), official_row in summary.iterrows():
        curve = fig3[(fig3["panel"] == vc) & (fig3["series"] == bucket)]
        ours = waits.loc[(waits["vc"] == vc) & (waits["bucket"] == bucket), "wait_min"].to_numpy(dtype=float)
        row = compare(curve, ours, margin_pp) if len(ours) else {
            "ks": np.nan, "ks_at": np.nan, "n": 0.0, "allowed_pp": np.nan, "verdict": "not comparable",
            "detail": "no job of ours in this VC and size" + (" (DRE holds no 1-GPU job)" if bucket == "1" else "")}
        rows.append({"vc": vc, "bucket": bucket, "official_median_min": official_row["median_min"],
                     "official_p90_min": official_row["p90_min"],
                     "median_min": float(np.median(ours)) if len(ours) else np.nan,
                     "p90_min": float(np.quantile(ours, 0.9)) if len(ours) else np.nan, **row})
    return pd.DataFrame(rows)


def requeue_bound(retried_share: float, max_attempts: int = 5) -> tuple[float, float]:
    """How far re-queue gaps can move a CDF of waits, in CDF points, when a share ``retried_share`` of jobs was
    retried (each retry adds one wait to the official curve, which our first waits lack).

    A curve that mixes first waits (weight 1) with re-queue gaps (weight w) is at most w / (1 + w) away from
    the first waits' curve, w between ``retried_share`` (one retry each) and ``(max_attempts - 1) *
    retried_share``. Returns (at least possible, at most possible) of that bound.
    """
    low = retried_share / (1 + retried_share)
    high = (max_attempts - 1) * retried_share / (1 + (max_attempts - 1) * retried_share)
    return 100 * low, 100 * high


# --------------------------------------------------------------------------- Figures 5-7


def util_comparison(points: pd.DataFrame, counts: pd.DataFrame, value: str, n_jobs: float,
                    margin_pp: float) -> dict:
    """One utilization curve: our value counts (``value``, ``samples``) against the digitized curve, with both
    means (ours from the samples, the official one from the curve: :func:`~.curves.mean_percent`)."""
    row = compare(points, counts[value], margin_pp, weights=counts["samples"], n=n_jobs)
    mean_ours = float(np.average(counts[value], weights=counts["samples"])) if len(counts) else np.nan
    low, high = curves.mean_bounds(points)
    return {"official_mean": curves.mean_percent(points), "official_mean_low": low, "official_mean_high": high,
            "mean": mean_ours, **row}


def table3_crosscheck(summary: pd.DataFrame, published: dict[str, float]) -> pd.DataFrame:
    """The paper's Table 3 (mean GPU utilization per job size, all statuses) beside the digitized Figure 5
    means per status: a mean over all statuses must lie between the statuses' means, whatever their weights.
    ``published``: job size ('1', '4', '16') -> the paper's value."""
    fig5 = summary[summary["figure"] == 5]
    rows = []
    for size, value in published.items():
        means = fig5[fig5["series"] == size].set_index("panel")["mean"]
        rows.append({"gpus": size, "published": value, **{f"official_{s}": means.get(s, np.nan) for s in
                                                          ("pass", "failed", "killed")},
                     "lowest": float(means.min()), "highest": float(means.max()),
                     "consistent": bool(means.min() - 1 <= value <= means.max() + 1)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- plots


def plot_official(ax, points: pd.DataFrame, label: str = "full trace (official figure, digitized)", **style):
    """The digitized full-trace curve: visible points as a line, points hidden under another line dotted."""
    part = points.sort_values("x", kind="stable")
    kwargs = {"color": OFFICIAL_COLOR, "lw": 2.2, "alpha": 0.55, **style}
    seen = part["flag"].isin(curves.VISIBLE)
    y = part["cdf"].where(seen)
    lines = ax.plot(part["x"], y, label=label, **kwargs)
    if (~seen).any():
        lines += ax.plot(part["x"], part["cdf"].where(~seen), ls=":", **{k: v for k, v in kwargs.items() if k != "ls"})
    mark_reference(lines)   # not data of ours: a panel with only these says so (plotting.no_data_title)


def plot_ours(ax, values, weights=None, label: str = "ours", **style):
    """Our sample's empirical CDF (percent) as a step line."""
    values = np.asarray(values, dtype=float)
    w = np.ones_like(values) if weights is None else np.asarray(weights, dtype=float)
    order = np.argsort(values, kind="stable")
    cdf = 100 * np.cumsum(w[order]) / w.sum() if len(values) else []
    ax.step(values[order], cdf, where="post", label=label, **style)


def minutes_axis(ax, label: str | None = None) -> None:
    """The official figures' time axis: log minutes, 0.1 to 10^4 (6 s to a week); ``label`` names it
    ('<label> (log scale)')."""
    ax.set_xscale("log")
    ax.set_xlim(0.1, 1e4)
    ax.set_xticks([0.1, 1, 10, 60, 1440, 1e4], ["0.1m", "1m", "10m", "1h", "1d", "6.9d"])
    ax.set_ylim(0, 100)
    if label is not None:
        ax.set_xlabel(f"{label} (log scale)")


# --------------------------------------------------------------------------- Figure 4


def _on_ranges(part: pd.DataFrame, ranges: pd.DataFrame, factor: float) -> np.ndarray:
    on = np.zeros(len(part), dtype=bool)
    waits = part["wait_min"].to_numpy()
    for servers, group in ranges.groupby("servers"):
        here = (part["num_servers"] == servers).to_numpy()
        for lo, hi in zip(group["delay_from"], group["delay_to"], strict=True):
            on |= here & (waits >= lo / factor) & (waits <= hi * factor)
    return on


def fig4_table(levels: pd.DataFrame, ranges: pd.DataFrame, ours: pd.DataFrame, factor: float = 1.05) -> pd.DataFrame:
    """Figure 4 per job size: the server counts of the full trace's markers and of our jobs (``bucket``,
    ``num_servers`` counted as the official code counts them, ``wait_min``), and the share of our jobs (waits
    above 0: a log axis shows no 0) that lie on the full trace's markers of their size, the covered delay
    ranges widened by ``factor``; for >8 GPU jobs also counting those under the 5-8 GPU markers drawn over
    them (where a circle can hide)."""
    rows = []
    for bucket in (">8", "5-8"):
        official_counts = sorted(levels.loc[levels["series"] == bucket, "servers"].astype(int))
        part = ours[(ours["bucket"] == bucket) & (ours["wait_min"] > 0)]
        on = _on_ranges(part, ranges[ranges["series"] == bucket], factor)
        if bucket == ">8":
            on |= _on_ranges(part, ranges[ranges["series"] == "5-8"], factor)
        off = part[~on]
        rows.append({"bucket": bucket, "official_server_counts": ", ".join(map(str, official_counts)),
                     "server_counts": ", ".join(map(str, sorted(part["num_servers"].astype(int).unique()))),
                     "jobs": len(part), "on_markers_share": float(on.mean()) if len(part) else np.nan,
                     "off_markers_at": ", ".join(f"{k}: {v}" for k, v in off["num_servers"].value_counts(sort=False)
                                                 .sort_index(kind="stable").items())})
    return pd.DataFrame(rows)


def plot_fig4_levels(ax, levels: pd.DataFrame, ranges: pd.DataFrame, bucket: str) -> None:
    """The delay ranges the full trace's markers cover at each server count (grey bars)."""
    mine = ranges[ranges["series"] == bucket]
    for i, row in enumerate(mine.itertuples()):
        ax.plot([row.delay_from, row.delay_to], [row.servers, row.servers], color=OFFICIAL_COLOR, lw=5, alpha=0.3,
                solid_capstyle="butt", label="full trace: delays its markers cover" if i == 0 else None)
