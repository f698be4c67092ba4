"""The real figures that more than one notebook prints, each computed once, here, and labelled by its selection,
span and definition.

Two notebooks that need one of these call the same function and print the same number; where two selections
give two numbers, the function returns both, one labelled row each, so a notebook sets them side by side and
never calls either "the" figure. :data:`dlcluster.report.quantities.SHARED` names the results.json key under
which each notebook publishes them, and a test holds every notebook to one value per name.

* :func:`retried_shares`: the DRE records that ran more than one attempt, reconstructed from the data, beside the
  one check against the full job log (:data:`EXTRACT_CHECK`, quoted: the extract is not in this repository);
* :func:`first_wait_by_span`: real first-attempt waits per size bucket, one row per named span;
* :func:`occupancy_in_record_units`: the replay's busy servers in the occupancy record's own units (notebook 05's
  definition) and its allocated share of GPUs, over a named span;
* :func:`unsuccessful_by_selection`: killed-or-unsuccessful shares of jobs and GPU time, one row per public
  selection that can give one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.failures import unsuccessful_share
from .measures import allocated_share, busy_servers, delay_table
from .jobsets import Alignment, job_set_facts
from .workload import RETRY_GAP_S, retried_mask

#: The one check of the DRE records' attempts against the full job log (``data/README.md``): an independent public
#: extract of the log holds 2,521 of the DRE jobs with all their attempts, 593 of them with 2-5 attempts. The
#: extract is kept out of this repository, so these counts are quoted, labelled as such, never recomputed.
EXTRACT_CHECK = {"jobs": 2521, "retried": 593}

RECONSTRUCTED = "reconstructed"
RECONSTRUCTED_PASSED = "reconstructed_passed"
EXTRACT = "extract"


def retried_shares(first_waits: pd.DataFrame, dre_jobs: pd.DataFrame, min_gap_s: float = RETRY_GAP_S) -> pd.DataFrame:
    """The share of DRE jobs that ran more than one attempt, one row per selection (index ``reconstructed``,
    ``reconstructed_passed``, ``extract``): ``selection``, ``definition``, ``jobs``, ``retried``, ``share``.

    ``first_waits``: :func:`.workload.dre_first_waits`'s table of ``dre_jobs`` (the DRE records, for their status).
    The reconstructed rows count the records (all of them; those that passed) whose last attempt started more than
    ``min_gap_s`` after their first (first start = DRE end - RFold duration); the extract row is
    :data:`EXTRACT_CHECK`, quoted.
    """
    retried = retried_mask(first_waits, min_gap_s)
    passed = (first_waits["jobid"].map(dre_jobs.set_index("jobid")["status"]) == "Pass").to_numpy()
    definition = (f"last attempt started more than {min_gap_s:g} s after the first (first start = DRE end - RFold "
                  "duration)")

    def reconstructed(key: str, what: str, keep: np.ndarray) -> dict:
        return {"key": key, "selection": f"{what} ({int(keep.sum()):,} records)", "definition": definition,
                "jobs": int(keep.sum()), "retried": int(retried[keep].sum()),
                "share": float(retried[keep].mean()) if keep.any() else float("nan")}

    rows = [
        reconstructed(RECONSTRUCTED, "DRE records with a reconstructed first start", np.ones(len(retried), bool)),
        reconstructed(RECONSTRUCTED_PASSED, "DRE records that passed, with a reconstructed first start", passed),
        {"key": EXTRACT,
         "selection": (f"the {EXTRACT_CHECK['jobs']:,} DRE jobs found in an independent extract of the full job log "
                       "(data/README.md; the extract is not public here: quoted)"),
         "definition": "2-5 attempts in that log",
         "jobs": EXTRACT_CHECK["jobs"], "retried": EXTRACT_CHECK["retried"],
         "share": EXTRACT_CHECK["retried"] / EXTRACT_CHECK["jobs"]},
    ]
    return pd.DataFrame(rows).set_index("key")


def span_label(span: tuple | None) -> str:
    """``YYYY-MM-DD..YYYY-MM-DD`` (end exclusive) or ``every record``."""
    return "every record" if span is None else f"{span[0]:%Y-%m-%d}..{span[1]:%Y-%m-%d}"


def first_wait_by_span(pairs: pd.DataFrame, spans: dict) -> pd.DataFrame:
    """Real first-attempt waits per size bucket, one row per (named span, bucket): ``span``, ``dates``,
    ``records``, ``median_s``, ``p90_s``.

    ``pairs``: :func:`.measures.paired_delays`'s table (the DRE records beside the same jobs in the replay; its
    ``real_s`` is the first wait, zeros kept); ``spans``: name -> ``(begin, end)`` of submission (end exclusive), or
    None for every record. The figures are those of :func:`.calibrate.delay_table`, the one notebook 05 holds
    against its targets.
    """
    rows = []
    for name, span in spans.items():
        table = delay_table(pairs, span)
        for bucket, r in table.iterrows():
            rows.append({"span": name, "dates": span_label(span), "bucket": bucket, "records": int(r["real_n"]),
                         "median_s": float(r["real_median_s"]), "p90_s": float(r["real_p90_s"])})
    return pd.DataFrame(rows, columns=["span", "dates", "bucket", "records", "median_s", "p90_s"])


def occupancy_in_record_units(result, occupancy: pd.DataFrame, span: tuple) -> dict:
    """The replay's busy servers in the occupancy record's own units, and its GPU allocation, over ``span``.

    As notebook 05 measures them (:func:`.calibrate.busy_servers`, :func:`.calibrate.allocated_share`): hourly
    counts of servers with a job, the replay's beside the record's, both as shares of the record's total (420 on
    most days; the replay's own servers in service are another unit), the mean absolute error in points of that
    total, and the replay's mean allocated share of its GPUs in service. Monitoring gaps are left out.
    """
    table = busy_servers(result, occupancy)
    table = table[(table.index >= span[0]) & (table.index < span[1])]
    if table.empty:
        raise ValueError(f"occupancy_in_record_units: the replay and the record share no hour in {span_label(span)}")
    return {"dates": span_label(span), "hours": len(table),
            "replay_busy_share": float((table["simulated"] / table["total"]).mean()),
            "real_busy_share": float((table["real"] / table["total"]).mean()),
            "busy_mae_pp": float(100.0 * ((table["simulated"] - table["real"]).abs() / table["total"]).mean()),
            "gpu_allocated_share": allocated_share(result, span)}


def unsuccessful_by_selection(trace, alignment: Alignment) -> pd.DataFrame:
    """Killed-or-unsuccessful shares of jobs and of GPU time, one row per public selection that gives one (index
    ``dre_records``, ``rfold_not_in_pollux``): ``selection``, ``definition``, ``jobs``, ``jobs_pct``,
    ``gpu_time_pct``.

    The two are different selections and definitions, neither the paper's (every job of the cluster, by its
    status): DRE's records carry a status but are multi-GPU jobs of at least 5 minutes with no killed job; RFold's
    jobs not among Pollux's passed jobs is an inference from two job sets' counts (``trace``: ``load_trace("public")``;
    ``alignment``: RFold on the calendar, :func:`.jobsets.align_offsets`).
    """
    dre = unsuccessful_share(trace.jobs_of("dre"))
    facts = job_set_facts(trace, alignment)
    rfold_jobs = facts.loc["RFold", "jobs_in_pollux_span"]
    not_in_pollux_jobs = 100.0 * (1.0 - facts.loc["Pollux", "jobs"] / rfold_jobs)
    not_in_pollux_gpu = 100.0 * (1.0 - facts.loc["Pollux", "gpu_days"] / facts.loc["RFold", "gpu_days_in_pollux_span"])
    rows = [
        {"key": "dre_records",
         "selection": ("DRE records: multi-GPU jobs of at least 5 minutes, statuses Pass and Failed only "
                       "(no killed job)"),
         "definition": "Failed records / records; their GPU time / the records' GPU time",
         "jobs": dre["jobs"], "jobs_pct": dre["unsuccessful_jobs_pct"],
         "gpu_time_pct": dre["unsuccessful_gpu_time_pct"]},
        {"key": "rfold_not_in_pollux",
         "selection": "RFold jobs submitted in Pollux's span (every job that ran, any status)",
         "definition": "1 - Pollux's passed jobs / RFold's jobs, GPU time likewise (an inference from job counts)",
         "jobs": int(rfold_jobs), "jobs_pct": not_in_pollux_jobs, "gpu_time_pct": not_in_pollux_gpu},
    ]
    return pd.DataFrame(rows).set_index("key")

