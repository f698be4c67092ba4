"""Experiment 1, prioritize locality: strict vs relax-after-timeout vs none; long jobs held strict or migrated."""

from __future__ import annotations

import pandas as pd

from ..sim import PhillyPolicy
from .common import best_arm, compare_arms, format_seconds, judged_change, mean_where, short_duration

#: A job that holds its GPUs at least this long counts as long (locality experiment).
LONG_JOB_S = 3600.0


class LongJobsStrictPolicy(PhillyPolicy):
    """Philly's relax-after-timeout, except that long jobs (service >= ``long_job_s``) never relax.

    Knowing which jobs are long is an oracle here (each job's duration from
    the trace); in practice it would be a user's estimate.
    """

    name = "philly-long-strict"

    def __init__(self, long_job_s: float = LONG_JOB_S, relax_after_s: float = 180.0, backoff: str = "gangs"):
        super().__init__(locality="relax", relax_after_s=relax_after_s, backoff=backoff)
        self.long_job_s = float(long_job_s)

    def on_wait(self, job, now, sim):
        if job.service < self.long_job_s:
            super().on_wait(job, now, sim)


def locality_arm(row) -> str:
    if row["long_jobs"] == "strict":
        return f"relax after {short_duration(row['relax_after_s'])}, long jobs strict"
    if row["long_jobs"] == "migrate":
        return f"relax after {short_duration(row['relax_after_s'])}, long jobs migrated"
    if row["locality"] == "relax":
        return f"relax after {short_duration(row['relax_after_s'])}"
    return {"strict": "strict locality", "any": "no locality (any GPUs)"}[row["locality"]]


def locality_conclusion(rows: pd.DataFrame, loads: list[str], bucket: str, main_load: str,
                        default_arm: str = "relax after 3 min") -> str:
    """One sentence: strict locality vs Philly's default relaxation for ``bucket`` jobs, load by load:
    queueing delay, JCT and the useful share of their GPU time.

    ``rows``: the locality experiment's rows (with ``arm``, ``load_label``, ``seed``); each change is paired by
    seed, with its 95% interval, and named as a direction only where the interval excludes no change.
    """
    strict = "strict locality"
    clauses = []
    for load in [main_load, *[lo for lo in loads if lo != main_load]]:
        part = rows[(rows["load_label"] == load) & (rows["bucket"] == bucket)]
        queue = compare_arms(part, default_arm, strict, "queue_mean_s", "their mean queueing delay")
        useful = compare_arms(part, default_arm, strict, "useful_share", "the useful share of their GPU time",
                              fmt=lambda v: f"{v:.0%}")
        jct = compare_arms(part, default_arm, strict, "jct_mean_s", "their mean JCT")
        clauses.append(f"at {load} it {queue}, {useful} and {jct}")
    at_main = rows[(rows["load_label"] == main_load) & (rows["bucket"] == bucket)]
    best, value = best_arm(at_main, "jct_mean_s")
    tail = ""
    if best is not None and best != default_arm:
        tail = (f"; the lowest mean JCT for them at {main_load} came with '{best}' (against the default: "
                f"{judged_change(at_main, default_arm, best, 'jct_mean_s')})")
    elif best is not None:
        tail = f"; the lowest mean JCT for them at {main_load} came with the default ({format_seconds(value)})"
    return (f"Holding {bucket}-GPU jobs to strict locality instead of Philly's '{default_arm}': "
            + "; ".join(clauses) + tail + ".")


def strict_locality_explanation(rows: pd.DataFrame, main_load: str, default_arm: str) -> str:
    """Why strict locality can shorten the waits of 1-GPU and >8-GPU jobs, from the same runs: the 2-8-GPU jobs it
    holds back (their wait) leave GPUs to 1-GPU jobs, which always fit on one server, and it spreads no job over
    servers (the relaxed arm's share of spread 2-8-GPU jobs), so whole servers stay free for >8-GPU gangs. Empty
    when neither the 1-GPU nor the >8-GPU jobs waited less under strict locality."""
    at = rows[rows["load_label"] == main_load]

    def value(arm, bucket, metric):
        return mean_where(at, metric, arm=arm, bucket=bucket)

    strict = "strict locality"
    shorter = [b for b in ("1", ">8") if value(strict, b, "queue_mean_s") < value(default_arm, b, "queue_mean_s")]
    if not shorter:
        return ""
    def compared(buckets, metric, fmt):
        return ", ".join(f"{b}-GPU jobs {fmt(value(strict, b, metric))} against {fmt(value(default_arm, b, metric))}"
                         for b in buckets)

    text = (f"Under strict locality the {compared(shorter, 'queue_mean_s', format_seconds)} (mean first wait, "
            f"'{default_arm}' second). The same runs say why:")
    held = [b for b in ("2-4", "5-8") if value(strict, b, "queue_mean_s") > value(default_arm, b, "queue_mean_s")]
    if held:
        text += (f" strict locality holds the {' and '.join(held)}-GPU gangs back until one server has room (their "
                 f"waits: {compared(held, 'queue_mean_s', format_seconds)}), and while they wait their GPUs go to "
                 f"jobs that fit anywhere, above all 1-GPU jobs, which always meet locality (GPU-hours held in the "
                 f"measured span: {compared(held, 'gpu_hours', lambda v: f'{v:,.0f}')});")
    spread = ", ".join(f"{value(default_arm, b, 'spread_share'):.0%} of {b}-GPU jobs" for b in ("2-4", "5-8"))
    return (text + f" where '{default_arm}' ran {spread} over more than one server, strict locality spreads none, "
            "which leaves whole servers free more often for >8-GPU gangs, which need whole servers.")
