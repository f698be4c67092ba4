"""Experiment 5, scheduling policies: FIFO, Philly, Tiresias LAS/Gittins and an SRTF oracle bound."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..ordering import decision_value
from ..trace.schema import SIZE_BUCKETS
from .common import arm_means, best_arm, format_seconds, judged_change, level_interval, mean_where

POLICY_NAMES = {"fifo": "FIFO", "philly": "Philly", "las": "Tiresias 2D-LAS", "gittins": "Tiresias Gittins",
                "srtf": "SRTF (oracle bound)"}


def policy_conclusion(rows: pd.DataFrame, loads: list[str], bucket: str) -> str:
    """One sentence: the best non-oracle policy's mean JCT against Philly's at each load (paired by seed, named
    lower or higher only outside its interval), the SRTF bound, and the p99 JCT of ``bucket`` jobs."""
    clauses = []
    oracle = POLICY_NAMES["srtf"]
    for load in loads:
        at = rows[rows["load_label"] == load]
        everyone = at[at["bucket"] == "all"]
        best, value = best_arm(everyone, "jct_mean_s", exclude=(oracle,))
        if best is None:
            continue
        means = arm_means(everyone[everyone["arm"] != oracle], "jct_mean_s").map(decision_value)
        if means.max() <= 1.005 * means.min():  # nothing queues: order and preemption have nothing to act on
            waited = level_interval(everyone, "waited_share").mean if "waited_share" in everyone else float("nan")
            clauses.append(f"at {load} every non-oracle policy had the same mean JCT within 0.5% "
                           f"({format_seconds(value)})"
                           + (f": only {waited:.1%} of the jobs ever waited for GPUs, so the queue order had almost "
                              "nothing to act on" if np.isfinite(waited) else ""))
            continue
        # compare the best with Philly, or, when Philly is the best, the runner-up with Philly
        other, _ = best_arm(everyone, "jct_mean_s", exclude=(oracle, "Philly")) if best == "Philly" else (best, 0)
        change = judged_change(everyone, "Philly", other, "jct_mean_s") if other else "n/a"
        srtf = mean_where(everyone, "jct_mean_s", arm=oracle)
        bound = f"; SRTF bound {format_seconds(srtf)}" if np.isfinite(srtf) else "; SRTF not run at this load"
        large = at[at["bucket"] == bucket]
        by_size = []
        for size in SIZE_BUCKETS:
            size_best, size_value = best_arm(at[at["bucket"] == size], "jct_mean_s", exclude=(oracle,))
            if size_best is not None:
                by_size.append(f"{size} GPU{'' if size == '1' else 's'}: {size_best}")
        ties = tie_clause(everyone[everyone["arm"] != oracle])
        clauses.append(
            f"at {load} the lowest mean JCT of the non-oracle policies was {best}'s ({format_seconds(value)}; "
            f"Philly → {other}: {change}{bound}), with p99 JCT of {bucket}-GPU jobs "
            f"{format_seconds(mean_where(large, 'jct_p99_s', arm='Philly'))} under Philly vs "
            f"{format_seconds(mean_where(large, 'jct_p99_s', arm=other))} under {other}"
            + (", and the lowest mean JCT per job size from " + ", ".join(by_size) if by_size else "") + ties)
    return "Across scheduling policies, " + "; ".join(clauses) + "."


def tie_clause(rows: pd.DataFrame, within: float = 5e-4) -> str:
    """Policies with the same mean JCT (within ``within``, relative), and what was measured to explain it.

    Two policies tie when what tells them apart had nothing to act on: the clause gives their jobs' mean wait
    for locality (fragmentation and back-off) and for a quota or cap (fair-share). FIFO and Philly differ only
    in relaxing locality, which acts on the first.
    """
    means = arm_means(rows, "jct_mean_s").map(decision_value).rename_axis("arm").rename("jct_mean_s")
    means = means.reset_index().sort_values(["jct_mean_s", "arm"], kind="stable").set_index("arm")["jct_mean_s"]
    groups, current = [], [means.index[0]] if len(means) else []
    for arm in means.index[1:]:
        if means[arm] <= means[current[0]] * (1 + within):
            current.append(arm)
        else:
            groups.append(current)
            current = [arm]
    groups.append(current)
    parts = []
    for group in (g for g in groups if len(g) > 1):
        part = rows[rows["arm"].isin(group)]
        frag, fair = part["frag_delay_mean_s"].mean(), part["fair_share_delay_mean_s"].mean()
        note = (": Philly differs from FIFO only in relaxing locality, which acts on the first"
                if {"FIFO", "Philly"} <= set(group) else "")
        parts.append(f"{' and '.join(group)} gave the same mean JCT within {within:.2%} "
                     f"({format_seconds(means[group[0]])}); their jobs waited on average {format_seconds(frag)} for "
                     f"locality and {format_seconds(fair)} for a quota or cap{note}")
    return "".join(f"; {p}" for p in parts)


def policy_context(rows: pd.DataFrame, load: str, arm: str = "Philly") -> str:
    """What the queue gives the policies to act on at ``load``, measured in the same runs under ``arm``: the share of
    jobs that waited for GPUs at all and the mean wait, overall and per job size (95% intervals over replicates)."""
    at = rows[(rows["load_label"] == load) & (rows["arm"] == arm)]
    everyone = at[at["bucket"] == "all"]
    if everyone.empty:
        return f"No {arm} run at {load}."
    waited = level_interval(everyone, "waited_share")
    wait = level_interval(everyone, "queue_mean_s")
    by_size = []
    for size in SIZE_BUCKETS:
        part = at[(at["bucket"] == size) & (at["jobs"] > 0)]
        if len(part):
            by_size.append(f"{size} GPU{'' if size == '1' else 's'} "
                           f"{format_seconds(level_interval(part, 'queue_mean_s').mean)}")
    interval = (f" [95% CI {waited.low:.1%}, {waited.high:.1%}]" if waited.known else "")
    wait_interval = (f" [95% CI {format_seconds(wait.low)}, {format_seconds(wait.high)}]" if wait.known else "")
    acts = ("so queue order and preemption had almost nothing to act on, and the policies can only tie here"
            if waited.mean < 0.01 else "so queue order and preemption had queues to act on")
    return (f"Under {arm} at {load}, {waited.mean:.1%}{interval} of the jobs waited for GPUs at all (behind other "
            f"jobs, a quota or cap, or locality), and the mean wait of all jobs was {format_seconds(wait.mean)}"
            f"{wait_interval}" + (f" (by job size: {', '.join(by_size)})" if by_size else "") + f": {acts}.")
