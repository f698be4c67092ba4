"""Experiment 4, early termination: end a job within a tolerance of its best metric (real learning curves)."""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np
import pandas as pd

from ..sim import make_policy
from .common import ArmCells, paired_change, percent_text, rows_of, summarize
from .intervals import Interval, direction
from .kinds import BY_CONSTRUCTION, tagged
from .plots import load_colors


def quality_lost(curve: pd.DataFrame, within_tol_epoch: int) -> float:
    """Relative gap between the best value reached by ``within_tol_epoch`` and the curve's best (>= 0)."""
    values = curve["value"].to_numpy(float)
    direction = curve["direction"].iloc[0]
    finite = np.isfinite(values)
    pick = np.nanmin if direction == "lower" else np.nanmax
    best = float(pick(np.where(finite, values, np.nan)))
    upto = values[:within_tol_epoch]
    reached = float(pick(np.where(np.isfinite(upto), upto, np.nan)))
    gap = reached - best if direction == "lower" else best - reached
    return gap / abs(best) if best != 0 else gap


@functools.lru_cache(maxsize=16)
def early_stop_points(source: str, tolerance: float) -> pd.DataFrame:
    """Per real learning curve: the share of its time after which it is within ``tolerance`` of its best,
    and the quality lost by stopping there (relative to its best).

    ``source``: ``"pollux"`` (the real validation curves of six DL models) or
    ``"corpus"`` (the project's real CPU training runs, training loss). Curves
    without a finite value are left out (counted in ``attrs["dropped"]``).
    """
    from ..analysis.convergence import summarize_curves
    from ..sources.curves import load_corpus, load_pollux_curves

    if source == "pollux":
        curves = load_pollux_curves().curves
    elif source == "corpus":
        curves = load_corpus().curves
        curves = curves[curves["metric"] == "train_loss"]
    else:
        raise ValueError(f"curve source must be 'pollux' or 'corpus', got {source!r}")
    summary = summarize_curves(curves, tolerance)
    measured = summary[summary["within_tol_epoch"].notna()]
    by_key = dict(iter(curves.groupby(["source", "job", "metric"], sort=False)))
    lost = [quality_lost(by_key[(r.source, r.job, r.metric)].sort_values("epoch", kind="stable"),
                         int(r.within_tol_epoch)) for r in measured.itertuples()]
    out = pd.DataFrame({"job": measured["job"].to_numpy(), "time_fraction": measured["time_to_within_tol_frac"]
                        .to_numpy(float), "quality_lost": np.asarray(lost, dtype=float)})
    out.attrs["dropped"] = int(len(summary) - len(measured))
    return out


def cells(spec, arms: ArmCells) -> None:
    """The early-termination arms: no early stop (the baseline) and each of the grid's tolerances."""
    arms.add({"tolerance": [None, *spec.tolerances]}, {"curve_source": "pollux"})


def options(cell: dict, workload, philly: dict, slowdown) -> tuple[object, dict, object, dict]:
    """An early-termination arm: Philly as calibrated; at a tolerance each job draws a real curve's convergence point
    (seeded) and stops there, and ``extras["quality_lost"]`` is that curve's quality lost."""
    out, extras = {}, {}
    if cell.get("tolerance") is not None:
        points = early_stop_points(cell.get("curve_source", "pollux"), float(cell["tolerance"]))
        pick = curve_picks(len(workload), len(points), cell["seed"])
        workload = replace(workload, converge_frac=stop_fractions(points)[pick])
        out["early_stop"] = True
        extras["quality_lost"] = points["quality_lost"].to_numpy()[pick]
    return make_policy("philly", **philly), out, workload, extras


def curve_picks(num_jobs: int, num_curves: int, seed: int) -> np.ndarray:
    """Which real curve each job's stop point comes from (uniform, seeded): the draw of :func:`options`."""
    return np.random.default_rng([seed, 0xE4]).integers(0, num_curves, num_jobs)


def stop_fractions(points: pd.DataFrame) -> np.ndarray:
    """Each curve's share of its time after which it is within the tolerance (:func:`early_stop_points`), as a job
    stops at it: kept above 0 (a job runs a moment at least) and at most 1."""
    return np.clip(points["time_fraction"].to_numpy(float), 1e-6, 1.0)


#: What :func:`curve_bootstrap_saving` estimates, in words to print beside its interval.
SAVED_SHARE_QUANTITY = ("the share of the replay's GPU time (each job's GPUs × its recorded duration, every job of the "
                        "replay: failed and killed ones included) that stopping every job where its drawn real "
                        "learning curve first comes within the tolerance of its best would save; the interval "
                        "resamples the curves, the source of its uncertainty, not weeks of jobs")
#: The paper's number it stands beside (data/reference/atc19.yaml): a different quantity, said so when printed.
PAPER_SAVED_KEY = "epochs.last_band_gpu_time_passed_pct"
#: Resamples of the curve bootstrap: its percentile ends move by well under a point between runs at this many.
CURVE_BOOTSTRAP_RESAMPLES = 10_000


def curve_bootstrap_saving(points: pd.DataFrame, pick: np.ndarray, gpu_time: np.ndarray, seed: int = 0,
                           resamples: int = CURVE_BOOTSTRAP_RESAMPLES, confidence: float = 0.95) -> Interval:
    """The share of GPU time saved by early termination, 1 − Σ gpu_time × stop fraction / Σ gpu_time, with a
    percentile bootstrap over the curves (:data:`SAVED_SHARE_QUANTITY`).

    ``points``: one row per real curve (:func:`early_stop_points`); ``pick``: each job's curve (:func:`curve_picks`);
    ``gpu_time``: each job's GPU time without early stop (its weight). A resample draws as many curves as there are,
    with replacement, and gives each job the curve drawn in its curve's place: the jobs' draws stay, the curves vary.
    With a few dozen curves (Pollux: 40, of six models) that, not the hundred thousand jobs, is what the saving
    rests on, so the interval does not narrow with more jobs.
    """
    fractions = stop_fractions(points)
    pick, weight = np.asarray(pick, dtype=np.int64), np.asarray(gpu_time, dtype=float)
    if len(pick) != len(weight) or not len(pick):
        raise ValueError(f"curve_bootstrap_saving: {len(pick)} picks for {len(weight)} jobs' GPU times")
    # the GPU time that stops at each curve's place: the saving is linear in it
    slot = np.bincount(pick, weights=weight, minlength=len(fractions)) / weight.sum()
    point = 1.0 - float(slot @ fractions)
    draws = np.random.default_rng([seed, 0xB007]).integers(0, len(fractions), (int(resamples), len(fractions)))
    saved = 1.0 - fractions[draws] @ slot
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(saved, [tail, 100 - tail])
    return Interval(point, float(low), float(high), len(fractions),
                    f"percentile bootstrap over the {len(fractions)} curves ({int(resamples):,} resamples)")


def saving_beside_paper(saved: Interval, tolerance: float) -> str:
    """The saved share with its interval and what it estimates, beside the paper's published number and what that
    one is (:data:`PAPER_SAVED_KEY`): two quantities, named, not a comparison."""
    from ..report.reference import published

    paper = published(PAPER_SAVED_KEY)
    text = (f"{saved.mean:.1%} [95% CI {saved.low:.1%}, {saved.high:.1%}] of GPU time saved at a tolerance of "
            f"{tolerance:.1%}: {SAVED_SHARE_QUANTITY} ({saved.method})")
    if paper is None:
        return text + "."
    return (text + f". The paper's {paper['value']}{paper.get('unit', '')} is another quantity: the "
            f"{paper['item']} (section {paper['section']}, provenance: {paper['provenance']}), a mean over the passed "
            "jobs of each job's own share on the full trace, where this is GPU-time weighted over the replay's jobs "
            "with stop points drawn from the curves.")


def early_stop_arm(row) -> str:
    tol = row["tolerance"]
    return "no early stop" if tol is None or (isinstance(tol, float) and math.isnan(tol)) else f"stop within {tol:.1%}"


def early_stop_savings(table: pd.DataFrame) -> pd.DataFrame:
    """Experiment 4 per (load, tolerance): GPU-hours saved and JCT change against no early stop (paired), and
    the quality lost (mean over jobs of the relative metric gap of their drawn curve)."""
    allj = rows_of(table, "early_stop").query("bucket == 'all'").copy()
    allj["tolerance"] = allj["tolerance"].astype(float)
    base = "no early stop"
    saved = paired_change(allj, "arm", base, "gpu_hours", ["load_label"], relative=True)
    jct = paired_change(allj, "arm", base, "jct_mean_s", ["load_label"], relative=True)
    quality = summarize(allj[allj["arm"] != base], ["load_label", "arm"], ["quality_lost_mean"])
    out = saved.rename(columns={"mean": "gpu_hours_change", "ci_low": "gpu_hours_change_ci_low",
                                "ci_high": "gpu_hours_change_ci_high", "n": "seeds",
                                "detectable": "gpu_hours_change_detectable"})
    out = out.merge(jct.rename(columns={"mean": "jct_change", "ci_low": "jct_change_ci_low",
                                        "ci_high": "jct_change_ci_high", "detectable": "jct_change_detectable"})
                    .drop(columns=["n", "method"]),
                    on=["load_label", "arm"])
    out = out.merge(quality.rename(columns={"mean": "quality_lost", "ci_low": "quality_lost_ci_low",
                                            "ci_high": "quality_lost_ci_high"}).drop(columns=["metric", "n", "method"]),
                    on=["load_label", "arm"])
    tolerance = allj.drop_duplicates("arm").set_index("arm")["tolerance"]
    out["tolerance"] = out["arm"].map(tolerance)
    return out.sort_values(["load_label", "tolerance"], kind="stable").reset_index(drop=True)


def _saved_text(row) -> str:
    """'12.3% of GPU-hours saved [95% CI 10.1%, 14.2%]', or the change with 'no significant difference at 3 seeds'."""
    change = Interval(row.gpu_hours_change, row.gpu_hours_change_ci_low, row.gpu_hours_change_ci_high,
                      int(row.seeds), str(getattr(row, "method", "")))
    interval = (f" [95% CI {-100 * change.high:.1f}%, {-100 * change.low:.1f}%]" if change.known else "")
    verdict = direction(change, up="more GPU-hours", down="saved")
    if verdict == "saved":
        return f"{-100 * change.mean:.1f}% of GPU-hours saved{interval}"
    if verdict == "more GPU-hours":
        return f"{100 * change.mean:.1f}% more GPU-hours [95% CI {100 * change.low:.1f}%, {100 * change.high:.1f}%]"
    interval = f" [95% CI {percent_text(change.low)}, {percent_text(change.high)}]" if change.known else ""
    return f"GPU-hours {percent_text(change.mean)}{interval}: {verdict}"


#: Why early termination's savings follow from the setup.
EARLY_STOP_KIND = ("each job ends at a convergence point drawn from the real learning curves (notebook 03), so the GPU "
                   "time saved restates those points, and the quality lost is at most the tolerance")


def early_stop_conclusion(savings: pd.DataFrame, main_load: str) -> str:
    """One sentence, tagged by construction (:data:`EARLY_STOP_KIND`): GPU-hours saved (paired by seed, 'saved' only
    where the interval excludes no change) and the quality lost per tolerance, at ``main_load`` and the other loads."""
    main = savings[savings["load_label"] == main_load]
    listed = ", ".join(f"within {row.tolerance:.1%}: {_saved_text(row)} for a mean quality loss of "
                       f"{100 * row.quality_lost:.3f}%" for row in main.itertuples())
    others = savings[savings["load_label"] != main_load]
    other_text = "; ".join(
        f"at {load}: " + ", ".join(_saved_text(row) for row in rows.itertuples())
        for load, rows in others.groupby("load_label", sort=False))
    return tagged(BY_CONSTRUCTION, f"Stopping each job once its learning curve comes within a tolerance of its best, "
                  f"at {main_load}: {listed}" + (f" ({other_text})" if other_text else "") + ".", EARLY_STOP_KIND)


def plot_early_stop(savings: pd.DataFrame, loads: list[str]):
    """GPU-hours saved and mean JCT change against the quality lost, one line per load, points = tolerances."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for load, color in load_colors(loads).items():
        rows = savings[savings["load_label"] == load]
        q = np.maximum(100 * rows["quality_lost"].to_numpy(), 1e-4)  # a loss of 0 drawn at 0.0001%
        for ax, column in zip(axes, ("gpu_hours_change", "jct_change"), strict=True):
            y = -100 * rows[column].to_numpy()
            err = 100 * np.vstack([rows[f"{column}_ci_high"] - rows[column], rows[column] - rows[f"{column}_ci_low"]])
            ax.errorbar(q, y, yerr=np.nan_to_num(err), fmt="o-", color=color, capsize=3, label=load)
            for xq, yy, t in zip(q, y, rows["tolerance"], strict=True):
                ax.annotate(f"{t:.1%}", (xq, yy), textcoords="offset points", xytext=(5, -10), fontsize=7,
                            color=color)
    axes[0].set_ylabel("GPU-hours saved (%)")
    axes[1].set_ylabel("mean JCT reduction (%)")
    axes[0].set_title("GPU-hours saved against quality lost (vs no early stop, paired by seed)", fontsize=9)
    axes[1].set_title("mean JCT reduction against quality lost (vs no early stop, paired by seed)", fontsize=9)
    for ax in axes:
        ax.set_xlabel("mean quality lost (% of the metric, relative to the run's best; log scale)")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}%")
        ax.set_ylim(bottom=min(0, ax.get_ylim()[0]))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title="point labels: tolerance", title_fontsize=7)
    fig.tight_layout()
    return fig
