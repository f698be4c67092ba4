"""Each VC's maximum capacity taken from its own demand, not one factor for every VC.

The public node counts give 11 VCs a guarantee; nothing public gives their
maximum capacities (YARN's elastic caps). One factor x quota for every VC
(:func:`dlcluster.validation.calibrate.max_capacity`) caps VCs whose demand
differs by orders of magnitude alike: a VC that used about its quota is capped
for days, one that used a tenth of it never. The method here: a VC's cap is
the ``quantile`` of its own *offered demand* (the GPUs its jobs would hold if
none ever waited: each job from its submit to submit + its service time),
sampled every ``step_s`` over a span (the calibration's fit span), and never
below its quota or ``min_gpus``. So each VC may borrow up to what it needed at
that quantile of the time, and queues only at its own peaks. The quantile is
one fitted number; each VC's cap follows from its own jobs.

The quantile is ``inverted_cdf``: a demand level the VC actually had.
"""

from __future__ import annotations

import numpy as np


def offered_demand(arrival_s, service_s, num_gpus, times_s) -> np.ndarray:
    """GPUs held at each of ``times_s`` by jobs running from arrival to arrival + service (no waiting)."""
    arrival_s, service_s = np.asarray(arrival_s, float), np.asarray(service_s, float)
    gpus = np.asarray(num_gpus, dtype=np.int64)
    starts = np.sort(arrival_s, kind="stable")
    start_gpus = gpus[np.argsort(arrival_s, kind="stable")]
    ends = arrival_s + service_s
    end_order = np.argsort(ends, kind="stable")
    started = np.concatenate([[0], np.cumsum(start_gpus)])[np.searchsorted(starts, times_s, side="right")]
    ended = np.concatenate([[0], np.cumsum(gpus[end_order])])[np.searchsorted(ends[end_order], times_s, side="right")]
    return started - ended


def demand_caps(workload, begin_s: float, end_s: float, quantile: float, quotas: dict | None = None,
                step_s: float = 3600.0, min_gpus: int = 8) -> dict:
    """``{vc: cap}``: the ``quantile`` of each VC's offered demand in [begin_s, end_s), at least its quota."""
    if not 0 < quantile <= 1:
        raise ValueError(f"demand_caps: quantile must be in (0, 1], got {quantile!r}")
    if not end_s > begin_s:
        raise ValueError(f"demand_caps: empty span {begin_s}..{end_s}")
    times = np.arange(begin_s, end_s, step_s)
    vcs = np.asarray(workload.vc, dtype=str)
    caps = {}
    for vc in np.unique(vcs):
        mine = vcs == vc
        demand = offered_demand(workload.arrival_s[mine], workload.service_s[mine], workload.num_gpus[mine], times)
        level = int(np.quantile(demand, quantile, method="inverted_cdf"))
        caps[str(vc)] = max(level, int((quotas or {}).get(str(vc), 0)), int(min_gpus))
    return caps
