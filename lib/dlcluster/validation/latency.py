"""The scheduler latency of the replay: the time Philly's scheduler and launcher take before a job can be placed.

:func:`fit_overhead_latency` (the calibrated model) fits only the launcher's own
overhead, a lognormal per size bucket on the real waits that are clearly not
queueing, so every longer wait must come from the simulated contention;
:func:`fit_latency_mixture` fits the whole real waits (its slow mode *is* the
queueing) and stays as an ablation row. :func:`scheduler_latency` draws each job's
latency from either.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..trace.schema import size_bucket
from .measures import DELAY_BUCKETS, in_span
from .replay import Replay

#: One row of :attr:`.calibrate.ReplayParams.latency_mixture`: a size bucket ("all" = every size), the fast mode's
#: share, and each mode's median (s) and sigma (of a lognormal).
LATENCY_FIELDS = ("bucket", "fast_share", "fast_median_s", "fast_sigma", "slow_median_s", "slow_sigma")


def _two_gaussians(x: np.ndarray, iterations: int = 200) -> tuple:
    """EM for a mixture of two 1-D Gaussians on ``x``: (share, mean, sd) of the lower mode, then of the upper.

    Deterministic start at the 10th and 75th percentiles; sds floored at 0.05.
    """
    mean = np.percentile(x, [10.0, 75.0])
    sd = np.full(2, max(float(np.std(x)) / 2.0, 0.05))
    share = np.array([0.5, 0.5])
    for _ in range(iterations):
        dens = share * stats.norm.pdf(x[:, None], mean, sd)
        resp = dens / np.maximum(dens.sum(axis=1, keepdims=True), 1e-300)
        weight = resp.sum(axis=0)
        share = weight / len(x)
        mean = (resp * x[:, None]).sum(axis=0) / weight
        sd = np.maximum(np.sqrt((resp * (x[:, None] - mean) ** 2).sum(axis=0) / weight), 0.05)
    lower = int(np.argmin(mean))
    return share[lower], mean[lower], sd[lower], mean[1 - lower], sd[1 - lower]


def fit_latency_mixture(real_waits: pd.DataFrame, span: tuple, by_size: bool = True, modes: int = 2,
                        min_records: int = 20) -> tuple:
    """The scheduler-latency model fitted to the real first-attempt waits submitted in ``span``.

    ``modes=2``: a lognormal mixture (EM on log seconds, waits floored at 1 s),
    its fast mode the jobs placed at once; ``modes=1``: one lognormal;
    ``modes=0``: every job the median wait. One row ``"all"`` for every size,
    and with ``by_size`` one per size bucket of the records (2-4, 5-8, >8 GPUs)
    that has ``min_records``; a job whose bucket has no row (1-GPU jobs: the
    complete records hold none) takes the ``"all"`` row. Rows of :data:`LATENCY_FIELDS`.
    """
    part = in_span(real_waits, span)
    groups = [("all", part)]
    if by_size:
        groups += [(b, part[part["bucket"] == b]) for b in DELAY_BUCKETS if (part["bucket"] == b).sum() >= min_records]
    rows = []
    for bucket, group in groups:
        x = np.log(np.maximum(group["first_wait_s"].to_numpy(float), 1.0))
        if len(x) < min_records:
            raise ValueError(f"fit_latency_mixture: {len(x)} real waits in the span, need {min_records}")
        if modes == 2:
            share, m1, s1, m2, s2 = _two_gaussians(x)
            values = (share, np.exp(m1), s1, np.exp(m2), s2)
        elif modes == 1:
            values = (0.0, 0.0, 0.0, np.exp(x.mean()), x.std())
        elif modes == 0:
            values = (0.0, 0.0, 0.0, np.exp(np.median(x)), 0.0)
        else:
            raise ValueError(f"fit_latency_mixture: modes must be 0, 1 or 2, got {modes}")
        rows.append((bucket, *(round(float(v), 6) for v in values)))
    return tuple(rows)


#: Real first-attempt waits at or below this are the scheduler's own overhead, not queueing: the fast mode of the
#: waits (median ~13 s, sigma ~0.4 in log seconds) puts 40 s about 2.7 sigma above its median, and the slow
#: mode (medians of minutes to hours) has little mass below it.
OVERHEAD_CUT_S = 40.0


def fit_overhead_latency(real_waits: pd.DataFrame, span: tuple, cut_s: float = OVERHEAD_CUT_S,
                         min_records: int = 20) -> tuple:
    """The scheduler's own overhead: a lognormal per size bucket fitted to the real waits at or below ``cut_s``.

    Only the launch overhead is drawn; every longer wait must come from the
    simulated contention. Median and sigma of the log waits (floored at 1 s)
    submitted in ``span``; rows of :data:`LATENCY_FIELDS` with a fast-mode share
    of 1, one ``"all"`` row and one per bucket of the records with ``min_records``.
    """
    part = in_span(real_waits, span)
    part = part[part["first_wait_s"] <= cut_s]
    groups = [("all", part)] + [(b, part[part["bucket"] == b]) for b in DELAY_BUCKETS
                                if (part["bucket"] == b).sum() >= min_records]
    rows = []
    for bucket, group in groups:
        x = np.log(np.maximum(group["first_wait_s"].to_numpy(float), 1.0))
        if len(x) < min_records:
            raise ValueError(f"fit_overhead_latency: {len(x)} real waits <= {cut_s:g} s in the span, "
                             f"need {min_records}")
        rows.append((bucket, 1.0, round(float(np.exp(np.median(x))), 6), round(float(x.std()), 6), 0.0, 0.0))
    return tuple(rows)


def latency_row(mixture: tuple, bucket: str) -> tuple:
    """The row of a fitted latency model that jobs of size ``bucket`` draw from: their bucket's, else ``"all"``."""
    rows = {row[0]: row for row in mixture}
    if bucket not in rows and "all" not in rows:
        raise ValueError(f"latency_mixture has no row for size bucket {bucket!r} and no 'all' row")
    return rows.get(bucket, rows.get("all"))


def latency_cdf(row: tuple, seconds: np.ndarray) -> np.ndarray:
    """CDF at ``seconds`` of the latency one row of a fitted model (:data:`LATENCY_FIELDS`) draws."""
    _, share, fast_median, fast_sigma, slow_median, slow_sigma = row

    def lognormal(median, sigma):
        if sigma <= 0:
            return (seconds >= median).astype(float)
        return stats.norm.cdf((np.log(seconds) - np.log(median)) / sigma)

    slow = lognormal(slow_median, slow_sigma)
    return share * lognormal(fast_median, fast_sigma) + (1.0 - share) * slow if share > 0 else slow


def scheduler_latency(params, num_gpus, seed: int = 0) -> np.ndarray:
    """Each job's scheduler latency (s), from ``params.latency_mixture`` if given, else the single lognormal.

    Real jobs wait between submit and start even on an idle cluster (launch,
    image and data staging), and not all equally long. Single lognormal:
    ``latency_s`` x a factor of median 1 and sigma ``latency_spread``.
    Seeded, so a replay is deterministic; rounded to whole milliseconds, so it is the same on every CPU.
    """
    n_jobs = len(num_gpus)
    rng = np.random.default_rng([seed, 7919])
    z = rng.standard_normal(n_jobs)
    if params.latency_mixture:
        fast_draw = rng.random(n_jobs)
        bucket = size_bucket(pd.Series(np.asarray(num_gpus, float))).astype(str).to_numpy()
        out = np.empty(n_jobs)
        for name in np.unique(bucket):
            _, share, fast_median, fast_sigma, slow_median, slow_sigma = latency_row(params.latency_mixture, name)
            at = bucket == name
            fast = fast_draw[at] < share
            out[at] = np.where(fast, fast_median * np.exp(fast_sigma * z[at]), slow_median * np.exp(slow_sigma * z[at]))
    elif params.latency_s <= 0:
        return np.zeros(n_jobs)
    else:
        out = float(params.latency_s) * np.exp(float(params.latency_spread) * z)
    # whole milliseconds: numpy's exp() differs in the last bit between SIMD paths, and the order of two arrivals
    # must not hang on it
    return np.round(out, 3)



def retry_overheads(rep: Replay, seed: int = 1) -> np.ndarray:
    """A fresh draw of the replay's scheduler overhead for each attempt after a job's first
    (:func:`.fig3.attempt_waits`)."""
    att = rep.result.attempts
    later = att[att["attempt"] > 0]
    return scheduler_latency(rep.params, later["num_gpus"].to_numpy(), seed) if len(later) else np.zeros(0)
