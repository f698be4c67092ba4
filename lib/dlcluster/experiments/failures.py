"""Experiment 3, failure handling: retry everything vs class-aware retries vs a 1-GPU pre-run."""

from __future__ import annotations

import functools
import textwrap

import numpy as np
import pandas as pd

from ..sim.failures import FailureModel, default_failure_model
from .common import cached_trace, format_seconds, paired_change, rows_of, summarize
from .plots import load_colors

RETRY_NAMES = {"none": "no failures (baseline)", "philly": "retry everything (Philly)",
               "adaptive": "class-aware retries", "prerun": "1-GPU pre-run + class-aware"}


FAILURE_MODEL_NAMES = {"fitted": "fitted to the public data", "illustrative": "illustrative (simulator default)"}


@functools.lru_cache(maxsize=2)
def fitted_failure_spec(trace: str = "public") -> dict:
    """The failure model of notebook 04: fitted from the trace's failed attempts and the classified log corpus.

    With the public data, P(failure) and the runtimes to failure come from the
    5,910 DRE records (multi-GPU jobs that ran at least 5 minutes: no RTF is
    shorter than 5 minutes) and the class shares from the corpus composition
    (by construction, not a frequency). ``notes`` says so.
    """
    from ..analysis import failures as F
    from ..analysis.classify import classify_dir, load_rules
    from ..paths import data_dir

    logs_dir = data_dir() / "failure_logs"
    logs = classify_dir(logs_dir, load_rules())
    index = pd.read_csv(logs_dir / "index.csv", dtype=str).rename(columns={"category": "true_category"})
    logs = logs.merge(index, on="log_file", how="left", validate="one_to_one")
    tr = cached_trace(trace)
    mapped, _ = F.map_logs_to_trace(logs, tr.jobs, tr.attempts)
    outcomes, _ = F.attempt_outcomes(tr.jobs, tr.attempts)
    return F.fit_failure_model(mapped, outcomes, tr.jobs,
                               share_source="log corpus composition (by construction, NOT a measured frequency)")


def failure_model(name: str, trace: str = "public") -> FailureModel:
    if name == "fitted":
        return FailureModel.from_dict(fitted_failure_spec(trace))
    if name == "illustrative":
        return default_failure_model()
    raise ValueError(f"failure_model must be one of {sorted(FAILURE_MODEL_NAMES)}, got {name!r}")


def failure_costs(table: pd.DataFrame) -> pd.DataFrame:
    """Experiment 3 per (failure model, load, retry policy): GPU time lost and delay added to good jobs.

    ``wasted_share`` / ``prerun_share``: GPU-hours of failed attempts / of
    pre-runs as a share of all GPU-hours of the run (mean and CI over seeds);
    ``good_jct_added_s``: the change in mean JCT of the jobs the failure model
    does not hit (the same jobs in every arm), against the run without
    failures of the same seed (paired).
    """
    allj = rows_of(table, "failures").query("bucket == 'all'").copy()
    allj["wasted_share"] = allj["wasted_gpu_hours"] / allj["gpu_hours"]
    allj["prerun_share"] = allj["prerun_gpu_hours"] / allj["gpu_hours"]
    keys = ["failure_model", "load_label"]
    shares = summarize(allj[allj["retry"] != "none"], [*keys, "arm"], ["wasted_share", "prerun_share"])
    shares = shares.pivot_table(index=[*keys, "arm"], columns="metric", values=["mean", "ci_low", "ci_high"],
                                sort=False)
    shares.columns = [f"{m}_{stat}" for stat, m in shares.columns]
    good = rows_of(table, "failures", "good jobs").query("bucket == 'all'")
    added = paired_change(good, "retry", "none", "jct_mean_s", keys).rename(
        columns={"retry": "arm", "mean": "good_jct_added_s", "ci_low": "good_jct_added_ci_low",
                 "ci_high": "good_jct_added_ci_high"})
    added["arm"] = added["arm"].map(RETRY_NAMES)
    return shares.reset_index().merge(added.drop(columns="n"), on=[*keys, "arm"], how="left")


def failures_conclusion(costs: pd.DataFrame, main_load: str) -> str:
    """One sentence per failure model at ``main_load``: GPU time wasted and good jobs' delay per retry policy."""
    parts = []
    for model, rows in costs[costs["load_label"] == main_load].groupby("failure_model", sort=False):
        listed = []
        for row in rows.itertuples():
            prerun = f" (+{100 * row.prerun_share_mean:.1f}% on pre-runs)" if row.prerun_share_mean > 0 else ""
            added = f"{'+' if row.good_jct_added_s >= 0 else '−'}{format_seconds(abs(row.good_jct_added_s))}"
            if np.isfinite(row.good_jct_added_ci_low):
                added += (f" [95% CI {format_seconds(row.good_jct_added_ci_low)}, "
                          f"{format_seconds(row.good_jct_added_ci_high)}]").replace("-", "−")
            listed.append(f"{row.arm}: {100 * row.wasted_share_mean:.1f}% of GPU-hours on failed attempts{prerun}, "
                          f"mean JCT of never-failing jobs {added}")
        named = {"fitted": "the failure model fitted to the public data",
                 "illustrative": "the simulator's illustrative failure model"}.get(model, f"failure model {model}")
        parts.append(f"with {named}, " + "; ".join(listed))
    return (f"At {main_load}, " + "; ".join(parts)
            + " (JCT changes against the same seed's run without failures).")


def plot_failures(costs: pd.DataFrame, loads: list[str]):
    """Per failure model: GPU time lost to failures and pre-runs, and good jobs' added JCT, per retry policy."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(costs["failure_model"]))
    arms = [RETRY_NAMES[r] for r in ("philly", "adaptive", "prerun") if RETRY_NAMES[r] in set(costs["arm"])]
    colors = load_colors(loads)
    fig, axes = plt.subplots(len(models), 2, figsize=(12, 3.4 * len(models) + 0.8), squeeze=False)
    width = 0.8 / max(len(loads), 1)
    for r, model in enumerate(models):
        part = costs[costs["failure_model"] == model]
        for k, load in enumerate(loads):
            rows = part[part["load_label"] == load].set_index("arm").reindex(arms)
            xs = np.arange(len(arms)) - 0.4 + width * (k + 0.5)
            wasted, prerun = 100 * rows["wasted_share_mean"].to_numpy(), 100 * rows["prerun_share_mean"].to_numpy()
            err = 100 * np.vstack([rows["wasted_share_mean"] - rows["wasted_share_ci_low"],
                                   rows["wasted_share_ci_high"] - rows["wasted_share_mean"]])
            axes[r][0].bar(xs, wasted, width, color=colors[load], label=load,
                           yerr=np.nan_to_num(err), capsize=2, ecolor="0.3")
            axes[r][0].bar(xs, prerun, width, bottom=wasted, color=colors[load], alpha=0.35, hatch="//")
            added = rows["good_jct_added_s"].to_numpy(float) / 60
            err = np.vstack([added - rows["good_jct_added_ci_low"] / 60, rows["good_jct_added_ci_high"] / 60 - added])
            axes[r][1].bar(xs, added, width, color=colors[load], yerr=np.nan_to_num(err), capsize=2, ecolor="0.3")
        axes[r][0].set_ylabel("% of all GPU-hours")
        axes[r][0].set_title(f"GPU time on failed attempts (hatched: pre-runs) · {FAILURE_MODEL_NAMES[model]}",
                             fontsize=9)
        axes[r][1].axhline(0, color="k", lw=0.8)
        axes[r][1].set_ylabel("minutes")
        axes[r][1].set_title(f"change in mean JCT of jobs that never fail vs no failures · "
                             f"{FAILURE_MODEL_NAMES[model]}", fontsize=9)
        axes[r][0].set_ylim(bottom=0)
        for ax in axes[r]:
            ax.set_xticks(range(len(arms)), [textwrap.fill(a, 18) for a in arms])
            ax.grid(False, axis="x")
            ax.grid(alpha=0.3, axis="y")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig
