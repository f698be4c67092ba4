"""The simulator's replay of the real jobs, set beside the real cluster's queueing (Table 2 from a replay).

:func:`replay_public_workload` replays the real Pollux jobs on the real
machines with the public VC quotas (Philly policy); :func:`dre_like` picks the
replayed jobs the way the public DRE records were selected, and
:func:`compare_delays` sets their waits beside the real ones.
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..analysis.delays import require_columns
from ..trace.schema import SIZE_BUCKETS, size_bucket


@dataclass(frozen=True)
class Replay:
    """A simulated replay of real jobs, with what it ran on: the one replay record of the library.

    Notebook 01's replay of the Pollux jobs (:func:`replay_public_workload`) fills the first four fields;
    a calibrated replay (:func:`dlcluster.validation.calibrate.run_replay`) also its parameters, its
    workload and each job's scheduler latency.
    """

    result: object          # dlcluster.sim.SimResult
    topology: object        # dlcluster.sim.Topology
    quotas: dict | None     # VC -> GPUs (None: no quotas)
    lending: bool           # may a VC borrow idle GPUs beyond its quota
    params: object = None   # calibrate.ReplayParams of a calibrated replay
    replay: object = None   # workload.ReplayWorkload it replayed (calibrated replay)
    latency_s: np.ndarray | None = None  # each job's scheduler latency, in workload order (calibrated replay)

    @property
    def racks(self) -> dict:
        """Server -> rack of the simulated cluster (for the 'rack' locality rule)."""
        return dict(zip(self.topology.server_names, self.topology.server_rack, strict=True))


def replay_public_workload(trace, max_jobs: int | None = None, start: pd.Timestamp | None = None,
                           racks: int | None = None, locality: str = "relax", lending: bool = True,
                           seed: int = 0) -> Replay:
    """Simulate the real Pollux jobs on the real machines with the public VC quotas (Philly policy).

    ``start`` keeps jobs submitted at or after it and ``max_jobs`` the first
    that many of them by submit time (a shorter run; the cluster starts empty).
    ``racks`` keeps only the first that many racks of the real machines (a
    smaller, busier cluster), with every VC quota scaled by the share of GPUs
    kept (rounded). ``locality``: the Philly policy's locality mode
    ("relax": relax after a timeout, "strict", "any"); ``lending``: VCs may
    borrow idle GPUs beyond their quota.
    """
    from ..sim import PhillyPolicy, public_inputs, simulate, topology_from_machines

    inputs = public_inputs(trace=trace)
    topology, quotas = inputs.topology, inputs.quotas
    if racks is not None:
        if not 1 <= int(racks) <= topology.num_racks:
            raise ValueError(f"racks must be in 1..{topology.num_racks}, got {racks!r}")
        kept = {name for name, rack in zip(topology.server_names, topology.server_rack, strict=True)
                if rack < int(racks)}
        smaller = topology_from_machines(trace.machines[trace.machines["machine"].isin(kept)])
        quotas = {vc: int(round(q * smaller.total_gpus / topology.total_gpus)) for vc, q in quotas.items()}
        topology = smaller
    workload = inputs.workload
    order = np.argsort(workload.arrival_s, kind="stable")
    if start is not None:
        from_s = (pd.Timestamp(start) - workload.epoch) / pd.Timedelta(seconds=1)
        order = order[workload.arrival_s[order] >= from_s]
    if max_jobs is not None:
        order = order[: int(max_jobs)]
    if len(order) == 0:
        raise ValueError(f"no Pollux job submitted at or after {start} to replay")
    result = simulate(workload.take(order), topology, PhillyPolicy(locality=locality), quotas=quotas,
                      lending=lending, seed=seed)
    return Replay(result=result, topology=topology, quotas=quotas, lending=lending)


def dre_like(jobs: pd.DataFrame, begin: pd.Timestamp, end: pd.Timestamp,
             min_run_time_s: float = 300.0) -> pd.DataFrame:
    """Jobs chosen as the public DRE records were: multi-GPU, started, run >= 5 min, submitted in [begin, end].

    Returns ``bucket`` and ``delay_s`` (first wait) for :func:`compare_delays`.
    """
    require_columns(jobs, ["num_gpus", "submitted", "run_time_s", "queueing_delay_s"], "jobs")
    gpus = pd.to_numeric(jobs["num_gpus"], errors="coerce").astype(float)
    keep = ((gpus >= 2) & jobs["queueing_delay_s"].notna() & (jobs["run_time_s"] >= min_run_time_s)
            & (jobs["submitted"] >= begin) & (jobs["submitted"] <= end))
    picked = jobs.loc[keep]
    return pd.DataFrame({"bucket": size_bucket(gpus[keep]).to_numpy(),
                         "delay_s": picked["queueing_delay_s"].astype(float).to_numpy()})


def compare_delays(real: pd.DataFrame, simulated: pd.DataFrame) -> pd.DataFrame:
    """Per size bucket: medians, 90th percentiles and a two-sample KS test of two delay samples.

    Both tables have ``bucket`` and ``delay_s``; buckets present in only one are listed with NaNs.
    """
    rows = []
    for b in SIZE_BUCKETS:
        r = real.loc[real["bucket"] == b, "delay_s"].to_numpy(float)
        s = simulated.loc[simulated["bucket"] == b, "delay_s"].to_numpy(float)
        if len(r) == 0 and len(s) == 0:
            continue
        both = len(r) > 0 and len(s) > 0
        with warnings.catch_warnings():   # scipy falls back to the asymptotic p-value where the exact one fails
            warnings.filterwarnings("ignore", "ks_2samp: Exact calculation unsuccessful", RuntimeWarning)
            ks = stats.ks_2samp(r, s) if both else None
        rows.append({
            "bucket": b, "real_n": len(r), "simulated_n": len(s),
            "real_median_s": np.median(r) if len(r) else np.nan,
            "simulated_median_s": np.median(s) if len(s) else np.nan,
            "real_p90_s": np.quantile(r, 0.9) if len(r) else np.nan,
            "simulated_p90_s": np.quantile(s, 0.9) if len(s) else np.nan,
            "ks_statistic": float(ks.statistic) if both else np.nan,
            "ks_p": float(ks.pvalue) if both else np.nan,
        })
    return pd.DataFrame(rows).set_index("bucket")
