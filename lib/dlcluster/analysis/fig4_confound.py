"""What Figure 4's test can and cannot show: a spread job has waited at least Philly's relax timeout.

Philly asks for the best locality a job can have and relaxes it one level only after a timeout (2-3 minutes in the
paper's description; the calibrated replay's is 171 s). So, by the rule itself, a job that ran spread over more
servers than its size needs has waited at least that long, while a job on the fewest servers may have waited nothing.
A regression of the wait on the servers spanned (:func:`.delays.servers_trend`) therefore measures an association
that the rule partly makes: it can say whether spread jobs waited longer or shorter than local ones, not whether
spreading shortened anyone's wait. That needs what the same job would have waited for a local placement, which no
trace records: the simulator's strict-vs-relaxed comparison (notebook 06, experiment 1) is the counterfactual.

:func:`timeout_confound` measures the floor in the data and compares spread and local jobs among those that waited
at least the timeout, where the rule no longer separates them; :func:`confound_text` says it in words.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .delays import bucket_label, format_seconds

SERVER_GPUS = 8


def timeout_confound(locality: pd.DataFrame, relax_after_s: float) -> pd.DataFrame:
    """Per size bucket of Figure 4's input (``num_gpus``, ``num_servers``, ``queueing_delay_s``, ``bucket``):

    ``jobs``; ``spread`` (on more servers than ``ceil(gpus / 8)``) and ``spread_share``;
    ``spread_under_timeout_share`` / ``local_under_timeout_share``: the share that waited less than
    ``relax_after_s`` (the rule allows no spread job there); ``waited_timeout`` (jobs that waited at least
    ``relax_after_s``) and, among them, ``spread_median_s`` / ``local_median_s`` and ``p_spread_shorter`` (one-sided
    Mann-Whitney U test that spread jobs waited less; NaN with fewer than 5 of either).
    """
    rows = []
    for bucket, part in locality.groupby("bucket", sort=False, observed=True):
        fewest = np.ceil(part["num_gpus"].to_numpy(float) / SERVER_GPUS)
        spread = part["num_servers"].to_numpy(float) > fewest
        wait = part["queueing_delay_s"].to_numpy(float)
        long = wait >= relax_after_s
        a, b = wait[spread & long], wait[~spread & long]
        p = (float(stats.mannwhitneyu(a, b, alternative="less").pvalue) if min(len(a), len(b)) >= 5
             else float("nan"))
        rows.append({"bucket": bucket, "jobs": len(part), "spread": int(spread.sum()),
                     "spread_share": float(spread.mean()) if len(part) else np.nan,
                     "spread_under_timeout_share": float((wait[spread] < relax_after_s).mean()) if spread.any()
                     else np.nan,
                     "local_under_timeout_share": float((wait[~spread] < relax_after_s).mean()) if (~spread).any()
                     else np.nan,
                     "waited_timeout": int(long.sum()),
                     "spread_median_s": float(np.median(a)) if len(a) else np.nan,
                     "local_median_s": float(np.median(b)) if len(b) else np.nan,
                     "p_spread_shorter": p})
    return pd.DataFrame(rows).set_index("bucket")


def confound_text(table: pd.DataFrame, relax_after_s: float, alpha: float = 0.05) -> str:
    """What the regression can and cannot show about the paper's claim, with the numbers of :func:`timeout_confound`."""
    timeout = format_seconds(relax_after_s)
    parts = []
    for bucket, row in table.iterrows():
        if not row["spread"]:
            parts.append(f"{bucket_label(bucket)}: no job ran spread")
            continue
        text = (f"{bucket_label(bucket)}: {row['spread_share']:.0%} ran spread, and "
                f"{row['spread_under_timeout_share']:.0%} of those waited less than {timeout} (against "
                f"{row['local_under_timeout_share']:.0%} of the local ones)")
        if np.isfinite(row["p_spread_shorter"]):
            verdict = ("spread ones waited significantly less" if row["p_spread_shorter"] < alpha
                       else "no significant difference")
            text += (f"; of the jobs that waited at least {timeout}, spread ones waited a median of "
                     f"{format_seconds(row['spread_median_s'])} against {format_seconds(row['local_median_s'])} for "
                     f"local ones ({verdict}, one-sided Mann-Whitney p={row['p_spread_shorter']:.2g})")
        parts.append(text)
    return (f"Philly relaxes locality only after a timeout (here {timeout}), so a spread job has waited at least that "
            "long: the regression of the wait on the servers spanned can say whether spread jobs waited longer or "
            "shorter than local ones, not whether spreading shortened their wait, which would need what the same "
            "job would have waited for a local placement (the simulator's strict-vs-relaxed comparison is that "
            "counterfactual). Spread jobs that waited less than the timeout were spread at once: Philly did not hold "
            "them for locality, or no local placement could hold them (about half of Philly's servers hold 4 GPUs, "
            "so 8 GPUs there take two; spread here means more servers than GPUs / 8), or the record's wait is not its "
            "first. " + "; ".join(parts) + ".")
