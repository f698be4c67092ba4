"""What a simulation returns: per-job records, attempts, a cluster time series, a summary.

Times are seconds since the workload's epoch (``*_s`` columns); ``submitted``
is the UTC timestamp. Per job:

* ``queueing_delay_s`` = first start - arrival (the trace's definition),
  ``jct_s`` = end - arrival, ``run_time_s`` = end - first start;
* ``wait_s`` = all time spent waiting (first wait and re-queues), split
  exactly into ``delay_fair_share_s + delay_fragmentation_s + delay_backoff_s``
  (see :mod:`dlcluster.sim.causes` for the causes);
* the same back-off and fragmentation time split again, exactly, by what held
  the job (:mod:`dlcluster.sim.causes`): ``held_by_timer_s`` (the back-off timer alone)
  and ``locality_relaxed_s``, ``locality_placed_s``, ``locality_contended_s``
  (no placement met its locality, in stretches that ended at a relax timeout,
  at its start where it waited, or when the GPUs went);
* ``gpu_time_s`` = sum over attempts of duration x GPUs; ``held_gpu_s`` = GPU-seconds it held
  while it waited (:mod:`.gang`; 0 without gang holds);
* ``num_servers``, ``num_racks``, ``locality``: of the first full-gang attempt.

Status is ``Pass`` (finished, possibly stopped early at convergence),
``Failed`` (gave up after failures) or ``Rejected`` (can never run: needs more
GPUs than exist, or than its VC's quota with lending off; never started).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np
import pandas as pd

from .jobs import CAUSE_NAMES, LOCALITY_END_NAMES, OUTCOME_NAMES
from .placement import Locality
from .sampler import COUNTS
from .topology import Topology

LEVEL_NAMES = tuple(level.name.lower() for level in Locality)


@dataclass
class SimResult:
    jobs: pd.DataFrame
    attempts: pd.DataFrame
    timeseries: pd.DataFrame
    summary: dict
    topology: Topology
    epoch: pd.Timestamp
    attempt_gpus: list = field(repr=False, default_factory=list)

    def delay_by_cause(self) -> pd.DataFrame:
        """Waiting time by cause per job-size bucket (1, 2-4, 5-8, >8 GPUs): the ground truth for Table 2.

        Columns: jobs, jobs that waited, mean wait (s), the share of waiting
        time per cause, and ``paper_fragmentation_share``: the VC had the GPUs
        but no placement met the job's locality (fragmentation and back-off,
        less the time a back-off timer alone held the job; Table 2's definition).
        """
        from ..trace.schema import SIZE_BUCKETS, size_bucket

        ran = self.jobs[self.jobs["status"] != "Rejected"]
        causes = [f"delay_{name}_s" for name in CAUSE_NAMES]
        grouped = ran.groupby(size_bucket(ran["num_gpus"]), observed=False)
        table = pd.DataFrame({"jobs": grouped.size(),
                              "jobs_waited": grouped["wait_s"].apply(lambda w: int((w > 0).sum())),
                              "mean_wait_s": grouped["wait_s"].mean()})
        totals = grouped[causes].sum()
        waited = totals.sum(axis=1).replace(0.0, np.nan)
        for name, column in zip(CAUSE_NAMES, causes, strict=True):
            table[f"{name}_share"] = totals[column] / waited
        locality = ran[[f"locality_{name}_s" for name in LOCALITY_END_NAMES]].sum(axis=1)
        by_bucket = locality.groupby(size_bucket(ran["num_gpus"]), observed=False).sum()
        table["paper_fragmentation_share"] = by_bucket / waited
        return table.reindex(list(SIZE_BUCKETS)).rename_axis("size")

    def placements(self) -> pd.DataFrame:
        """One row per GPU of each attempt: jobid, attempt, machine, gpu (like the trace's placements)."""
        names = self.topology.server_names
        rows = []
        for (jobid, attempt), alloc in zip(self.attempts[["jobid", "attempt"]].itertuples(index=False),
                                           self.attempt_gpus, strict=True):
            for s, mask in alloc:
                rows.extend((jobid, attempt, names[s], g) for g in range(mask.bit_length()) if mask >> g & 1)
        return pd.DataFrame(rows, columns=["jobid", "attempt", "machine", "gpu"])

    @classmethod
    def build(cls, sim, samples, wall_s: float, end_time: float) -> "SimResult":
        w, jobs = sim.workload, sim.jobs
        n = len(jobs)
        log = sim.attempt_log
        columns = list(zip(*log, strict=True)) if log else [()] * 9
        job_of, start, end, outcome, alloc, level, prerun, gpus, racks = columns
        job_of = np.asarray(job_of, dtype=np.int64)
        start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        gpus = np.asarray(gpus, dtype=np.int64)
        order = np.lexsort((start, job_of))  # attempts of a job in time order
        job_of = job_of[order]
        attempt_no = np.arange(len(order)) - np.searchsorted(job_of, job_of, side="left")
        attempt_gpus = [alloc[i] for i in order]
        attempts = pd.DataFrame({
            "jobid": w.jobid[job_of],
            "attempt": attempt_no.astype(np.int64),
            "start_s": start[order], "end_s": end[order],
            "outcome": pd.Categorical.from_codes(np.asarray(outcome, dtype=np.int64)[order], OUTCOME_NAMES),
            "num_gpus": gpus[order],
            "num_servers": np.fromiter((len(a) for a in attempt_gpus), dtype=np.int64, count=len(order)),
            "num_racks": np.asarray(racks, dtype=np.int64)[order],
            "locality": pd.Categorical.from_codes(np.asarray(level, dtype=np.int64)[order], LEVEL_NAMES),
            "prerun": np.asarray(prerun, dtype=bool)[order],
        })
        gpu_time = np.bincount(job_of, weights=(attempts["end_s"] - attempts["start_s"]).to_numpy()
                               * attempts["num_gpus"].to_numpy(), minlength=n)
        gang = np.flatnonzero(~attempts["prerun"].to_numpy())
        first_gang = np.full(n, -1)
        first_gang[job_of[gang][::-1]] = gang[::-1]  # the earliest gang attempt of each job wins
        has = first_gang >= 0
        pick = first_gang[has]

        def of_first_gang(column, missing):
            out = np.full(n, missing, dtype=np.int64)
            out[has] = np.asarray(attempts[column].cat.codes if column == "locality" else attempts[column])[pick]
            return out

        def column(name, dtype):   # one job attribute, read straight into its array (~10^5 jobs)
            return np.fromiter(map(attrgetter(name), jobs), dtype=dtype, count=n)

        status = np.array([j.status for j in jobs], dtype=object)
        first_start = np.fromiter((np.nan if j.first_start is None else j.first_start for j in jobs), float, n)
        job_end = column("end_time", float)
        n_att, n_fail = column("num_attempts", np.int64), column("failures", np.int64)
        n_pre, n_mig = column("preemptions", np.int64), column("migrations", np.int64)
        early, held = column("early_stopped", bool), column("held_s", float)
        locality_end = np.array([j.locality_end for j in jobs], dtype=float).T
        arrival = w.arrival_s.astype(float)
        delay = np.array([j.delay for j in jobs], dtype=float)   # a row per job, a column per cause
        fail_names = np.array([None] + [c.name for c in sim.failure_classes], dtype=object)
        fail_class = sim.draws.job_class if sim.draws is not None else np.full(n, -1)
        frame = pd.DataFrame({
            "jobid": w.jobid, "vc": w.vc, "user": w.user, "num_gpus": w.num_gpus.astype(np.int64),
            "submitted": w.epoch + pd.to_timedelta(arrival, unit="s"), "arrival_s": arrival,
            "service_s": w.service_s.astype(float), "status": status,
            "first_start_s": first_start, "end_s": job_end,
            "queueing_delay_s": first_start - arrival, "jct_s": job_end - arrival,
            "run_time_s": job_end - first_start, "gpu_time_s": gpu_time, "wait_s": delay.sum(axis=1),
            **{f"delay_{name}_s": delay[:, i] for i, name in enumerate(CAUSE_NAMES)},
            "held_by_timer_s": held,
            **{f"locality_{name}_s": secs for name, secs in zip(LOCALITY_END_NAMES, locality_end, strict=True)},
            "num_attempts": n_att, "num_failures": n_fail, "num_preemptions": n_pre, "num_migrations": n_mig,
            "num_servers": pd.Series(of_first_gang("num_servers", 0), dtype="Int64").mask(~has),
            "num_racks": pd.Series(of_first_gang("num_racks", 0), dtype="Int64").mask(~has),
            "locality": pd.Categorical.from_codes(of_first_gang("locality", -1), LEVEL_NAMES),
            "early_stopped": early,
            "held_gpu_s": np.asarray(sim.gang_holds.gpu_s if sim.gang_holds is not None else np.zeros(n), dtype=float),
            "fail_class": fail_names[np.asarray(fail_class) + 1],
        })
        frame["rejection"] = pd.Series(sim.rejections, dtype=object).reindex(range(n)).to_numpy()

        timeseries = _timeseries(samples, sim.vc_names)
        summary = _summary(sim, frame, attempts, wall_s, end_time)
        return cls(jobs=frame, attempts=attempts, timeseries=timeseries, summary=summary, topology=sim.topology,
                   epoch=w.epoch, attempt_gpus=attempt_gpus)


def _timeseries(samples, vc_names) -> pd.DataFrame:
    """The samples as columns: time_s (float) and counts (int64), each VC's GPUs in use as ``vc_<name>``."""
    times, table = samples.table(len(vc_names))
    frame = pd.DataFrame(table, columns=[*COUNTS, *(f"vc_{v}" for v in vc_names)], copy=False)
    frame.insert(0, "time_s", times)
    return frame


def _summary(sim, jobs: pd.DataFrame, attempts: pd.DataFrame, wall_s: float, end_time: float) -> dict:
    started = jobs[jobs["first_start_s"].notna()]
    ran = jobs[jobs["status"] != "Rejected"]
    delays = {name: float(jobs[f"delay_{name}_s"].sum()) for name in CAUSE_NAMES}
    total_delay = sum(delays.values())
    cap = sim.topology.total_gpus
    return {
        "policy": repr(sim.policy), "placement": repr(sim.placement), "lending": sim.lending,
        "max_capacity": sim.max_capacity, "reclaim": repr(sim.reclaim) if sim.reclaim is not None else None,
        "workload": sim.workload.source, "topology": sim.topology.describe(), "seed": sim.seed,
        "jobs": len(jobs), "status": {k: int(v) for k, v in jobs["status"].value_counts(sort=False).items()},
        "early_stopped": int(jobs["early_stopped"].sum()),
        "events": sim.events_processed, "wall_s": wall_s,
        "events_per_s": sim.events_processed / wall_s if wall_s > 0 else float("nan"),
        "end_time_s": end_time,
        "queueing_delay_s": {"mean": float(started["queueing_delay_s"].mean()),
                             "median": float(started["queueing_delay_s"].median()),
                             "p95": float(started["queueing_delay_s"].quantile(0.95))},
        "jct_s": {"mean": float(ran["jct_s"].mean()), "median": float(ran["jct_s"].median())},
        "wait_by_cause_s": delays,
        "wait_share_by_cause": {k: (v / total_delay if total_delay else 0.0) for k, v in delays.items()},
        "gpu_time_s": float(jobs["gpu_time_s"].sum()),
        "allocated_gpu_s": sim.allocated_gpu_s,
        "held_gpu_s": float(jobs["held_gpu_s"].sum()),
        "mean_allocation": sim.allocated_gpu_s / (cap * end_time) if end_time > 0 else 0.0,
        "preemptions": int(jobs["num_preemptions"].sum()), "migrations": int(jobs["num_migrations"].sum()),
        "attempts": len(attempts),
        "vcs_without_quota": sim.vcs_without_quota,
        "workload_excluded": dict(sim.workload.excluded),
        "rejections": {k: int(v) for k, v in pd.Series(sim.rejections, dtype=object).value_counts(sort=False).items()},
    }
