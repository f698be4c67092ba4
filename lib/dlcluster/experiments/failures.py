"""Experiment 3, failure handling: retry everything vs class-aware retries vs a 1-GPU pre-run."""

from __future__ import annotations

import functools
import textwrap

import numpy as np
import pandas as pd

from ..sim import make_policy
from ..sim.failures import RETRY_PRESETS, FailureModel, default_failure_model
from .common import (
    ArmCells,
    cached_trace,
    NEAR_ZERO_DURATION_S,
    difference_text,
    format_seconds,
    near_zero_reason,
    paired_change,
    percent_text,
    rows_of,
    summarize,
)
from .intervals import Interval, direction
from .kinds import ASSUMPTION, BY_CONSTRUCTION, tagged
from .plots import load_colors

RETRY_NAMES = {"none": "no failures (baseline)", "one-attempt": "no failures, one attempt per job (the arms' base)",
               "philly": "retry everything (Philly)",
               "adaptive": "class-aware retries", "prerun": "1-GPU pre-run + class-aware"}


def failures_arm(row) -> str:
    return RETRY_NAMES[row["retry"]]


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


def cells(spec, arms: ArmCells) -> None:
    """The failure arms: no failures (the baseline: notebook 05's replay), no failures with one attempt per job (the
    base every injected arm is compared with, :data:`ATTEMPT_SPLIT`) and each retry rule, under each failure model."""
    arms.add({"failure_model": list(spec.failure_models),
              "retry": ["none", "one-attempt", "philly", "adaptive", "prerun"]})


#: How the failure arms treat the calibrated replay's attempt split (ReplayParams.attempt_split: ~39% of jobs replayed
#: as an earlier attempt and a re-queue, :class:`dlcluster.sim.attempts.PlannedRetries`). The simulator takes one
#: failure model and one retry rule per run and the split rides on that machinery (planned failures under a rule that
#: keeps progress and retries once), so an arm's injected failures and its retry rule (which loses progress) replace
#: it. So that the arms differ only in their failures and retry rule, they are compared with the arm 'one-attempt' (no
#: failures, the split left out too); the arm 'none' stays notebook 05's replay, the split kept (the one cluster every
#: experiment's baseline is, tests/test_one_cluster.py).
ATTEMPT_SPLIT = ("every injected-failure arm replays each job as one attempt (the calibrated replay's attempt split "
                 "left out), and is compared with the arm without failures that does the same, so that the arms differ "
                 "only in the injected failures and the retry rule; the arm without failures that keeps the split is "
                 "notebook 05's replay")


def options(cell: dict, workload, philly: dict, slowdown) -> tuple[object, dict, object, dict]:
    """A failure arm: Philly as calibrated, the failure model's failures under the arm's retry rule, and the jobs the
    model leaves alone (``extras["good"]``). 'none' is the replay as calibrated (its attempt split kept); every other
    arm sets ``failures`` and ``retry`` (None in 'one-attempt'), which leaves the split out (:data:`ATTEMPT_SPLIT`)."""
    model = failure_model(cell["failure_model"], cell["trace"])
    retry = cell["retry"]
    out = {} if retry == "none" else {"failures": None, "retry": None}
    if retry not in ("none", "one-attempt"):
        if retry not in RETRY_PRESETS:
            raise ValueError(f"retry must be 'none' or one of {sorted(RETRY_PRESETS)}, got {retry!r}")
        out["failures"], out["retry"] = model, retry
    # jobs the model hits, drawn as the simulator draws them (the class draw comes first): the baseline
    # run knows them too, so 'good jobs' are the same jobs in every arm
    extras = {"good": model.draws(len(workload), 1, cell["seed"]).job_class < 0}
    return make_policy("philly", **philly), out, workload, extras


def earliest_rtf_s(model: FailureModel) -> float:
    """The shortest runtime to failure any class of ``model`` can draw (seconds): a pre-run shorter than this can
    catch no failure."""
    return float(min(c.rtf_from_uniform(np.array([1e-12]))[0] for c in model.classes))


def failure_costs(table: pd.DataFrame) -> pd.DataFrame:
    """Experiment 3 per (failure model, load, retry policy): GPU time lost, what failures did to the cluster's load
    and to the jobs they do not hit.

    ``wasted_share`` / ``prerun_share``: GPU-hours of failed attempts / of pre-runs as a share of all GPU-hours of
    the run; ``prerun_caught``: jobs whose failure struck during the 1-GPU pre-run (mean over seeds);
    ``gpu_hours_change``: all GPU-hours of the run against the same seed's run without failures (relative);
    ``good_jct_change`` / ``good_wait_change``: mean JCT / mean queueing delay of the jobs the failure model does not
    hit (the same jobs in every arm) against the same seed's run without failures (relative, paired by seed);
    ``good_wait_base``: that wait without failures, and ``good_wait_difference`` the paired difference in seconds.
    Each with its 95% interval (``_ci_low``, ``_ci_high``; :mod:`.intervals`). On a base under
    :data:`GOOD_WAIT_FLOOR_S` ``good_wait_change`` is NaN (no ratio) and ``good_wait_note`` says why; read the
    difference.
    """
    allj = rows_of(table, "failures").query("bucket == 'all'").copy()
    # the injected arms' base: one attempt per job like them, where the grid has it (ATTEMPT_SPLIT); else 'none'
    base_arm = "one-attempt" if (allj["retry"] == "one-attempt").any() else "none"
    allj = allj[allj["retry"] != ("none" if base_arm == "one-attempt" else "one-attempt")]
    allj["wasted_share"] = allj["wasted_gpu_hours"] / allj["gpu_hours"]
    allj["prerun_share"] = allj["prerun_gpu_hours"] / allj["gpu_hours"]
    keys = ["failure_model", "load_label"]
    shares = summarize(allj[allj["retry"] != base_arm], [*keys, "arm"],
                       ["wasted_share", "prerun_share", "prerun_caught_jobs", "failed_jobs"])
    shares = shares.pivot_table(index=[*keys, "arm"], columns="metric", values=["mean", "ci_low", "ci_high"],
                                sort=False)
    shares.columns = [f"{m}_{stat}" for stat, m in shares.columns]
    out = shares.reset_index()
    good = rows_of(table, "failures", "good jobs").query("bucket == 'all'")
    good = good[good["retry"] != ("none" if base_arm == "one-attempt" else "one-attempt")]
    for name, rows, metric in (("gpu_hours_change", allj, "gpu_hours"), ("good_jct_change", good, "jct_mean_s"),
                               ("good_wait_change", good, "queue_mean_s")):
        change = paired_change(rows, "retry", base_arm, metric, keys, relative=True).rename(
            columns={"retry": "arm", "mean": name, "ci_low": f"{name}_ci_low", "ci_high": f"{name}_ci_high",
                     "method": f"{name}_method", "detectable": f"{name}_detectable"})
        change["arm"] = change["arm"].map(RETRY_NAMES)
        out = out.merge(change.drop(columns=["n"]), on=[*keys, "arm"], how="left")
    # the never-failing jobs' wait without failures (the base of good_wait_change) and the paired difference, shown
    # instead of the ratio where that base is near zero (.common.near_zero_reason)
    base = summarize(good[good["retry"] == base_arm], keys, ["queue_mean_s"]).rename(columns={"mean": "good_wait_base"})
    out = out.merge(base[[*keys, "good_wait_base"]], on=keys, how="left")
    difference = paired_change(good, "retry", base_arm, "queue_mean_s", keys).rename(columns={
        "retry": "arm", "mean": "good_wait_difference", "ci_low": "good_wait_difference_ci_low",
        "ci_high": "good_wait_difference_ci_high"})
    difference["arm"] = difference["arm"].map(RETRY_NAMES)
    out = out.merge(difference[[*keys, "arm", "good_wait_difference", "good_wait_difference_ci_low",
                                "good_wait_difference_ci_high"]], on=[*keys, "arm"], how="left")
    # no ratio on a base under the floor: the table shows the difference (and why), as the sentence does
    out["good_wait_note"] = [good_wait_floor_reason(b) for b in out["good_wait_base"]]
    below = out["good_wait_note"] != ""
    out.loc[below, ["good_wait_change", "good_wait_change_ci_low", "good_wait_change_ci_high",
                    "good_wait_change_detectable"]] = np.nan
    return out


#: The never-failing jobs' mean wait without failures (the base of ``good_wait_change``) under which
#: :func:`failure_costs` gives no ratio, only the paired difference in seconds with its interval. It is the floor every
#: sentence uses for a duration (:data:`.common.NEAR_ZERO_DURATION_S`, a minute: a few times the scheduler latency
#: fitted on the real waits), so that the table and the sentence say the same: on a base that short, a wait that all
#: but vanishes reads "−100% [−100%, −100%]" (issue 48), a ratio of seconds that says nothing a difference does not.
GOOD_WAIT_FLOOR_S = NEAR_ZERO_DURATION_S


def good_wait_floor_reason(base: float) -> str:
    """Why the never-failing jobs' wait change on ``base`` (s) is a difference, not a ratio ('' above the floor)."""
    if np.isfinite(base) and base < GOOD_WAIT_FLOOR_S:
        return (f"a difference, not a ratio: the wait without failures ({format_seconds(base)}) is under "
                f"{format_seconds(GOOD_WAIT_FLOOR_S)}")
    return ""


def _interval(row, name: str) -> Interval:
    return Interval(getattr(row, name), getattr(row, f"{name}_ci_low"), getattr(row, f"{name}_ci_high"),
                    int(getattr(row, "seeds", 0)), str(getattr(row, f"{name}_method", "")))


#: Why the GPU time a retry policy wastes follows from the setup, per failure model (:func:`failures_conclusion`).
WASTE_KINDS = {
    "fitted": (BY_CONSTRUCTION, ("the failures are injected by the model on top of durations that already hold the "
                                "real failed attempts, and class-aware retries waste less because the classes' shares "
                                "are the log corpus's composition and every class draws its runtime to failure from "
                                "the same DRE failed attempts")),
    "illustrative": (ASSUMPTION, ("the failures are injected by the simulator's illustrative model, whose classes, "
                                 "shares and runtimes to failure are assumed")),
}
#: Why the jobs no failure hits wait less: the injected failures remove demand (:func:`failures_conclusion`).
REMOVED_DEMAND = ("the injected failures remove work from the cluster: a job the model hits fails each attempt after "
                  "its drawn runtime to failure and, once its retries are spent (or at once, for a class that is not "
                  "retried), stops before its recorded duration, which already held its real failed attempts; less "
                  "demand, shorter queues")
#: Why what failures do to the other jobs follows from the setup, where they did not measurably remove demand.
INJECTED = ("the failures are injected by the model, so what they do to the jobs they miss follows from the demand "
            "they add or remove, not from a scheduler's choice")


def failures_conclusion(costs: pd.DataFrame, main_load: str, seeds: int,
                        earliest_rtf: dict[str, float] | None = None, prerun_s: float | None = None) -> str:
    """Sentences per failure model at ``main_load``, each tagged by what it rests on (:mod:`.kinds`; none is a
    mechanism, so none is worded as a finding): GPU time wasted per retry policy (:data:`WASTE_KINDS`); what the
    failures did to the never-failing jobs (by construction: :data:`REMOVED_DEMAND`, measured in the same runs);
    what the pre-run caught, and why it could not catch more (``earliest_rtf``: the model's shortest runtime to
    failure, :func:`earliest_rtf_s`). Directions only where the interval over ``seeds`` excludes no change."""
    parts = []
    for model, rows in costs[costs["load_label"] == main_load].groupby("failure_model", sort=False):
        rows = rows.assign(seeds=seeds)
        named = {"fitted": "the failure model fitted to the public data",
                 "illustrative": "the simulator's illustrative failure model"}.get(model, f"failure model {model}")
        listed = []
        for row in rows.itertuples():
            prerun = "" if not row.prerun_share_mean > 0 else (
                f" (+{100 * row.prerun_share_mean:.1f}% on pre-runs, which caught {row.prerun_caught_jobs_mean:.1f} "
                "failing jobs)")
            listed.append(f"{row.arm}: {100 * row.wasted_share_mean:.1f}% of GPU-hours on failed attempts "
                          f"[95% CI {100 * row.wasted_share_ci_low:.1f}%, {100 * row.wasted_share_ci_high:.1f}%]"
                          f"{prerun}")
        kind, because = WASTE_KINDS.get(model, (ASSUMPTION, f"the failures are injected by failure model {model}"))
        text = tagged(kind, f"With {named}, " + "; ".join(listed) + ".", because)
        effects = []
        for row in rows.itertuples():
            jct, load, wait = (_interval(row, n) for n in ("good_jct_change", "gpu_hours_change", "good_wait_change"))
            effects.append(f"under {row.arm}, the GPU-hours of the run {_change_words(load)}, the mean wait of the "
                           f"never-failing jobs {_wait_words(row, wait)} and their mean JCT {_change_words(jct)}")
        loads = [_interval(r, "gpu_hours_change") for r in rows.itertuples()]
        waits = [_interval(r, "good_wait_change") for r in rows.itertuples()]
        removed = any(lo.below(0) for lo in loads) and any(w.below(0) for w in waits)
        text += " " + tagged(BY_CONSTRUCTION, "Against the same replay without failures: " + "; ".join(effects) + ".",
                             REMOVED_DEMAND if removed else INJECTED)
        if prerun_s and earliest_rtf and model in earliest_rtf:
            first = earliest_rtf[model]
            caught = float(rows["prerun_caught_jobs_mean"].fillna(0).sum())
            if first >= prerun_s and model == "fitted":
                text += " " + tagged(BY_CONSTRUCTION, (
                    f"Whether a pre-run pays **cannot be tested on public data**: the {format_seconds(prerun_s)} "
                    f"pre-run caught {caught:.1f} failing jobs here only because this model's shortest runtime to "
                    f"failure is {format_seconds(first)} (the DRE records hold only jobs that ran at least 5 "
                    "minutes), so it can only cost GPU time, and no public data show the early failures a pre-run is "
                    "meant to catch."), "the fitted runtimes to failure start no earlier than the pre-run ends")
            elif first >= prerun_s:
                text += " " + tagged(ASSUMPTION, (
                    f"The {format_seconds(prerun_s)} pre-run caught {caught:.1f} failing jobs: this model's shortest "
                    f"runtime to failure is {format_seconds(first)}, no shorter than the pre-run, so a pre-run can "
                    "only cost GPU time here."), "the failure model's runtimes to failure")
            else:
                text += " " + tagged(ASSUMPTION, (
                    f"The {format_seconds(prerun_s)} pre-run caught {caught:.1f} failing jobs (this model's runtimes "
                    f"to failure start at {format_seconds(first)})."), "the failure model's runtimes to failure")
        parts.append(text)
    return f"At {main_load}: " + " ".join(parts)


def _wait_words(row, change: Interval) -> str:
    """The never-failing jobs' wait change in words (:func:`_change_words`), or, on a base near zero
    (:func:`.common.near_zero_reason`), the paired difference in seconds."""
    reason = near_zero_reason(float(getattr(row, "good_wait_base", np.nan)), change, "queue_mean_s")
    if not reason:
        return _change_words(change)
    difference = Interval(float(getattr(row, "good_wait_difference", np.nan)),
                          float(getattr(row, "good_wait_difference_ci_low", np.nan)),
                          float(getattr(row, "good_wait_difference_ci_high", np.nan)), change.n, change.method)
    if not np.isfinite(difference.mean):
        return f"(no ratio: {reason})"
    interval = (f" [95% CI {difference_text(difference.low, 'queue_mean_s')}, "
                f"{difference_text(difference.high, 'queue_mean_s')}]" if difference.known else "")
    return (f"{difference_text(difference.mean, 'queue_mean_s')}{interval} ({direction(difference, 'higher', 'lower')}"
            f"; a difference, not a ratio: {reason})")


def _change_words(ci: Interval) -> str:
    """'−20% [95% CI −25%, −15%], lower', or '... : no significant difference at 7 blocks': a change stated, not
    claimed as a finding."""
    return f"{_ci_text(ci)} ({direction(ci, 'higher', 'lower')})"


def _ci_text(ci: Interval) -> str:
    return f"{percent_text(ci.mean)} [95% CI {percent_text(ci.low)}, {percent_text(ci.high)}]" if ci.known \
        else percent_text(ci.mean)


def plot_failures(costs: pd.DataFrame, loads: list[str]):
    """Per failure model: GPU time lost to failures and pre-runs, and the never-failing jobs' JCT change, per retry
    policy."""
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
            # failed attempts and pre-runs side by side (a pre-run's share is often a sliver of the failed attempts':
            # stacked, its hatch would not show); a pre-run bar is drawn at least 2% of the tallest bar high, so that
            # its hatch shows, with its value written above it
            half = width / 2
            axes[r][0].bar(xs - half / 2, wasted, half, color=colors[load], yerr=np.nan_to_num(err), capsize=2,
                           ecolor="0.3", label=f"failed attempts (95% CI), {load}")
            has_prerun = np.nan_to_num(prerun) > 0
            if has_prerun.any():
                axes[r][0].bar(xs[has_prerun] + half / 2, np.maximum(prerun[has_prerun], 0.02 * np.nanmax(wasted)),
                               half, facecolor="white", edgecolor=colors[load], lw=1.2, hatch="////",
                               label=f"pre-runs (hatched, at least a sliver high; value above), {load}")
                for x_pos, value in zip(xs[has_prerun] + half / 2, prerun[has_prerun], strict=True):
                    axes[r][0].annotate(f"{value:.2f}%", (x_pos, max(value, 0.02 * np.nanmax(wasted))),
                                        textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7,
                                        color=colors[load])
            change = 100 * rows["good_jct_change"].to_numpy(float)
            err = 100 * np.vstack([rows["good_jct_change"] - rows["good_jct_change_ci_low"],
                                   rows["good_jct_change_ci_high"] - rows["good_jct_change"]])
            axes[r][1].bar(xs, change, width, facecolor=colors[load], alpha=0.55, edgecolor=colors[load],
                           yerr=np.nan_to_num(err), capsize=2, ecolor="0.3",
                           label=f"never-failing jobs' mean JCT change (95% CI), {load}")
        axes[r][0].set_ylabel("% of all GPU-hours")
        axes[r][0].set_title(textwrap.fill(f"GPU time on failed attempts (solid) and pre-runs (hatched) · "
                                           f"{FAILURE_MODEL_NAMES[model]}", 60), fontsize=9)
        axes[r][1].axhline(0, color="k", lw=0.8)
        axes[r][1].set_ylabel("% change vs no failures")
        axes[r][1].set_title(textwrap.fill(f"mean JCT of jobs that never fail, vs the same replay without failures · "
                                           f"{FAILURE_MODEL_NAMES[model]}", 60), fontsize=9)
        axes[r][0].set_ylim(bottom=0)
        for ax in axes[r]:
            ax.set_xticks(range(len(arms)), [textwrap.fill(a, 18) for a in arms])
            ax.grid(False, axis="x")
            ax.grid(alpha=0.3, axis="y")
    handles, labels = [], []
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    # two columns: each series' label names its load, so three in a row would run wider than the panels
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 2), frameon=False, fontsize=8,
               bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 * (-(-len(labels) // 2)) / fig.get_figheight()))
    return fig
