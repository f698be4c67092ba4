"""Experiment 1, prioritize locality: strict vs relax-after-timeout vs none; long jobs held strict or migrated."""

from __future__ import annotations

import random
from itertools import chain

import numpy as np
import pandas as pd

from ..sim import Migration, PhillyPolicy, make_policy
from ..sim.placement import Locality
from .common import (ArmCells, arm_change, best_arm, compare_arms, format_seconds, judged_change, mean_where,
                     paired_difference, short_duration)
from .intervals import direction
from .kinds import BY_CONSTRUCTION, MECHANISM, kind_tag, tagged

#: A job that holds its GPUs at least this long counts as long (locality experiment).
LONG_JOB_S = 3600.0
#: What the long-jobs arms do with long jobs, as their labels say it. 'migrate' moves a spread job to a tighter
#: placement when it has at least LONG_JOB_S of work LEFT: the remaining time is known to the policy, an oracle;
#: 'migrate-attained' moves it once it has RUN at least LONG_JOB_S, which a scheduler knows (Tiresias' attained
#: service: ``Migration(min_attained_s=...)``).
LONG_JOBS_ARMS = {"strict": "long jobs strict",
                  "migrate": "long jobs migrated (remaining time known: oracle)",
                  "migrate-attained": "long jobs migrated (run at least 1 h: attained service)"}


_SERVER, _RACK, _ANYWHERE = int(Locality.SERVER), int(Locality.RACK), int(Locality.ANYWHERE)


class LocalityBlindPlacement:
    """No locality at all (the arm 'no locality (any GPUs)'): a job takes free GPUs server by server in the node
    list's order, starting at a random server (seeded), wherever they happen to be; its level is the one its GPUs
    span. A scheduler that knows nothing of servers or racks: the paper's alternative to prioritizing locality.

    Why not Philly's own placement at the loosest level: it fills the servers with the most free GPUs first, so a job
    that fits on one server lands on one whenever one has room, and an arm built that way differs from the locality
    arms only in how long jobs wait (issue 48: spread share 0.111 against 0.112). The random start keeps the arm from
    packing the first servers of the list (a second effect, packing, that the interference experiment measures)."""

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)

    def __repr__(self) -> str:
        return "LocalityBlindPlacement()"

    def choose(self, cluster, num_gpus: int, min_level: int, max_level: int):
        if num_gpus > cluster.total_free:
            return None
        free = cluster.free
        n = len(free)
        start = self._rng.randrange(n)
        counts, remaining = [], num_gpus
        for s in chain(range(start, n), range(start)):
            if free[s]:
                take = min(free[s], remaining)
                counts.append((s, take))
                remaining -= take
                if not remaining:
                    break
        if remaining:
            return None
        racks = {cluster.rack_of[s] for s, _ in counts}
        level = _SERVER if len(counts) == 1 else _RACK if len(racks) == 1 else _ANYWHERE
        return (counts, level) if level <= max_level else None


class LongJobsStrictPolicy(PhillyPolicy):
    """Philly's relax-after-timeout, except that long jobs (service >= ``long_job_s``) never relax.

    Knowing which jobs are long is an oracle here (each job's duration from
    the trace); in practice it would be a user's estimate.
    """

    name = "philly-long-strict"

    def __init__(self, long_job_s: float = LONG_JOB_S, relax_after_s: float = 180.0, backoff: str = "gangs",
                 gang_relax_after_s: float | None = None):
        super().__init__(locality="relax", relax_after_s=relax_after_s, backoff=backoff,
                         gang_relax_after_s=gang_relax_after_s)
        self.long_job_s = float(long_job_s)

    def on_wait(self, job, now, sim):
        if job.service < self.long_job_s:
            super().on_wait(job, now, sim)


def cells(spec, arms: ArmCells) -> None:
    """The locality arms: strict and no locality; relaxing after each of the grid's timeouts (the calibrated one
    always among them); long jobs held strict or migrated (by the work they have left, an oracle, or by the time
    they have run), at the calibrated timeout."""
    relax = sorted({*map(float, spec.relax_after_s), float(arms.default_relax_s)})
    arms.add({"locality": ["strict", "any"]}, {"relax_after_s": None, "long_jobs": "as-others"})
    arms.add({"relax_after_s": relax}, {"locality": "relax", "long_jobs": "as-others"})
    arms.add({"long_jobs": ["strict", "migrate", "migrate-attained"]},
             {"locality": "relax", "relax_after_s": float(arms.default_relax_s)})


def options(cell: dict, workload, philly: dict, slowdown) -> tuple[object, dict, object, dict]:
    """A locality arm's policy and options. It compares placements, so it keeps the replay's own slowdown (not a
    second one on top of it, which would charge a spread job twice: its real duration already holds its real
    placement's slowdown)."""
    out = {"slowdown": slowdown}
    relax_after = float(cell.get("relax_after_s") or philly.get("relax_after_s", 180.0))
    long_jobs = cell.get("long_jobs", "as-others")
    # the calibrated replay's back-off scope (every job size, or gangs only) and its gangs' own timeout (None: the
    # arm's) hold in every arm, so that the arm relaxing after the calibrated timeout is notebook 05's replay
    backoff, gang_relax = philly.get("backoff", "gangs"), philly.get("gang_relax_after_s")
    if long_jobs == "strict":
        policy = LongJobsStrictPolicy(LONG_JOB_S, relax_after, backoff, gang_relax)
    else:
        policy = make_policy("philly", locality=cell["locality"], relax_after_s=relax_after, backoff=backoff,
                             gang_relax_after_s=gang_relax)
    if long_jobs == "migrate":
        out["migration"] = Migration(defragment=False, consolidate=True, min_remaining_s=LONG_JOB_S)
    elif long_jobs == "migrate-attained":
        out["migration"] = Migration(defragment=False, consolidate=True, min_remaining_s=0.0,
                                     min_attained_s=LONG_JOB_S)
    elif long_jobs not in ("as-others", "strict"):
        raise ValueError(f"long_jobs must be 'as-others' or one of {sorted(LONG_JOBS_ARMS)}, got {long_jobs!r}")
    if cell["locality"] == "any" and long_jobs == "as-others":
        out["placement"] = LocalityBlindPlacement(int(cell.get("seed", 0) or 0))
    return policy, out, workload, {}


def locality_arm(row) -> str:
    if row["long_jobs"] in LONG_JOBS_ARMS:
        return f"relax after {short_duration(row['relax_after_s'])}, {LONG_JOBS_ARMS[row['long_jobs']]}"
    if row["locality"] == "relax":
        return f"relax after {short_duration(row['relax_after_s'])}"
    return {"strict": "strict locality", "any": "no locality (any GPUs)"}[row["locality"]]


def useful_share_reason(bucket: str) -> str:
    """Why the useful share under strict locality follows from the setup for ``bucket`` jobs: the slowdown model
    charges only spread placements, and strict locality spreads no job that fits on one server, while a gang of more
    than 8 GPUs spans servers under every arm."""
    if bucket == ">8":
        return ("a gang of more than 8 GPUs spans servers under every arm (8 GPUs per server), and the slowdown model "
                "charges one factor for any spread placement")
    return ("strict locality never spreads a job that fits on one server, and the slowdown model charges only spread "
            "placements")


def locality_conclusion(rows: pd.DataFrame, loads: list[str], bucket: str, main_load: str,
                        default_arm: str = "relax after 3 min") -> str:
    """Strict locality vs Philly's default relaxation for ``bucket`` jobs, load by load, tagged by kind
    (:mod:`.kinds`): their queueing delay and JCT (mechanism: they emerge from the simulation) and the useful
    share of their GPU time (by construction: :func:`useful_share_reason`), stated without a finding's verb.

    ``rows``: the locality experiment's rows (with ``arm``, ``load_label``, ``seed``); each change is paired by
    seed, with its 95% interval, and named as a direction only where the interval excludes no change.
    """
    strict = "strict locality"
    clauses, useful = [], []
    for load in [main_load, *[lo for lo in loads if lo != main_load]]:
        part = rows[(rows["load_label"] == load) & (rows["bucket"] == bucket)]
        queue = compare_arms(part, default_arm, strict, "queue_mean_s", "their mean queueing delay")
        jct = compare_arms(part, default_arm, strict, "jct_mean_s", "their mean JCT")
        clauses.append(f"at {load} it {queue} and {jct}")
        share, _ = arm_change(part, default_arm, strict, "useful_share", fmt=lambda v: f"{v:.0%}")
        useful.append(f"at {load}, {share}")
    at_main = rows[(rows["load_label"] == main_load) & (rows["bucket"] == bucket)]
    best, value = best_arm(at_main, "jct_mean_s")
    tail = ""
    if best is not None and best != default_arm:
        tail = (f"; the lowest mean JCT for them at {main_load} came with '{best}' (against the default: "
                f"{judged_change(at_main, default_arm, best, 'jct_mean_s')})")
    elif best is not None:
        tail = f"; the lowest mean JCT for them at {main_load} came with the default ({format_seconds(value)})"
    found = tagged(MECHANISM, f"Holding {bucket}-GPU jobs to strict locality instead of Philly's '{default_arm}': "
                   + "; ".join(clauses) + tail + ".")
    shares = tagged(BY_CONSTRUCTION, f"The useful share of their GPU time, '{default_arm}' → strict locality: "
                    + "; ".join(useful) + ".", useful_share_reason(bucket))
    return f"{found} {shares}"


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

    waits = "; ".join(f"{b}-GPU jobs {judged_change(at[at['bucket'] == b], default_arm, strict, 'queue_mean_s')}"
                      for b in shorter)
    text = (f"{kind_tag(MECHANISM)} Mean first wait, '{default_arm}' → strict locality: {waits}. The same runs say "
            "why:")
    held = [b for b in ("2-4", "5-8") if value(strict, b, "queue_mean_s") > value(default_arm, b, "queue_mean_s")]
    if held:
        text += (f" strict locality holds the {' and '.join(held)}-GPU gangs back until one server has room (their "
                 f"waits: {compared(held, 'queue_mean_s', format_seconds)}), and while they wait their GPUs go to "
                 f"jobs that fit anywhere, above all 1-GPU jobs, which always meet locality (GPU-hours held in the "
                 f"measured span: {compared(held, 'gpu_hours', lambda v: f'{v:,.0f}')});")
    if ">8" not in shorter:
        return text.rstrip(";") + "."
    spread = ", ".join(f"{value(default_arm, b, 'spread_share'):.0%} of {b}-GPU jobs" for b in ("2-4", "5-8"))
    return (text + f" where '{default_arm}' ran {spread} over more than one server, strict locality spreads none "
            f"({value(strict, '2-4', 'spread_share'):.0%} and {value(strict, '5-8', 'spread_share'):.0%}), which "
            "leaves whole servers free more often for >8-GPU gangs, which need whole servers.")


STRICT_ARM = "strict locality"


def _points(ci) -> str:
    """'+31 points [95% CI +27, +35]' of a paired difference of shares."""
    def signed(v):
        return f"{100 * v:+.0f}".replace("-", "−")
    if ci is None or not np.isfinite(ci.mean):
        return "no difference computed"
    ends = f" [95% CI {signed(ci.low)}, {signed(ci.high)}]" if ci.known else ""
    return f"{signed(ci.mean)} points{ends}"


def relax_tradeoff(rows: pd.DataFrame, main_load: str, philly_arm: str, buckets=("2-4", "5-8")) -> pd.DataFrame:
    """The tradeoff the paper names for relaxing locality after a bounded wait (its implication trades queueing delay
    for locality), for the job sizes that fit on one server: strict locality → relaxing after Philly's timeout, the
    queueing delay relaxing saves (mean first wait, paired relative change with its interval) against the locality
    it gives up (the share of jobs that ran spread over servers, a paired difference in points with its interval,
    which stays within ±100), and the useful share of their GPU time (what spreading costs them in speed) and their
    mean JCT (what the two net to). ``rows``: the locality experiment's rows."""
    at = rows[rows["load_label"] == main_load]
    out = []
    for bucket in buckets:
        part = at[at["bucket"] == bucket]
        if not {STRICT_ARM, philly_arm} <= set(part["arm"]):
            continue
        spread = [mean_where(part, "spread_share", arm=a) for a in (STRICT_ARM, philly_arm)]
        useful = [mean_where(part, "useful_share", arm=a) for a in (STRICT_ARM, philly_arm)]
        out.append({
            "GPUs per job": bucket,
            "mean first wait, strict → relaxed": judged_change(part, STRICT_ARM, philly_arm, "queue_mean_s"),
            "jobs spread over servers, strict → relaxed": (
                f"{spread[0]:.0%} → {spread[1]:.0%}, "
                f"{_points(paired_difference(part, STRICT_ARM, philly_arm, 'spread_share'))}"),
            "useful share of their GPU time": f"{useful[0]:.0%} → {useful[1]:.0%}",
            "mean JCT, strict → relaxed": judged_change(part, STRICT_ARM, philly_arm, "jct_mean_s"),
        })
    return pd.DataFrame(out)


def relax_tradeoff_sentence(rows: pd.DataFrame, main_load: str, philly_arm: str, buckets=("2-4", "5-8")) -> str:
    """:func:`relax_tradeoff` in one sentence, tagged [mechanism]: per size, the wait relaxing saves or costs (named
    only outside its interval) and the locality it gives up (points of jobs spread over servers). Empty when the rows
    hold neither arm."""
    at = rows[rows["load_label"] == main_load]
    parts = []
    for bucket in buckets:
        part = at[at["bucket"] == bucket]
        if not {STRICT_ARM, philly_arm} <= set(part["arm"]):
            continue
        text, ci = arm_change(part, STRICT_ARM, philly_arm, "queue_mean_s")
        wait = direction(ci, "longer", "shorter")
        spread = [mean_where(part, "spread_share", arm=a) for a in (STRICT_ARM, philly_arm)]
        points = _points(paired_difference(part, STRICT_ARM, philly_arm, "spread_share"))
        parts.append(f"{bucket}-GPU jobs' mean first wait {text} ({wait}), for {spread[1]:.0%} of them spread over "
                     f"servers instead of {spread[0]:.0%} ({points})")
    if not parts:
        return ""
    return tagged(MECHANISM, f"The tradeoff of relaxing locality at {main_load}, strict locality → '{philly_arm}': "
                  + "; ".join(parts) + ".")
