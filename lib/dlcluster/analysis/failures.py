"""Job failures in the trace and in job logs (paper section 4.2).

Trace side (works on any trace whose jobs carry a final ``status``):

* :func:`status_shares` - final status shares by job count and by GPU time,
  overall or per size bucket (the paper: 30.7% of jobs killed or unsuccessful,
  about 55% of GPU time);
* :func:`attempts_summary` - attempts per job and how many jobs were retried;
* :func:`attempt_outcomes` + :func:`rtf_survival` / :func:`rtf_percentiles` -
  runtime to failure (RTF). Each attempt is an observation: an attempt that
  ended in failure is an event at its duration; an attempt that passed, was
  killed by its user or is still running is *censored* at its duration (it ran
  at least that long without failing). Kaplan-Meier (statsmodels
  ``SurvfuncRight``) then estimates the probability of having failed by time
  ``t``. Treating kills as censoring assumes a user's kill says nothing about
  when the job would have failed; that is the usual, imperfect reading of a
  competing event.
* :func:`failure_rate_by_size` - failures versus GPUs allocated (Wilson
  intervals);
* :func:`user_failure_summary` / :func:`repeat_failures` - do failures
  concentrate on users, and does a user's failure predict their next job's?

Attempts: Philly restarts a job after a failed attempt (or a preemption), so
every attempt but the last is counted as a failure; the last attempt ends as
the job's status says.

Log side: :func:`map_logs_to_trace` and :func:`failure_table` build the
paper's failure table from classified logs (:mod:`dlcluster.analysis.classify`);
:func:`fit_failure_model` turns them and the trace into the simulator's
failure model (:class:`dlcluster.sim.failures.FailureModel`).

Statuses that are missing (sources without one) or ``Running`` are not part of
final-status shares; every function that leaves rows out says how many and why.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.duration.survfunc import SurvfuncRight
from statsmodels.stats.proportion import proportion_confint

from ..ordering import counts_desc
from ..trace.schema import BUCKET_KEYS, SIZE_BUCKETS, size_bucket

FINAL_STATUSES = ("Pass", "Killed", "Failed")
UNSUCCESSFUL = ("Killed", "Failed")
RTF_QUANTILES = (0.5, 0.9, 0.95)


# ----------------------------------------------------------------------------- status shares

def final_status_jobs(jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """Jobs with a final status (Pass/Killed/Failed) and the count of rows left out, by reason."""
    status = jobs["status"].astype("object").where(jobs["status"].notna(), None)
    keep = status.isin(FINAL_STATUSES).to_numpy()
    reasons = pd.Series(["no status in the source" if s is None else
                         "still running at trace end" if s == "Running" else f"status {s}"
                         for s in status], index=jobs.index, dtype="object")
    dropped = counts_desc(reasons[~keep]).rename("jobs")
    dropped.index.name = "left out because"
    return jobs[keep], dropped


def status_shares(jobs: pd.DataFrame, by_size: bool = False) -> pd.DataFrame:
    """Share of jobs and of GPU time per final status (per size bucket if ``by_size``).

    Percentages are within each group. Jobs without a GPU time count in the job
    shares only; ``jobs_without_gpu_time`` says how many.
    """
    final, _ = final_status_jobs(jobs)
    df = pd.DataFrame({
        "status": pd.Categorical(final["status"].astype(str), categories=FINAL_STATUSES),
        "gpu_time_s": final["gpu_time_s"].astype("float64"),
    })
    keys = ["status"]
    if by_size:
        df["size_bucket"] = size_bucket(final["num_gpus"].astype("float64")).to_numpy()
        keys = ["size_bucket", "status"]
    grouped = df.groupby(keys, observed=False)
    out = pd.DataFrame({
        "jobs": grouped.size(),
        "gpu_time_s": grouped["gpu_time_s"].sum(min_count=0),
        "jobs_without_gpu_time": grouped["gpu_time_s"].apply(lambda s: int(s.isna().sum())),
    }).reset_index()
    group = out["size_bucket"] if by_size else pd.Series("all", index=out.index)
    out["jobs_pct"] = 100 * out["jobs"] / out.groupby(group, observed=False)["jobs"].transform("sum")
    out["gpu_time_pct"] = 100 * out["gpu_time_s"] / out.groupby(group, observed=False)["gpu_time_s"].transform("sum")
    return out[[*keys, "jobs", "jobs_pct", "gpu_time_s", "gpu_time_pct", "jobs_without_gpu_time"]]


def unsuccessful_share(jobs: pd.DataFrame) -> dict:
    """Killed-or-failed share of jobs and of GPU time among jobs with a final status."""
    shares = status_shares(jobs).set_index("status")
    final, dropped = final_status_jobs(jobs)
    return {
        "jobs": int(shares["jobs"].sum()),
        "unsuccessful_jobs": int(shares.loc[list(UNSUCCESSFUL), "jobs"].sum()),
        "unsuccessful_jobs_pct": float(shares.loc[list(UNSUCCESSFUL), "jobs_pct"].sum()),
        "unsuccessful_gpu_time_pct": float(shares.loc[list(UNSUCCESSFUL), "gpu_time_pct"].sum()),
        "failed_jobs_pct": float(shares.loc["Failed", "jobs_pct"]),
        "killed_jobs_pct": float(shares.loc["Killed", "jobs_pct"]),
        "left_out": {str(k): int(v) for k, v in dropped.items()},
    }


# ----------------------------------------------------------------------------- attempts

def attempts_summary(jobs: pd.DataFrame) -> pd.DataFrame:
    """Attempts per job by final status: jobs, mean and max attempts, share retried.

    Rows without ``num_attempts`` are left out (the row ``all`` counts what is kept).
    An empty table means the source records no attempts.
    """
    final, _ = final_status_jobs(jobs)
    final = final[final["num_attempts"].notna()]
    if final.empty:
        return pd.DataFrame(columns=["status", "jobs", "mean_attempts", "max_attempts", "retried_jobs",
                                     "retried_pct", "retries"])
    df = pd.DataFrame({"status": final["status"].astype(str),
                       "attempts": final["num_attempts"].astype("int64")})
    rows = []
    for status, g in [*df.groupby("status", sort=False), ("all", df)]:
        retried = int((g["attempts"] > 1).sum())
        rows.append({"status": status, "jobs": len(g), "mean_attempts": g["attempts"].mean(),
                     "max_attempts": int(g["attempts"].max()), "retried_jobs": retried,
                     "retried_pct": 100 * retried / len(g), "retries": int((g["attempts"] - 1).clip(lower=0).sum())})
    order = {s: i for i, s in enumerate([*FINAL_STATUSES, "all"])}
    return pd.DataFrame(rows).sort_values("status", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def attempt_outcomes(jobs: pd.DataFrame, attempts: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """One row per attempt of a job with a final status or still running.

    Columns: jobid, attempt, user, num_gpus, size_bucket, duration_s, outcome
    (failed / passed / killed / running) and ``failed`` (the survival event).
    The open last attempt of a job whose status is ``Running`` is censored at
    the end of the trace (the latest start or end time of any attempt).
    Attempts without a start or an end (an open attempt of a job that has a
    final status included), and attempts of jobs without a status, are left
    out and counted (second return value).
    """
    status = jobs.set_index("jobid")["status"].astype("string")
    att = attempts.copy()
    att["status"] = att["jobid"].map(status)
    att = att.merge(jobs[["jobid", "user"]], on="jobid", how="left")
    last = att.groupby("jobid")["attempt"].transform("max")
    is_last = att["attempt"] == last
    outcome = pd.Series("failed", index=att.index, dtype="object")
    final_map = {"Pass": "passed", "Killed": "killed", "Failed": "failed", "Running": "running"}
    outcome[is_last] = att.loc[is_last, "status"].map(final_map).astype("object")
    trace_end = pd.concat([att["start"], att["end"]]).max()
    duration = att["duration_s"].astype("float64").copy()
    censored_at_end = (outcome == "running") & duration.isna()
    duration[censored_at_end] = (trace_end - att.loc[censored_at_end, "start"]).dt.total_seconds()
    reasons = pd.Series(pd.NA, index=att.index, dtype="object")
    reasons[att["status"].isna() | outcome.isna()] = "job has no final status"
    reasons[att["start"].isna() & reasons.isna()] = "attempt has no start time"
    open_but_final = att["running"].astype(bool) & (outcome != "running") & reasons.isna()
    reasons[open_but_final] = "job has a final status but its last attempt no end time"
    reasons[duration.isna() & reasons.isna()] = "attempt has no end time"
    keep = reasons.isna()
    out = pd.DataFrame({
        "jobid": att["jobid"], "attempt": att["attempt"], "user": att["user"],
        "num_gpus": att["num_gpus"].astype("int64"),
        "size_bucket": size_bucket(att["num_gpus"].astype("float64")).to_numpy(),
        "duration_s": duration, "outcome": outcome, "failed": outcome == "failed",
    })[keep].reset_index(drop=True)
    dropped = counts_desc(reasons[~keep]).rename("attempts")
    dropped.index.name = "left out because"
    return out, dropped


# ----------------------------------------------------------------------------- runtime to failure

def rtf_survival(outcomes: pd.DataFrame, by: str | None = None) -> dict[str, SurvfuncRight]:
    """Kaplan-Meier estimate of time to failure per group (or ``"all"``).

    Failed attempts are events; passed, killed and running attempts are
    right-censored at their duration. Groups without an event are left out.
    """
    groups = [("all", outcomes)] if by is None else [
        (str(k), g) for k, g in outcomes.groupby(by, observed=True, sort=True)]
    out = {}
    for name, g in groups:
        if g["failed"].any():
            out[name] = SurvfuncRight(g["duration_s"].to_numpy(float), g["failed"].to_numpy(int), title=name)
    return out


def survival_quantiles(curves: dict[str, SurvfuncRight], probs=(0.1, 0.25, 0.5)) -> pd.DataFrame:
    """Time by which a share ``p`` of attempts has failed (NaN where KM never reaches p)."""
    rows = []
    for name, sf in curves.items():
        row = {"group": name, "attempts": len(sf.time), "failures": int(sf.status.sum()),
               "failed_by_end_pct": 100 * (1 - sf.surv_prob[-1])}
        for p in probs:
            reached = (1 - sf.surv_prob) >= p - 1e-12
            row[f"t_{int(round(p * 100))}pct_failed_s"] = float(sf.surv_times[reached][0]) if reached.any() else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def rtf_percentiles(outcomes: pd.DataFrame, by: str | None = None, q=RTF_QUANTILES) -> pd.DataFrame:
    """Percentiles of the run time of failed attempts (the distribution the paper tabulates)."""
    failed = outcomes[outcomes["failed"]]
    groups = [("all", failed)] if by is None else [(str(k), g) for k, g in failed.groupby(by, observed=True)]
    rows = []
    for name, g in groups:
        row = {"group": name, "failures": len(g)}
        for p in q:
            row[f"p{int(round(p * 100))}_s"] = float(np.percentile(g["duration_s"], 100 * p))
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- size and users

def failure_rate_by_size(jobs: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Failed share of jobs with a final status per size bucket, with a Wilson interval."""
    final, _ = final_status_jobs(jobs)
    df = pd.DataFrame({"size_bucket": size_bucket(final["num_gpus"].astype("float64")).to_numpy(),
                       "failed": (final["status"] == "Failed").to_numpy()})
    rows = []
    for bucket in SIZE_BUCKETS:
        g = df[df["size_bucket"] == bucket]
        n, k = len(g), int(g["failed"].sum())
        lo, hi = proportion_confint(k, n, alpha=1 - confidence, method="wilson") if n else (np.nan, np.nan)
        rows.append({"size_bucket": bucket, "jobs": n, "failed": k,
                     "failed_pct": 100 * k / n if n else np.nan, "ci_low_pct": 100 * lo, "ci_high_pct": 100 * hi})
    return pd.DataFrame(rows)


def failed_share_steps(by_size: pd.DataFrame) -> pd.DataFrame:
    """From each size bucket with jobs to the next larger one (:func:`failure_rate_by_size`'s table): the change of
    the failed share in points, with Newcombe's hybrid score interval (method 10: from the two Wilson intervals),
    whose confidence is theirs. A direction ("more GPUs, more failures") holds only where it excludes zero.

    Rows: step ("2-4_to_5-8", bucket keys), smaller, larger, diff_pct, ci_low_pct, ci_high_pct.
    """
    shown = by_size[by_size["jobs"] > 0].reset_index(drop=True)
    rows = []
    for (_, a), (_, b) in zip(shown.iloc[:-1].iterrows(), shown.iloc[1:].iterrows(), strict=True):
        diff = b["failed_pct"] - a["failed_pct"]
        low = diff - np.hypot(b["failed_pct"] - b["ci_low_pct"], a["ci_high_pct"] - a["failed_pct"])
        high = diff + np.hypot(b["ci_high_pct"] - b["failed_pct"], a["failed_pct"] - a["ci_low_pct"])
        rows.append({"step": f"{BUCKET_KEYS[a['size_bucket']]}_to_{BUCKET_KEYS[b['size_bucket']]}",
                     "smaller": a["size_bucket"], "larger": b["size_bucket"], "diff_pct": float(diff),
                     "ci_low_pct": float(low), "ci_high_pct": float(high)})
    return pd.DataFrame(rows, columns=["step", "smaller", "larger", "diff_pct", "ci_low_pct", "ci_high_pct"])


def user_failure_summary(jobs: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Per user: jobs, failed jobs, failed share; plus how concentrated failures are.

    Summary keys: users, users_with_failure, users_with_repeated_failures (>= 2),
    top10pct_users_failure_share_pct (share of all failures from the 10% of users
    with most failures), failures.
    """
    final, _ = final_status_jobs(jobs)
    final = final[final["user"].notna()]
    per_user = (final.assign(failed=final["status"] == "Failed")
                .groupby("user").agg(jobs=("jobid", "size"), failed=("failed", "sum")))
    per_user["failed_pct"] = 100 * per_user["failed"] / per_user["jobs"]
    per_user = per_user.reset_index().sort_values(["failed", "jobs", "user"], ascending=[False, False, True],
                                               kind="stable").set_index("user")
    total = int(per_user["failed"].sum())
    top = max(1, int(np.ceil(0.1 * len(per_user))))
    summary = {
        "users": int(len(per_user)),
        "users_with_failure": int((per_user["failed"] > 0).sum()),
        "users_with_repeated_failures": int((per_user["failed"] >= 2).sum()),
        "failures": total,
        "top10pct_users_failure_share_pct":
            float(100 * per_user["failed"].iloc[:top].sum() / total) if total else np.nan,
    }
    return per_user.reset_index(), summary


def repeat_failures(jobs: pd.DataFrame, n_permutations: int = 1000, seed: int = 0) -> dict:
    """Does a user's failed job predict that their next job fails too?

    Each user's jobs with a final status are ordered by submit time. We compare
    P(next fails | previous failed) with P(next fails | previous did not), and
    test the difference with two permutation nulls (``seed``-determined):

    * ``p_value_within_user``: statuses shuffled within each user, which keeps
      every user's failure rate - tests clustering in time beyond user habit;
    * ``p_value_across_users``: statuses shuffled over all jobs - tests whether
      failures concentrate on some users at all.

    Where the difference is undefined (no pair after a failure, or none after
    another status: e.g. a trace without failures) it and both p-values are NaN.

    ``difference_ci_low_pct`` / ``difference_ci_high_pct``: a 95% percentile
    interval of the difference (points) by a bootstrap over users (users drawn
    with replacement, each with all their pairs: a user's jobs are not
    independent), so the interval stays within [-100, 100] as the difference
    does; the direction "failures repeat" holds only where it excludes zero.
    """
    final, _ = final_status_jobs(jobs)
    final = final[final["user"].notna() & final["submitted"].notna()]
    final = final.sort_values(["user", "submitted", "jobid"], kind="stable")
    users = final["user"].astype(str).to_numpy()
    failed = (final["status"] == "Failed").to_numpy()
    same_user_next = users[1:] == users[:-1]

    def lift(f: np.ndarray) -> tuple[float, float]:
        prev, nxt = f[:-1][same_user_next], f[1:][same_user_next]
        after_fail = nxt[prev].mean() if prev.any() else np.nan
        after_ok = nxt[~prev].mean() if (~prev).any() else np.nan
        return after_fail, after_ok

    after_fail, after_ok = lift(failed)
    observed = after_fail - after_ok
    rng = np.random.default_rng(seed)
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    bounds = list(zip(starts, [*starts[1:], len(users)], strict=True))
    within, across = np.empty(n_permutations), np.empty(n_permutations)
    for i in range(n_permutations):
        shuffled = failed.copy()
        for a, b in bounds:
            shuffled[a:b] = rng.permutation(shuffled[a:b])
        within[i] = np.subtract(*lift(shuffled))
        across[i] = np.subtract(*lift(rng.permutation(failed)))
    undefined = not np.isfinite(observed)  # every comparison with NaN is False: p would be 1 / (n + 1)
    ci_low, ci_high = _user_bootstrap(users, failed, same_user_next, n_permutations, seed)
    return {
        "pairs": int(same_user_next.sum()),
        "p_fail_after_fail_pct": float(100 * after_fail),
        "p_fail_after_other_pct": float(100 * after_ok),
        "difference_pct_points": float(100 * observed),
        "p_value_within_user": np.nan if undefined else float((1 + (within >= observed).sum()) / (n_permutations + 1)),
        "p_value_across_users": np.nan if undefined else float((1 + (across >= observed).sum()) / (n_permutations + 1)),
        "n_permutations": n_permutations,
        "difference_ci_low_pct": np.nan if undefined else ci_low,
        "difference_ci_high_pct": np.nan if undefined else ci_high,
    }


def _user_bootstrap(users: np.ndarray, failed: np.ndarray, same_user_next: np.ndarray, n_boot: int, seed: int,
                    confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval (points) of P(fail | previous failed) - P(fail | previous did not), users resampled
    with replacement; replicates where either share is undefined are left out (NaN, NaN when none is left)."""
    prev, nxt = failed[:-1][same_user_next], failed[1:][same_user_next]
    if not len(prev) or n_boot < 1:
        return np.nan, np.nan
    _, user_of_pair = np.unique(users[1:][same_user_next], return_inverse=True)
    per_user = np.stack([np.bincount(user_of_pair, weights=w, minlength=user_of_pair.max() + 1) for w in
                         (prev & nxt, prev, ~prev & nxt, ~prev)], axis=1)
    rng = np.random.default_rng([int(seed), 1])   # its own stream: the permutation p-values stay as they were
    draws = rng.integers(0, len(per_user), size=(n_boot, len(per_user)))
    sums = per_user[draws].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = 100 * (sums[:, 0] / sums[:, 1] - sums[:, 2] / sums[:, 3])
    diffs = diffs[np.isfinite(diffs)]
    if not len(diffs):
        return np.nan, np.nan
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return float(low), float(high)


# ----------------------------------------------------------------------------- logs

def map_logs_to_trace(logs: pd.DataFrame, jobs: pd.DataFrame, attempts: pd.DataFrame | None = None
                      ) -> tuple[pd.DataFrame, str]:
    """Attach trace facts (user, GPUs, size bucket, RTF) to classified logs via a ``jobid`` column.

    Returns the logs with columns ``user``, ``num_gpus``, ``size_bucket``,
    ``rtf_s`` (run time of the job's last attempt, or of the job) where a log's
    jobid is in the trace, and a one-line statement of how many were mapped
    ("not mapped: ..." when the logs carry no jobid).
    """
    out = logs.copy()
    for column in ("user", "num_gpus", "size_bucket", "rtf_s"):
        if column not in out:
            out[column] = pd.NA
    if "jobid" not in logs.columns:
        return out, "not mapped: the logs carry no jobid column"
    facts = jobs.set_index("jobid")[["user", "num_gpus", "run_time_s"]]
    if attempts is not None and len(attempts):
        ordered = attempts.sort_values(["jobid", "attempt"], kind="stable")
        last = ordered.groupby("jobid").tail(1).set_index("jobid")["duration_s"]
        facts = facts.assign(rtf_s=last.reindex(facts.index).fillna(facts["run_time_s"]))
    else:
        facts = facts.assign(rtf_s=facts["run_time_s"])
    ids = out["jobid"].astype("string")
    hit = ids.isin(facts.index).fillna(False).astype(bool)
    out["user"] = out["user"].astype("object")
    out.loc[hit, "user"] = facts.loc[ids[hit], "user"].to_numpy()
    out.loc[hit, "num_gpus"] = facts.loc[ids[hit], "num_gpus"].to_numpy()
    out.loc[hit, "rtf_s"] = facts.loc[ids[hit], "rtf_s"].to_numpy()
    out["size_bucket"] = pd.Series(pd.NA, index=out.index, dtype="object")
    gpus = pd.to_numeric(out.loc[hit, "num_gpus"]).astype("float64")
    out.loc[hit, "size_bucket"] = size_bucket(gpus).astype(str).to_numpy()
    note = f"mapped {int(hit.sum())} of {len(out)} logs to trace jobs by jobid"
    if not hit.any():
        note = f"not mapped: none of the {len(out)} logs' jobids is in the trace"
    return out, note


def failure_table(logs: pd.DataFrame, rtf_column: str = "rtf_s") -> pd.DataFrame:
    """The paper's failure table from classified (and possibly mapped) logs.

    One row per reason: category, trials (logs), jobs and users (distinct,
    where known), RTF percentiles from ``rtf_column`` (seconds), and GPU demand
    per size bucket where logs map to trace jobs (NaN where nothing is known).
    """
    rows = []
    for (reason, label, category), g in logs.groupby(["reason", "label", "category"], sort=False):
        row = {"reason": reason, "label": label, "category": category, "trials": len(g),
               "jobs": g["jobid"].nunique() if "jobid" in g and g["jobid"].notna().any() else np.nan,
               "users": g["user"].nunique() if "user" in g and g["user"].notna().any() else np.nan}
        rtf = pd.to_numeric(g[rtf_column], errors="coerce").dropna() if rtf_column in g else pd.Series(dtype=float)
        for p in RTF_QUANTILES:
            row[f"rtf_p{int(round(p * 100))}_s"] = float(np.percentile(rtf, 100 * p)) if len(rtf) else np.nan
        buckets = g["size_bucket"].dropna() if "size_bucket" in g else pd.Series(dtype=object)
        for bucket in SIZE_BUCKETS:
            row[f"gpus_{bucket}"] = int((buckets == bucket).sum()) if len(buckets) else np.nan
        rows.append(row)
    table = pd.DataFrame(rows)
    return table.sort_values(["trials", "reason"], ascending=[False, True], kind="stable").reset_index(drop=True)


# ----------------------------------------------------------------------------- simulator input

def repeat_probability(outcomes: pd.DataFrame) -> tuple[float | None, int]:
    """P(an attempt after a failed attempt fails too) and how many such retries were seen.

    ``None`` when the trace holds no retry (e.g. the public complete records,
    selected as single-attempt jobs).
    """
    o = outcomes.sort_values(["jobid", "attempt"], kind="stable")
    prev_failed = o.groupby("jobid")["failed"].shift(1)
    retries = o[prev_failed.notna() & prev_failed.astype("boolean").fillna(False).astype(bool)]
    if retries.empty:
        return None, 0
    return float(retries["failed"].mean()), int(len(retries))


def fit_failure_model(logs: pd.DataFrame, outcomes: pd.DataFrame, jobs: pd.DataFrame,
                      share_source: str, min_failures_per_class: int = 5, rtf_points: int = 101) -> dict:
    """The simulator's failure model, fitted from classified logs and the trace.

    Returns ``{"classes": {label: {category, probability, rtf, retryable,
    [repeat_probability]}}, "notes": {...}}``, the mapping
    ``dlcluster.sim.failures.FailureModel.from_dict`` reads (it ignores
    ``notes``), where for each reason seen in ``logs`` (output of
    :func:`map_logs_to_trace`):

    * ``probability`` = P(a job fails) x the reason's share of classified logs.
      P(a job fails) is the trace's failed share of jobs with a final status
      (killed jobs count as not failed: a user's kill is not a failure).
      ``share_source`` says what the log shares are (a real sample of failed
      jobs, or a corpus whose composition is not a frequency); it is recorded
      in ``notes``. Logs with no signature carry no class (the simulator has
      no "unknown" category); their share is spread over the classified
      reasons in proportion, which keeps the total failure probability that of
      the trace.
    * ``rtf`` = empirical quantiles (``rtf_points`` of them) of the RTF of the
      reason's logs mapped to trace jobs, if at least
      ``min_failures_per_class`` are; else of all failed attempts in the trace.
    * ``retryable`` from the rule file; ``repeat_probability`` (retryable
      reasons only) = the trace's P(a retry after a failure fails again), left
      out where the trace has no retries.
    """
    failed_jobs = outcomes.loc[outcomes["failed"], "jobid"].nunique()
    final, _ = final_status_jobs(jobs)
    if final.empty:
        raise ValueError("fit_failure_model: the trace has no job with a final status")
    p_fail = float((final["status"] == "Failed").mean())
    trace_rtf = outcomes.loc[outcomes["failed"], "duration_s"].to_numpy(float)
    if trace_rtf.size == 0:
        raise ValueError("fit_failure_model: the trace has no failed attempt to take an RTF distribution from")
    repeat, retries_seen = repeat_probability(outcomes)
    classified = logs[logs["reason"] != "no_signature"]
    if classified.empty:
        raise ValueError("fit_failure_model: no log was classified to a reason")
    counts = classified.groupby(["label", "category", "retryable"], sort=True).size()
    qs = np.linspace(0, 1, rtf_points)
    classes, rtf_from = {}, {}
    for (label, category, retryable), n in counts.items():
        mapped = pd.to_numeric(classified.loc[classified["label"] == label, "rtf_s"], errors="coerce").dropna()
        if len(mapped) >= min_failures_per_class:
            samples, rtf_from[label] = mapped.to_numpy(float), f"{len(mapped)} mapped logs"
        else:
            samples, rtf_from[label] = trace_rtf, "all failed attempts in the trace"
        entry = {"category": category, "probability": p_fail * n / len(classified),
                 "rtf": {"dist": "empirical", "samples_s": [float(v) for v in np.quantile(samples, qs)]},
                 "retryable": bool(retryable)}
        if retryable and repeat is not None:
            entry["repeat_probability"] = repeat
        classes[label] = entry
    notes = {
        "p_job_fails": p_fail,
        "jobs_with_final_status": int(len(final)),
        "failed_jobs_with_attempts": int(failed_jobs),
        "class_shares_from": share_source,
        "classified_logs": int(len(classified)),
        "no_signature_logs": int((logs["reason"] == "no_signature").sum()),
        "rtf_from": rtf_from,
        "repeat_probability_from": (f"{retries_seen} retries after a failed attempt in the trace"
                                    if repeat is not None else
                                    "not estimated: the trace holds no retry (simulator default 0 applies)"),
    }
    return {"classes": classes, "notes": notes}


def rtf_step(outcomes: pd.DataFrame, jobs: pd.DataFrame, within_s: float = 60.0) -> dict:
    """What the sharp step in the runtime to failure is: the most common failure time (whole minutes) and who and
    what it hits, to tell a limit of the scheduler from a property of the job selection or an artifact.

    Returns the step (``minutes``), the failed attempts that end within ``within_s`` of it (``failures``, ``share``
    of all failed attempts), how tightly (``spread_s``: the middle half of their end times around the step, in
    seconds), how widely (``users`` of ``failing_users``, ``vcs`` of ``failing_vcs``, ``sizes``, ``weeks`` of
    ``failing_weeks``, ``top_user_share``), whether other attempts outlive it (``failed_longer``: failed attempts
    that ran longer than the step plus ``within_s``; ``passed_at_step`` / ``passed_longer``: passed attempts at it
    and beyond it). ``{}`` without a failed attempt.
    """
    failed = outcomes[outcomes["failed"]].merge(jobs[["jobid", "vc", "submitted"]], on="jobid", how="left")
    if failed.empty:
        return {}
    minutes = (failed["duration_s"] / 60).round()
    step_s = 60.0 * float(minutes.mode().iloc[0])
    near = failed[(failed["duration_s"] - step_s).abs() <= within_s]
    passed = outcomes[outcomes["outcome"] == "passed"]
    submitted = pd.to_datetime(failed["submitted"])
    week = (submitted.dt.tz_localize(None) if submitted.dt.tz is not None else submitted).dt.to_period("W")
    middle = np.quantile(near["duration_s"] - step_s, [0.25, 0.75])
    return {
        "minutes": step_s / 60, "failures": len(near), "share": len(near) / len(failed),
        "spread_s": float(middle[1] - middle[0]),
        "users": int(near["user"].nunique()), "failing_users": int(failed["user"].nunique()),
        "top_user_share": float(near["user"].value_counts(normalize=True, sort=False).max()),
        "vcs": int(near["vc"].nunique()), "failing_vcs": int(failed["vc"].nunique()),
        "sizes": sorted(int(g) for g in near["num_gpus"].unique()),
        "weeks": int(week[near.index].nunique()), "failing_weeks": int(week.nunique()),
        "failed_longer": int((failed["duration_s"] > step_s + within_s).sum()),
        "passed_at_step": int(((passed["duration_s"] - step_s).abs() <= within_s).sum()),
        "passed_longer": int((passed["duration_s"] > step_s + within_s).sum()),
    }


def rtf_step_text(step: dict, selected_min_run_s: float | None = None) -> str:
    """What the step is, in words read from :func:`rtf_step`: a limit of the scheduler, a property of the job
    selection, or an artifact, with the evidence for each. ``selected_min_run_s``: the run time the job selection
    requires (the DRE records: 5 minutes), if any."""
    if not step:
        return "No failed attempt: no runtime to failure to examine."
    hours = step["minutes"] / 60
    facts = (f"{step['failures']:,} failed attempts ({step['share']:.1%} of all) ended within a minute of "
             f"{step['minutes']:.0f} minutes ({hours:g} h), the middle half of them within {step['spread_s']:.0f} s of "
             f"it; they come from {step['users']} of the {step['failing_users']} users with a failure (the most from "
             f"one user: {step['top_user_share']:.0%}), {step['vcs']} of {step['failing_vcs']} VCs, jobs of "
             f"{', '.join(map(str, step['sizes']))} GPUs and {step['weeks']} of the {step['failing_weeks']} weeks")
    widespread = step["users"] >= 10 and step["top_user_share"] < 0.5 and step["vcs"] >= 3
    not_a_cap = step["failed_longer"] > 0 or step["passed_longer"] > 0
    selection = (f"The selection of these records (jobs that ran at least {selected_min_run_s / 60:g} minutes) acts on "
                 "the start of a run, not its end, so it cannot put a step at its end. "
                 if selected_min_run_s else "")
    if widespread and step["spread_s"] <= 60:
        what = (f"A time limit: so many users, VCs, sizes and weeks ending at the same {hours:g} h, to within seconds, "
                "is a clock, not a bug in each job's code; nor an artifact of the data, whose times are to the "
                "second")
        if not_a_cap:
            what += (f". Not a limit on every job: {step['failed_longer']:,} failed and {step['passed_longer']:,} "
                     f"passed attempts ran longer, and only {step['passed_at_step']:,} passed ones ended at it. So a "
                     f"{hours:g}-hour limit that some jobs carried (a wall-clock limit set per job or per job type, or "
                     "a credential that expires) and Philly recorded as a failure; the public data cannot tell which")
        what += ("; it is real runtime to failure, and the simulator's failure model keeps it as measured (a job "
                 "drawn to fail at it fails there), not as a property of a failure class.")
    else:
        what = ("Too few users, VCs or weeks share it, or its times spread too widely, to call it a limit of the "
                "scheduler: it may be one group's jobs.")
    return f"{facts}. {selection}{what}"
