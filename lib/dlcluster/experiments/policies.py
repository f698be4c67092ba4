"""Experiment 5, scheduling policies: FIFO, Philly, Tiresias LAS/Gittins and an SRTF oracle bound."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..ordering import decision_value
from ..report.verdicts import HOLDS, Outcome, Side, judge
from ..sim import make_policy
from ..sim.policies import POLICIES
from ..trace.schema import SIZE_BUCKETS
from .common import (ArmCells, arm_means, best_arm, format_seconds, judged_change, level_interval, mean_where,
                     paired_change)
from .kinds import kind_tag, load_kind
from .restart import restart_options

POLICY_NAMES = {"fifo": "FIFO", "philly": "Philly", "las": "Tiresias 2D-LAS", "gittins": "Tiresias Gittins",
                "srtf": "SRTF (oracle bound)"}
#: The measures each policy is compared with Philly on: the mean JCT, every wait (comparable across preemptive and
#: non-preemptive policies) and the first wait (comparable only between policies that never preempt).
POLICY_METRICS = ("jct_mean_s", "wait_total_mean_s", "queue_mean_s")
#: The policies that preempt running jobs (their restarts may cost time: experiments.restart)
PREEMPTIVE_POLICIES = tuple(k for k in POLICY_NAMES if POLICIES[k].preemptive)


def cells(spec, arms: ArmCells) -> None:
    """The policy arms at each of the grid's policy loads (SRTF only at its oracle loads: its preemptions make heavy
    loads slow to simulate)."""
    for load in spec.policy_loads:
        policies = [p for p in spec.policies if p != "srtf" or load in spec.oracle_loads]
        arms.add({"policy": policies}, loads=[arms.resolve(load)])
        # preemption's restart overhead, an assumption (experiments.restart): the preemptive policies again under each
        # overhead above 0 the grid names (0 s, free preemption, is the arms above: their gain is an upper bound)
        preemptive = [p for p in policies if p in PREEMPTIVE_POLICIES]
        overheads = [float(x) for x in getattr(spec, "restart_overheads_s", ()) if float(x) > 0]
        if preemptive and overheads:
            arms.add({"policy": preemptive, "restart_overhead_s": overheads}, loads=[arms.resolve(load)])


def options(cell: dict, workload, philly: dict, slowdown) -> tuple[object, dict, object, dict]:
    """A policy arm. Every policy places as the calibrated replay does, so that the comparison is of queue order,
    locality and preemption, and Philly's arm is notebook 05's replay (placements are compared in the interference
    experiment)."""
    options = restart_options(cell) if cell.get("restart_overhead_s") else {}
    return make_policy(cell["policy"], **(philly if cell["policy"] == "philly" else {})), options, workload, {}


def policy_arm(row) -> str:
    overhead = row.get("restart_overhead_s") if hasattr(row, "get") else None
    overhead = float(overhead) if overhead is not None and overhead == overhead else 0.0
    return POLICY_NAMES[row["policy"]] + (f", restart {overhead:g} s (assumed)" if overhead else "")


def is_preemptive(arm: str) -> bool:
    """Whether the policy of an arm (its name in :data:`POLICY_NAMES`) preempts running jobs."""
    names = {name: key for key, name in POLICY_NAMES.items()}
    arm = arm.split(", restart ")[0]   # the same policy under an assumed restart overhead
    if arm not in names:
        raise ValueError(f"unknown policy arm {arm!r}; expected one of {list(names)}")
    return bool(POLICIES[names[arm]].preemptive)


def first_wait_side(arm: str, selection: str) -> Side:
    """What an arm's mean first wait measures: under a preemptive policy it leaves out a preempted job's later
    waits, under any other it is a started job's only wait for a scheduler's decision."""
    if is_preemptive(arm):
        return Side("wait from submit to the first start; a preempted job's later waits are not in it (a preemptive "
                    "policy)", selection)
    return Side("wait from submit to the first start; a started job is never preempted, so no later wait for a "
                "scheduler's choice is left out (a non-preemptive policy)", selection)


def first_wait_verdict(arm: str, base: str, n_jobs: float, selection: str = "the measured jobs of the replay"):
    """Whether ``arm``'s first wait compares with ``base``'s, by the project's one standard
    (:func:`dlcluster.report.verdicts.judge`): ``not comparable`` (another definition) when one policy preempts and
    the other does not; the verdict's ``like_for_like`` says which."""
    return judge(Outcome(HOLDS, "the same definition on both sides"), first_wait_side(arm, selection),
                 first_wait_side(base, selection), n_jobs)


def policy_changes(rows: pd.DataFrame, base: str = "Philly") -> pd.DataFrame:
    """Each policy's paired change against ``base`` (:func:`.common.paired_change`, relative) per load and size
    bucket on :data:`POLICY_METRICS`. A first-wait comparison between a preemptive and a non-preemptive policy is
    ``not comparable`` (:func:`first_wait_verdict`): no value, and ``verdict`` / ``why`` say so; compare the mean JCT
    and every wait (``wait_total_mean_s``) instead."""
    frames = []
    for metric in POLICY_METRICS:
        change = paired_change(rows, "arm", base, metric, ["load_label", "bucket"], relative=True).assign(
            metric=metric, verdict="", why="")
        if metric == "queue_mean_s":
            for index, row in change.iterrows():
                jobs = rows[(rows["arm"] == base) & (rows["load_label"] == row["load_label"])
                            & (rows["bucket"] == row["bucket"])]["jobs"].sum()
                verdict = first_wait_verdict(row["arm"], base, float(jobs))
                if not verdict.like_for_like.startswith("like for like"):
                    change.loc[index, ["mean", "ci_low", "ci_high", "detectable"]] = float("nan")
                    change.loc[index, ["verdict", "why"]] = [verdict.verdict, verdict.reason]
        frames.append(change)
    return pd.concat(frames, ignore_index=True)


def policy_conclusion(rows: pd.DataFrame, loads: list[str], bucket: str) -> str:
    """One sentence per load, tagged by what it rests on (:func:`.kinds.load_kind` of the rows' ``load_setting``: the
    real arrivals are a mechanism, a scaled load an assumption): the best non-oracle policy's mean JCT against
    Philly's (paired by seed, named lower or higher only outside its interval), the SRTF bound, and the p99 JCT of
    ``bucket`` jobs."""
    if "load_setting" not in rows.columns:
        raise ValueError("policy_conclusion needs the rows' load_setting ('real' or a scaled load) to tag each result")
    clauses = []
    oracle = POLICY_NAMES["srtf"]
    for load in loads:
        at = rows[rows["load_label"] == load]
        everyone = at[at["bucket"] == "all"]
        best, value = best_arm(everyone, "jct_mean_s", exclude=(oracle,))
        if best is None:
            continue
        tag = kind_tag(*load_kind(str(at["load_setting"].iloc[0])))
        means = arm_means(everyone[everyone["arm"] != oracle], "jct_mean_s").map(decision_value)
        if means.max() <= 1.005 * means.min():  # nothing queues: order and preemption have nothing to act on
            waited = level_interval(everyone, "waited_share").mean if "waited_share" in everyone else float("nan")
            clauses.append(f"{tag} at {load} every non-oracle policy had the same mean JCT within 0.5% "
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
            f"{tag} at {load} the lowest mean JCT of the non-oracle policies was {best}'s ({format_seconds(value)}; "
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
    tag = kind_tag(*load_kind(str(at["load_setting"].iloc[0])))
    return (f"{tag} Under {arm} at {load}, {waited.mean:.1%}{interval} of the jobs waited for GPUs at all (behind "
            f"other jobs, a quota or cap, or locality), and the mean wait of all jobs was {format_seconds(wait.mean)}"
            f"{wait_interval}" + (f" (by job size: {', '.join(by_size)})" if by_size else "") + f": {acts}.")
