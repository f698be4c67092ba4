"""The paper's design implications (section 5) as measured simulator experiments.

Every experiment replays the real Philly jobs (the 82,247 Pollux-derived jobs
with their VCs) on the reconstructed machines with the public VC quotas
(:mod:`dlcluster.sim`), one *cell* per (setting, seed, load), run by
:func:`dlcluster.sweep.run_sweep` through :func:`run_cell`. The five
experiments (``experiment`` parameter of a cell):

1. ``locality``: strict locality vs Philly's relax-after-timeout (sweeping the
   timeout) vs no locality at all; long jobs held to strict locality (their
   duration known in advance: an oracle) or migrated to a tighter placement.
2. ``interference``: packing jobs onto busy servers (best fit) vs spreading
   them (most free GPUs, Philly's rule) vs dedicated servers (a job only gets
   servers no other job uses); migration (defragment + consolidate) on or off.
3. ``failures``: no failures (baseline) vs retry everything (Philly) vs
   class-aware retries vs pre-running multi-GPU jobs on one GPU first, under a
   failure model fitted to the public data or the simulator's illustrative one.
4. ``early_stop``: ending each job when it comes within a tolerance of its best
   metric, the point drawn from real learning curves; GPU-hours saved vs the
   quality lost.
5. ``policy``: FIFO, Philly, Tiresias 2D-LAS and Gittins, and preemptive SRTF
   (an oracle bound), all placing jobs best fit so that they differ in queue
   order, locality and preemption only.

**Seeds.** The simulator is deterministic for a given workload, so a seed
changes the workload: seed ``s`` replays a block bootstrap of the real jobs
(whole ``resample_block_days`` periods of the trace drawn with replacement,
keeping each job's VC, size, duration and time of day within its period) and
seeds the failure and convergence draws. Confidence intervals across seeds
therefore say how much a result depends on which weeks of jobs the cluster
saw. ``resample_block_days=0`` replays the trace as recorded.

**Load.** The public jobs on the full reconstructed cluster keep only ~21% of
servers busy, against 74% in the real occupancy data (``trace.occupancy``).
A cell's ``load`` factor compresses inter-arrival times by that factor (x1 is
the real load); :func:`calibrated_load` finds the factor at which the
simulated share of busy servers matches the real occupancy ("calibrated to the
real occupancy").
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import textwrap
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from .sim import (Migration, PhillyPolicy, Topology, Workload, make_policy, quotas_from_table, simulate,
                  topology_from_machines, workload_from_trace)
from .sim.failures import RETRY_PRESETS, FailureModel, default_failure_model
from .trace.schema import SIZE_BUCKETS, size_bucket

EXPERIMENTS = ("calibrate", "locality", "interference", "failures", "early_stop", "policy")
BUCKETS = ("all",) + tuple(SIZE_BUCKETS)
#: results.json-safe spelling of each bucket (``>`` does not belong in a key).
BUCKET_KEYS = {"all": "all", "1": "1", "2-4": "2-4", "5-8": "5-8", ">8": "gt8"}
#: Modules whose source is the code version of a cell (see dlcluster.sweep).
CODE_MODULES = ("dlcluster.experiments", "dlcluster.sweep", "dlcluster.sim", "dlcluster.trace",
                "dlcluster.analysis.failures", "dlcluster.analysis.convergence", "dlcluster.curves",
                "dlcluster.classify")
#: A job that holds its GPUs at least this long counts as long (locality experiment).
LONG_JOB_S = 3600.0
POLICY_NAMES = {"fifo": "FIFO", "philly": "Philly", "las": "Tiresias 2D-LAS", "gittins": "Tiresias Gittins",
                "srtf": "SRTF (oracle bound)"}
RETRY_NAMES = {"none": "no failures (baseline)", "philly": "retry everything (Philly)",
               "adaptive": "class-aware retries", "prerun": "1-GPU pre-run + class-aware"}
FAILURE_MODEL_NAMES = {"fitted": "fitted to the public data", "illustrative": "illustrative (simulator default)"}


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Inputs:
    """What every cell replays: the real jobs, the reconstructed machines, the VC quotas, the real occupancy."""

    workload: Workload
    topology: Topology
    quotas: dict
    real_occupancy: float
    occupancy_window: tuple[pd.Timestamp, pd.Timestamp]
    data_label: str


@functools.lru_cache(maxsize=2)
def _trace(trace: str):
    from .trace import load_trace
    return load_trace(trace, with_util=False)


@functools.lru_cache(maxsize=4)
def load_inputs(trace: str = "public", max_jobs: int | None = None, racks: int | None = None,
                start: str | None = None) -> Inputs:
    """The jobs (those submitted from ``start``, the first ``max_jobs`` of them, or all), machines and quotas.

    ``racks`` keeps only the first that many racks of the reconstructed
    machines (a small cluster for quick runs), every VC quota scaled by the
    share of GPUs kept (rounded), as :func:`dlcluster.analysis.queueing.replay_public_workload` does.
    """
    tr = _trace(trace)
    if tr.vc_quotas is None:
        raise ValueError(f"trace {trace!r} has no vc_quotas table: the experiments need VC quotas")
    if tr.occupancy is None or tr.occupancy.empty:
        raise ValueError(f"trace {trace!r} has no occupancy table: the load calibration needs it")
    workload = workload_from_trace(tr, source="pollux" if trace == "public" else None)
    order = np.argsort(workload.arrival_s, kind="stable")
    if start is not None:
        from_s = (pd.Timestamp(start, tz="UTC") - workload.epoch) / pd.Timedelta(seconds=1)
        order = order[workload.arrival_s[order] >= from_s]
    if max_jobs is not None:
        if int(max_jobs) != max_jobs or max_jobs < 1:
            raise ValueError(f"max_jobs must be a positive integer or None, got {max_jobs!r}")
        order = order[: int(max_jobs)]
    if len(order) == 0:
        raise ValueError(f"trace {trace!r}: no job submitted at or after {start}")
    if len(order) < len(workload):
        workload = workload.take(order)
    topology, quotas = topology_from_machines(tr.machines), quotas_from_table(tr.vc_quotas)
    if racks is not None:
        if int(racks) != racks or not 1 <= racks <= topology.num_racks:
            raise ValueError(f"racks must be an integer in 1..{topology.num_racks} or None, got {racks!r}")
        kept = {name for name, rack in zip(topology.server_names, topology.server_rack) if rack < racks}
        smaller = topology_from_machines(tr.machines[tr.machines["machine"].isin(kept)])
        quotas = {vc: int(round(q * smaller.total_gpus / topology.total_gpus)) for vc, q in quotas.items()}
        topology = smaller
    occ = tr.occupancy[tr.occupancy["total"] > 0]
    label = tr.describe_source("pollux")["label"] if trace == "public" else f"trace {trace!r}"
    return Inputs(workload=workload, topology=topology, quotas=quotas,
                  real_occupancy=float((occ["active"] / occ["total"]).mean()),
                  occupancy_window=(occ["time"].min(), occ["time"].max()), data_label=label)


def resample_periods(workload: Workload, seed: int, block_days: float) -> Workload:
    """A block bootstrap of ``workload``: its span cut into periods of about ``block_days``, drawn with replacement.

    Period ``k`` of the result holds the jobs of a randomly drawn period of the
    original, at the same offsets within it. Job ids get ``~k`` appended
    (a period can be drawn twice). ``block_days <= 0`` returns ``workload``.
    """
    if block_days <= 0:
        return workload
    arrival = workload.arrival_s.astype(float)
    start, span = float(arrival.min()), float(arrival.max() - arrival.min())
    n_blocks = max(1, int(round(span / (block_days * 86400.0))))
    if span == 0 or n_blocks == 1:
        return workload
    length = span / n_blocks
    block = np.minimum(((arrival - start) // length).astype(np.int64), n_blocks - 1)
    members = [np.flatnonzero(block == b) for b in range(n_blocks)]
    picks = np.random.default_rng([seed, 0xB10C]).integers(0, n_blocks, n_blocks)
    index = np.concatenate([members[b] for b in picks])
    position = np.concatenate([np.full(len(members[b]), k) for k, b in enumerate(picks)])
    offset = arrival[index] - start - block[index] * length
    optional = {name: None if getattr(workload, name) is None else getattr(workload, name)[index]
                for name in ("fail_class", "converge_frac")}
    return replace(workload, jobid=np.array([f"{j}~{k}" for j, k in zip(workload.jobid[index], position)],
                                            dtype=object),
                   vc=workload.vc[index], user=workload.user[index], arrival_s=start + position * length + offset,
                   num_gpus=workload.num_gpus[index], service_s=workload.service_s[index], **optional,
                   source=f"{workload.source}; {block_days:g}-day periods resampled (seed {seed})")


def scale_load(workload: Workload, factor: float) -> Workload:
    """Inter-arrival times divided by ``factor`` (x2 = twice the jobs per hour); the first arrival stays."""
    if not factor > 0:
        raise ValueError(f"load factor must be > 0, got {factor!r}")
    if factor == 1:
        return workload
    start = float(workload.arrival_s.min())
    return replace(workload, arrival_s=start + (workload.arrival_s - start) / factor,
                   source=f"{workload.source}; load x{factor:g}")


@functools.lru_cache(maxsize=2)
def fitted_failure_spec(trace: str = "public") -> dict:
    """The failure model of notebook 04: fitted from the trace's failed attempts and the classified log corpus.

    With the public data, P(failure) and the runtimes to failure come from the
    5,910 DRE records (multi-GPU jobs that ran at least 5 minutes: no RTF is
    shorter than 5 minutes) and the class shares from the corpus composition
    (by construction, not a frequency). ``notes`` says so.
    """
    from .analysis import failures as F
    from .classify import classify_dir, load_rules
    from .paths import data_dir

    logs_dir = data_dir() / "failure_logs"
    logs = classify_dir(logs_dir, load_rules())
    index = pd.read_csv(logs_dir / "index.csv", dtype=str).rename(columns={"category": "true_category"})
    logs = logs.merge(index, on="log_file", how="left", validate="one_to_one")
    tr = _trace(trace)
    mapped, _ = F.map_logs_to_trace(logs, tr.jobs, tr.attempts)
    outcomes, _ = F.attempt_outcomes(tr.jobs, tr.attempts)
    return F.fit_failure_model(mapped, outcomes, tr.jobs,
                               share_source="log corpus composition (by construction, NOT a measured frequency)")


def failure_model(name: str, trace: str = "public") -> FailureModel:
    if name == "fitted":
        return FailureModel.from_dict(fitted_failure_spec(trace))
    if name == "illustrative":
        return default_failure_model()
    raise ValueError(f"failure_model must be one of {sorted(FAILURE_MODEL_NAMES)}, got {name!r}")


def quality_lost(curve: pd.DataFrame, within_tol_epoch: int) -> float:
    """Relative gap between the best value reached by ``within_tol_epoch`` and the curve's best (>= 0)."""
    values = curve["value"].to_numpy(float)
    direction = curve["direction"].iloc[0]
    finite = np.isfinite(values)
    pick = np.nanmin if direction == "lower" else np.nanmax
    best = float(pick(np.where(finite, values, np.nan)))
    upto = values[:within_tol_epoch]
    reached = float(pick(np.where(np.isfinite(upto), upto, np.nan)))
    gap = reached - best if direction == "lower" else best - reached
    return gap / abs(best) if best != 0 else gap


@functools.lru_cache(maxsize=16)
def early_stop_points(source: str, tolerance: float) -> pd.DataFrame:
    """Per real learning curve: the share of its time after which it is within ``tolerance`` of its best,
    and the quality lost by stopping there (relative to its best).

    ``source``: ``"pollux"`` (the real validation curves of six DL models) or
    ``"corpus"`` (the project's real CPU training runs, training loss). Curves
    without a finite value are left out (counted in ``attrs["dropped"]``).
    """
    from .analysis.convergence import summarize_curves
    from .curves import load_corpus, load_pollux_curves

    if source == "pollux":
        curves = load_pollux_curves().curves
    elif source == "corpus":
        curves = load_corpus().curves
        curves = curves[curves["metric"] == "train_loss"]
    else:
        raise ValueError(f"curve source must be 'pollux' or 'corpus', got {source!r}")
    summary = summarize_curves(curves, tolerance)
    measured = summary[summary["within_tol_epoch"].notna()]
    by_key = dict(iter(curves.groupby(["source", "job", "metric"], sort=False)))
    lost = [quality_lost(by_key[(r.source, r.job, r.metric)].sort_values("epoch"), int(r.within_tol_epoch))
            for r in measured.itertuples()]
    out = pd.DataFrame({"job": measured["job"].to_numpy(), "time_fraction": measured["time_to_within_tol_frac"]
                        .to_numpy(float), "quality_lost": np.asarray(lost, dtype=float)})
    out.attrs["dropped"] = int(len(summary) - len(measured))
    return out


def inputs_fingerprint(trace: str, max_jobs: int | None = None, racks: int | None = None,
                       start: str | None = None, curve_source: str = "pollux") -> str:
    """sha256 of everything a cell reads besides code: jobs, machines, quotas, occupancy, failure fit, curves.

    Put it in every cell so that the sweep cache notices changed data.
    """
    inputs = load_inputs(trace, max_jobs, racks, start)
    w = inputs.workload
    digest = hashlib.sha256()
    for array in (w.arrival_s.astype(float), w.num_gpus.astype(np.int64), w.service_s.astype(float)):
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update("\x1f".join(map(str, w.vc)).encode())
    digest.update(json.dumps([inputs.topology.server_gpus, inputs.topology.server_rack, inputs.quotas,
                              inputs.real_occupancy], sort_keys=True).encode())
    digest.update(json.dumps(fitted_failure_spec(trace), sort_keys=True, default=str).encode())
    digest.update(pd.util.hash_pandas_object(early_stop_points(curve_source, 0.001)).to_numpy().tobytes())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- policies and placements


class LongJobsStrictPolicy(PhillyPolicy):
    """Philly's relax-after-timeout, except that long jobs (service >= ``long_job_s``) never relax.

    Knowing which jobs are long is an oracle here (each job's duration from
    the trace); in practice it would be a user's estimate.
    """

    name = "philly-long-strict"

    def __init__(self, long_job_s: float = LONG_JOB_S, relax_after_s: float = 180.0):
        super().__init__(locality="relax", relax_after_s=relax_after_s)
        self.long_job_s = float(long_job_s)

    def on_wait(self, job, now, sim):
        if job.service < self.long_job_s:
            super().on_wait(job, now, sim)


class DedicatedPlacement:
    """Isolation: a job only gets servers no other job uses, and no other job joins them while it runs.

    Tightest level first (one server, then one rack, then anywhere); the
    smallest idle server that fits, racks needing the fewest servers. The
    GPUs a job leaves free on its servers stay unused: the price of isolation.
    """

    def __repr__(self) -> str:
        return "DedicatedPlacement()"

    def choose(self, cluster, num_gpus: int, min_level: int, max_level: int):
        if num_gpus > cluster.idle_gpus:  # GPUs on servers without any job
            return None
        cap, free = cluster.cap, cluster.free
        idle = sorted(s for k in range(1, cluster.max_cap + 1) for s in cluster.by_free[k] if cap[s] == k)
        for level in range(min_level, max_level + 1):
            if level == 0:
                fits = [s for s in idle if cap[s] >= num_gpus]
                if fits:
                    return [(min(fits, key=lambda s: (cap[s], s)), num_gpus)], level
            elif level == 1:
                best = None
                for servers in cluster.rack_servers:
                    counts = self._fill([s for s in servers if free[s] == cap[s]], cap, num_gpus)
                    if counts is not None:
                        rank = (len(counts), sum(cap[s] for s, _ in counts))
                        if best is None or rank < best[0]:
                            best = (rank, counts)
                if best is not None:
                    return best[1], level
            else:
                counts = self._fill(idle, cap, num_gpus)
                if counts is not None:
                    return counts, level
        return None

    @staticmethod
    def _fill(servers, cap, g):
        counts, remaining = [], g
        for s in sorted(servers, key=lambda s: (-cap[s], s)):
            take = min(cap[s], remaining)
            counts.append((s, take))
            remaining -= take
            if remaining == 0:
                return counts
        return None


# --------------------------------------------------------------------------- one cell


def _simulation_options(cell: dict, workload: Workload) -> tuple[object, dict, Workload, dict]:
    """Policy, simulator options, the workload (possibly with convergence points) and per-job extras."""
    experiment = cell["experiment"]
    extras = {}
    options = {}
    if experiment in ("calibrate", "failures", "early_stop"):
        policy = make_policy("philly")
    elif experiment == "locality":
        relax_after = float(cell.get("relax_after_s") or 180.0)
        long_jobs = cell.get("long_jobs", "as-others")
        if long_jobs == "strict":
            policy = LongJobsStrictPolicy(LONG_JOB_S, relax_after)
        else:
            policy = make_policy("philly", locality=cell["locality"], relax_after_s=relax_after)
        if long_jobs == "migrate":
            options["migration"] = Migration(defragment=False, consolidate=True, min_remaining_s=LONG_JOB_S)
        elif long_jobs not in ("as-others", "strict"):
            raise ValueError(f"long_jobs must be 'as-others', 'strict' or 'migrate', got {long_jobs!r}")
    elif experiment == "interference":
        policy = make_policy("philly")
        placement = cell["placement"]
        if placement not in ("pack", "spread", "dedicated"):
            raise ValueError(f"placement must be 'pack', 'spread' or 'dedicated', got {placement!r}")
        options["placement"] = {"pack": "best_fit", "spread": "most_free"}.get(placement) or DedicatedPlacement()
        if cell.get("migration", False):
            options["migration"] = Migration()
    elif experiment == "policy":
        # every policy places best fit, so that the comparison is of queue order, locality and preemption
        # (Philly's own most-free rule is compared with best fit in the interference experiment)
        policy = make_policy(cell["policy"])
        options["placement"] = "best_fit"
    else:
        raise ValueError(f"unknown experiment {experiment!r}; choose from {EXPERIMENTS}")
    if experiment == "failures":
        model = failure_model(cell["failure_model"], cell["trace"])
        retry = cell["retry"]
        if retry != "none":
            if retry not in RETRY_PRESETS:
                raise ValueError(f"retry must be 'none' or one of {sorted(RETRY_PRESETS)}, got {retry!r}")
            options["failures"], options["retry"] = model, retry
        # jobs the model hits, drawn as the simulator draws them (the class draw comes first): the baseline
        # run knows them too, so 'good jobs' are the same jobs in every arm
        extras["good"] = model.draws(len(workload), 1, cell["seed"]).job_class < 0
    if experiment == "early_stop" and cell.get("tolerance") is not None:
        points = early_stop_points(cell.get("curve_source", "pollux"), float(cell["tolerance"]))
        pick = np.random.default_rng([cell["seed"], 0xE4]).integers(0, len(points), len(workload))
        workload = replace(workload, converge_frac=np.clip(points["time_fraction"].to_numpy()[pick], 1e-6, 1.0))
        options["early_stop"] = True
        extras["quality_lost"] = points["quality_lost"].to_numpy()[pick]
    return policy, options, workload, extras


def run_cell(cell: dict) -> pd.DataFrame:
    """Run one cell (the sweep function): simulate and measure. See :data:`EXPERIMENTS` for ``experiment``.

    Common parameters: ``trace``, ``max_jobs``, ``racks``, ``seed``, ``resample_block_days``, ``load``.
    """
    inputs = load_inputs(cell["trace"], cell.get("max_jobs"), cell.get("racks"), cell.get("start"))
    workload = resample_periods(inputs.workload, int(cell["seed"]), float(cell.get("resample_block_days", 0)))
    workload = scale_load(workload, float(cell["load"]))
    policy, options, workload, extras = _simulation_options(cell, workload)
    result = simulate(workload, inputs.topology, policy, quotas=inputs.quotas, seed=int(cell["seed"]), **options)
    window = None
    if cell["experiment"] == "calibrate":
        window = _dates_window(inputs, workload, float(cell["load"]))
    return measure(result, workload, extras, window)


def _dates_window(inputs: Inputs, workload: Workload, factor: float):
    """Simulated times of the occupancy data's dates (under arrival compression), or None if disjoint."""
    first = float(workload.arrival_s.min())
    lo, hi = ((t - workload.epoch) / pd.Timedelta(seconds=1) for t in inputs.occupancy_window)
    lo, hi = first + (lo - first) / factor, first + (hi - first) / factor
    lo, hi = max(lo, first), min(hi, float(workload.arrival_s.max()))
    return (lo, hi) if hi > lo else None


# --------------------------------------------------------------------------- measures


def _busy_shares(result, topology: Topology, window) -> tuple[float, float]:
    ts = result.timeseries
    inside = (ts["time_s"] >= window[0]) & (ts["time_s"] <= window[1])
    if not inside.any():
        return float("nan"), float("nan")
    part = ts[inside]
    busy = 1.0 - part["idle_servers"] / topology.num_servers
    return float(busy.mean()), float((part["allocated_gpus"] / topology.total_gpus).mean())


def measure(result, workload: Workload, extras: dict | None = None, dates_window=None) -> pd.DataFrame:
    """Per size bucket (and ``all``) and population: delays, JCT, GPU time, speed, failures; plus cluster load.

    Rows: ``population`` ("all jobs", and "good jobs" when ``extras["good"]``
    marks the jobs without a failure), ``bucket``. Columns (times in seconds,
    GPU time in hours): jobs, rejected, jct_mean/p50/p95/p99, queue_mean/p95
    (first wait), frag_delay_mean (waiting with quota left but no placement
    meeting locality, back-off included, as the paper counts it),
    fair_share_delay_mean, gpu_hours (held), useful_share (GPU time of finished
    work at ideal speed / GPU time held), speed_mean (work / run time of jobs
    that finished with one run: slowdown from spread and colocation, migration
    pauses included), spread_share (first full attempt on > 1 server),
    failed_jobs, wasted_gpu_hours (failed attempts), prerun_gpu_hours,
    quality_lost_mean (early stop). Cluster columns, the same on every row:
    busy_server_share and allocated_gpu_share over the arrival span, and
    busy_server_share_dates over ``dates_window`` (NaN without one).
    """
    extras = extras or {}
    jobs = result.jobs
    n = len(jobs)
    att = result.attempts
    gpu_s = (att["end_s"] - att["start_s"]) * att["num_gpus"]
    failed_s = gpu_s.where(att["outcome"] == "failed", 0.0).groupby(att["jobid"]).sum()
    prerun_s = gpu_s.where(att["prerun"], 0.0).groupby(att["jobid"]).sum()
    had_prerun = att.loc[att["prerun"], "jobid"].unique()
    work = workload.service_s.astype(float)
    if workload.converge_frac is not None:
        work = work * np.where(jobs["early_stopped"].to_numpy(), workload.converge_frac, 1.0)
    passed = (jobs["status"] == "Pass").to_numpy()
    clean = passed & (jobs["num_failures"] == 0).to_numpy() & (jobs["num_preemptions"] == 0).to_numpy() \
        & ~jobs["jobid"].isin(had_prerun).to_numpy()
    frame = pd.DataFrame({
        "bucket": size_bucket(jobs["num_gpus"]).astype(str).to_numpy(),
        "ran": jobs["first_start_s"].notna().to_numpy(),
        "jct": jobs["jct_s"].to_numpy(float), "queue": jobs["queueing_delay_s"].to_numpy(float),
        "frag": (jobs["delay_fragmentation_s"] + jobs["delay_backoff_s"]).to_numpy(float),
        "fair": jobs["delay_fair_share_s"].to_numpy(float),
        "gpu_s": jobs["gpu_time_s"].to_numpy(float),
        "useful_s": np.where(passed, work * jobs["num_gpus"].to_numpy(), 0.0),
        "speed": np.where(clean, work / jobs["run_time_s"].where(jobs["run_time_s"] > 0).to_numpy(float), np.nan),
        "spread": (jobs["num_servers"].astype("Float64") > 1).astype("boolean").to_numpy(dtype=float, na_value=np.nan),
        "failed": (jobs["status"] == "Failed").to_numpy(),
        "wasted_s": failed_s.reindex(jobs["jobid"], fill_value=0.0).to_numpy(float),
        "prerun_s": prerun_s.reindex(jobs["jobid"], fill_value=0.0).to_numpy(float),
        "quality_lost": np.asarray(extras.get("quality_lost", np.full(n, np.nan)), dtype=float),
    })
    populations = [("all jobs", np.ones(n, dtype=bool))]
    if "good" in extras:
        populations.append(("good jobs", np.asarray(extras["good"], dtype=bool)))
    arrival = workload.arrival_s
    busy, allocated = _busy_shares(result, result.topology, (float(arrival.min()), float(arrival.max())))
    busy_dates = _busy_shares(result, result.topology, dates_window)[0] if dates_window else float("nan")
    rows = []
    for population, mask in populations:
        for bucket in BUCKETS:
            sel = frame[mask & ((frame["bucket"] == bucket).to_numpy() | (bucket == "all"))]
            ran = sel[sel["ran"]]
            rows.append({
                "population": population, "bucket": bucket, "jobs": len(sel), "rejected": int((~sel["ran"]).sum()),
                "jct_mean_s": ran["jct"].mean(), "jct_p50_s": _quantile(ran["jct"], 0.5),
                "jct_p95_s": _quantile(ran["jct"], 0.95), "jct_p99_s": _quantile(ran["jct"], 0.99),
                "queue_mean_s": ran["queue"].mean(), "queue_p95_s": _quantile(ran["queue"], 0.95),
                "frag_delay_mean_s": ran["frag"].mean(), "fair_share_delay_mean_s": ran["fair"].mean(),
                "gpu_hours": sel["gpu_s"].sum() / 3600.0,
                "useful_share": sel["useful_s"].sum() / sel["gpu_s"].sum() if sel["gpu_s"].sum() > 0 else np.nan,
                "speed_mean": sel["speed"].mean(), "spread_share": ran["spread"].mean(),
                "failed_jobs": int(sel["failed"].sum()), "wasted_gpu_hours": sel["wasted_s"].sum() / 3600.0,
                "prerun_gpu_hours": sel["prerun_s"].sum() / 3600.0, "quality_lost_mean": sel["quality_lost"].mean(),
                "busy_server_share": busy, "allocated_gpu_share": allocated, "busy_server_share_dates": busy_dates,
            })
    return pd.DataFrame(rows)


def _quantile(values: pd.Series, q: float) -> float:
    return float(values.quantile(q)) if len(values) else float("nan")


# --------------------------------------------------------------------------- grids


@dataclass(frozen=True)
class GridSpec:
    """How big a sweep is: the values each experiment sweeps (``small`` for CI, ``full`` for reports)."""

    start: str | None
    max_jobs: int | None
    racks: int | None
    resample_block_days: float
    calibration_loads: tuple[float, ...]
    relax_after_s: tuple[float, ...]
    tolerances: tuple[float, ...]
    failure_models: tuple[str, ...]
    policies: tuple[str, ...]
    # load settings: 'real' (x1), 'calibrated' (to the real occupancy) or a scaled factor
    experiment_loads: tuple  # experiments 1-4
    policy_loads: tuple      # experiment 5
    oracle_loads: tuple      # the loads at which SRTF runs (its preemptions make heavy loads slow to simulate)


GRIDS = {
    # 3,000 jobs from the first day of the occupancy data on 8 racks (838 GPUs): a quick run, not a result
    "small": GridSpec(start="2017-10-03", max_jobs=3000, racks=8, resample_block_days=0.5,
                      calibration_loads=(1.0, 2.0, 4.0, 8.0),
                      relax_after_s=(180.0,), tolerances=(0.01,), failure_models=("illustrative",),
                      policies=("fifo", "philly", "las"), experiment_loads=("calibrated",),
                      policy_loads=("real", "calibrated"), oracle_loads=()),
    "full": GridSpec(start=None, max_jobs=None, racks=None, resample_block_days=7.0,
                     calibration_loads=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0),
                     relax_after_s=(60.0, 180.0, 900.0, 3600.0), tolerances=(0.001, 0.01, 0.05),
                     failure_models=("fitted", "illustrative"), policies=tuple(POLICY_NAMES),
                     experiment_loads=("real", "calibrated", 4.0), policy_loads=("real", "calibrated", 6.0),
                     oracle_loads=("real", "calibrated")),
}


def grid_spec(name: str) -> GridSpec:
    if name not in GRIDS:
        raise ValueError(f"grid must be one of {sorted(GRIDS)}, got {name!r}")
    return GRIDS[name]


def _scope(spec: GridSpec) -> dict:
    return {"start": spec.start, "max_jobs": spec.max_jobs, "racks": spec.racks}


def calibration_cells(spec: GridSpec, trace: str, fingerprint: str) -> list[dict]:
    """Philly-policy replays of the trace as recorded at each calibration load factor."""
    from .sweep import expand_grid
    return expand_grid({"load": list(spec.calibration_loads)},
                       {"experiment": "calibrate", "trace": trace, **_scope(spec), "seed": 0,
                        "resample_block_days": 0, "load_setting": "calibration", "inputs": fingerprint})


def experiment_cells(spec: GridSpec, trace: str, fingerprint: str, seeds, calibrated: float) -> list[dict]:
    """The cells of the five experiments at their load settings (``calibrated``: the calibrated factor)."""
    from .sweep import expand_grid

    seeds = [int(s) for s in seeds]
    common = {"trace": trace, **_scope(spec), "resample_block_days": spec.resample_block_days,
              "inputs": fingerprint}
    cells = []

    def resolve(load):
        if load in ("real", "calibrated"):
            return load, 1.0 if load == "real" else float(calibrated)
        return "scaled", float(load)

    def add(experiment, loads, axes, fixed=None):
        for setting, factor in loads:
            cells.extend(expand_grid({**axes, "seed": seeds},
                                     {**common, **(fixed or {}), "experiment": experiment,
                                      "load_setting": setting, "load": factor}))

    loads = [resolve(lo) for lo in spec.experiment_loads]
    add("locality", loads, {"locality": ["strict", "any"]}, {"relax_after_s": None, "long_jobs": "as-others"})
    add("locality", loads, {"relax_after_s": list(spec.relax_after_s)}, {"locality": "relax", "long_jobs": "as-others"})
    add("locality", loads, {"long_jobs": ["strict", "migrate"]}, {"locality": "relax", "relax_after_s": 180.0})
    add("interference", loads, {"placement": ["pack", "spread"], "migration": [False, True]})
    add("interference", loads, {"placement": ["dedicated"]}, {"migration": False})
    add("failures", loads, {"failure_model": list(spec.failure_models),
                            "retry": ["none", "philly", "adaptive", "prerun"]})
    add("early_stop", loads, {"tolerance": [None, *spec.tolerances]}, {"curve_source": "pollux"})
    for load in spec.policy_loads:
        policies = [p for p in spec.policies if p != "srtf" or load in spec.oracle_loads]
        add("policy", [resolve(load)], {"policy": policies})
    return cells


# --------------------------------------------------------------------------- calibration


def calibrated_load(calibration: pd.DataFrame, target: float) -> float:
    """The load factor whose simulated busy-server share meets ``target`` (linear between grid points).

    Uses ``busy_server_share_dates`` (the occupancy data's dates) where every
    calibration row has it, else ``busy_server_share`` (the arrival span).
    Rounded to 0.01. Raises if the target lies outside the measured range.
    """
    rows = calibration[(calibration["bucket"] == "all") & (calibration["population"] == "all jobs")]
    rows = rows.sort_values("load")
    column = "busy_server_share_dates" if rows["busy_server_share_dates"].notna().all() else "busy_server_share"
    x, y = rows["load"].to_numpy(float), rows[column].to_numpy(float)
    for i in range(len(x) - 1):
        if (y[i] - target) * (y[i + 1] - target) <= 0 and y[i] != y[i + 1]:
            return round(float(x[i] + (target - y[i]) * (x[i + 1] - x[i]) / (y[i + 1] - y[i])), 2)
    if len(x) and np.isclose(y, target).any():
        return round(float(x[np.isclose(y, target)][0]), 2)
    raise ValueError(f"the real occupancy {target:.3f} is outside the simulated busy-server shares "
                     f"{np.round(y, 3).tolist()} at load factors {x.tolist()}: widen calibration_loads")


def load_key(setting: str, factor: float) -> str:
    """A load setting as a results.json key part: 'real', 'calibrated' or 'x4'."""
    return setting if setting in ("real", "calibrated") else f"x{factor:g}".replace(".", "_")


def load_label(setting: str, factor: float) -> str:
    """How a load setting is named in figures and sentences."""
    if setting == "real":
        return "the real load (x1)"
    if setting == "calibrated":
        return f"the load calibrated to the real occupancy (x{factor:g})"
    return f"load x{factor:g} (scaled)"


# --------------------------------------------------------------------------- confidence intervals


def seed_ci(values, confidence: float = 0.95, method: str = "t", n_boot: int = 2000, seed: int = 0):
    """Mean and confidence interval of per-seed values: Student t (``"t"``) or percentile bootstrap.

    Returns ``(mean, low, high, n)``; the interval is NaN with fewer than 2 values
    (or collapses to the mean when all values are equal).
    """
    v = pd.Series(values, dtype="float64").dropna().to_numpy()
    n = len(v)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = float(v.mean())
    if n < 2:
        return mean, float("nan"), float("nan"), n
    if method == "t":
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
        return mean, mean - half, mean + half, n
    if method == "bootstrap":
        means = np.random.default_rng(seed).choice(v, size=(n_boot, n), replace=True).mean(axis=1)
        low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
        return mean, float(low), float(high), n
    raise ValueError(f"method must be 't' or 'bootstrap', got {method!r}")


def summarize(table: pd.DataFrame, by: list[str], metrics: list[str], method: str = "t") -> pd.DataFrame:
    """Mean and CI across seeds of each metric, per group: columns ``by + [metric, mean, ci_low, ci_high, n]``."""
    rows = []
    for key, group in table.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            mean, low, high, n = seed_ci(group[metric], method=method)
            rows.append({**dict(zip(by, key)), "metric": metric, "mean": mean, "ci_low": low, "ci_high": high,
                         "n": n})
    return pd.DataFrame(rows, columns=[*by, "metric", "mean", "ci_low", "ci_high", "n"])


def paired_change(table: pd.DataFrame, arm: str, baseline, metric: str, keys: list[str],
                  relative: bool = False, method: str = "t") -> pd.DataFrame:
    """Per-seed change of ``metric`` against the baseline arm (same seed and ``keys``), then its mean and CI.

    ``relative``: the change as a share of the baseline value. Columns
    ``keys + [arm, mean, ci_low, ci_high, n]`` for every arm but the baseline.
    """
    base = table[table[arm] == baseline].set_index([*keys, "seed"])[metric]
    rows = []
    others = table[table[arm] != baseline]
    for key, group in others.groupby([*keys, arm], sort=False, dropna=False):
        values = group.set_index([*keys, "seed"])[metric]
        matched = base.reindex(values.index)
        change = values - matched
        if relative:
            change = (change / matched).replace([np.inf, -np.inf], np.nan)
        mean, low, high, n = seed_ci(change, method=method)
        rows.append({**dict(zip([*keys, arm], key)), "mean": mean, "ci_low": low, "ci_high": high, "n": n})
    return pd.DataFrame(rows, columns=[*keys, arm, "mean", "ci_low", "ci_high", "n"])


# --------------------------------------------------------------------------- arms


def _duration(seconds: float) -> str:
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            value = seconds / size
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{seconds:g} s"


def locality_arm(row) -> str:
    if row["long_jobs"] == "strict":
        return f"relax after {_duration(row['relax_after_s'])}, long jobs strict"
    if row["long_jobs"] == "migrate":
        return f"relax after {_duration(row['relax_after_s'])}, long jobs migrated"
    if row["locality"] == "relax":
        return f"relax after {_duration(row['relax_after_s'])}"
    return {"strict": "strict locality", "any": "no locality (any GPUs)"}[row["locality"]]


def interference_arm(row) -> str:
    name = {"pack": "pack (best fit)", "spread": "spread (Philly)", "dedicated": "dedicated servers"}[row["placement"]]
    return name + (" + migration" if bool(row["migration"]) else "")


def early_stop_arm(row) -> str:
    tol = row["tolerance"]
    return "no early stop" if tol is None or (isinstance(tol, float) and math.isnan(tol)) else f"stop within {tol:.1%}"


def with_arms(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep table with an ``arm`` label per row (what the experiment varies) and a ``load_label``."""
    out = table.copy()
    labels = {"locality": locality_arm, "interference": interference_arm, "early_stop": early_stop_arm,
              "policy": lambda r: POLICY_NAMES[r["policy"]], "failures": lambda r: RETRY_NAMES[r["retry"]],
              "calibrate": lambda r: "Philly"}
    out["arm"] = [labels[r["experiment"]](r) for _, r in out.iterrows()]
    out["load_label"] = [load_label(s, f) for s, f in zip(out["load_setting"], out["load"])]
    out["load_key"] = [load_key(s, f) for s, f in zip(out["load_setting"], out["load"])]
    return out


def arm_order(table: pd.DataFrame) -> list[str]:
    """Arms in grid order (the order cells were listed)."""
    return list(dict.fromkeys(table.sort_values("cell")["arm"]))


def load_order(table: pd.DataFrame) -> list[str]:
    """Load labels from the lightest to the heaviest."""
    return list(dict.fromkeys(table.sort_values(["load", "cell"])["load_label"]))


# --------------------------------------------------------------------------- per-experiment summaries

#: What each measured column means, for tables and axes.
METRIC_LABELS = {
    "queue_mean_s": "mean queueing delay", "jct_mean_s": "mean JCT", "jct_p99_s": "p99 JCT",
    "jct_p95_s": "p95 JCT", "useful_share": "useful share of GPU time", "speed_mean": "mean speed",
    "frag_delay_mean_s": "mean fragmentation delay", "spread_share": "share of jobs spread over servers",
}
TIME_METRICS = {"queue_mean_s", "jct_mean_s", "jct_p99_s", "jct_p95_s", "frag_delay_mean_s"}


def rows_of(table: pd.DataFrame, experiment: str, population: str = "all jobs") -> pd.DataFrame:
    """One experiment's rows of the sweep table (with arms), for one population."""
    rows = table[(table["experiment"] == experiment) & (table["population"] == population)]
    if rows.empty:
        raise ValueError(f"the sweep table has no rows for experiment {experiment!r}, population {population!r}")
    return rows


def failure_costs(table: pd.DataFrame) -> pd.DataFrame:
    """Experiment 3 per (failure model, load, retry policy): GPU time lost and delay added to good jobs.

    ``wasted_share`` / ``prerun_share``: GPU-hours of failed attempts / of
    pre-runs as a share of all GPU-hours of the run (mean and CI over seeds);
    ``good_jct_added_s``: the change in mean JCT of the jobs the failure model
    does not hit (the same jobs in every arm), against the run without
    failures of the same seed (paired).
    """
    allj = rows_of(table, "failures").query("bucket == 'all'").copy()
    allj["wasted_share"] = allj["wasted_gpu_hours"] / allj["gpu_hours"]
    allj["prerun_share"] = allj["prerun_gpu_hours"] / allj["gpu_hours"]
    keys = ["failure_model", "load_label"]
    shares = summarize(allj[allj["retry"] != "none"], [*keys, "arm"], ["wasted_share", "prerun_share"])
    shares = shares.pivot_table(index=[*keys, "arm"], columns="metric", values=["mean", "ci_low", "ci_high"],
                                sort=False)
    shares.columns = [f"{m}_{stat}" for stat, m in shares.columns]
    good = rows_of(table, "failures", "good jobs").query("bucket == 'all'")
    added = paired_change(good, "retry", "none", "jct_mean_s", keys).rename(
        columns={"retry": "arm", "mean": "good_jct_added_s", "ci_low": "good_jct_added_ci_low",
                 "ci_high": "good_jct_added_ci_high"})
    added["arm"] = added["arm"].map(RETRY_NAMES)
    return shares.reset_index().merge(added.drop(columns="n"), on=[*keys, "arm"], how="left")


def early_stop_savings(table: pd.DataFrame) -> pd.DataFrame:
    """Experiment 4 per (load, tolerance): GPU-hours saved and JCT change against no early stop (paired), and
    the quality lost (mean over jobs of the relative metric gap of their drawn curve)."""
    allj = rows_of(table, "early_stop").query("bucket == 'all'").copy()
    allj["tolerance"] = allj["tolerance"].astype(float)
    base = "no early stop"
    saved = paired_change(allj, "arm", base, "gpu_hours", ["load_label"], relative=True)
    jct = paired_change(allj, "arm", base, "jct_mean_s", ["load_label"], relative=True)
    quality = summarize(allj[allj["arm"] != base], ["load_label", "arm"], ["quality_lost_mean"])
    out = saved.rename(columns={"mean": "gpu_hours_change", "ci_low": "gpu_hours_change_ci_low",
                                "ci_high": "gpu_hours_change_ci_high"}).drop(columns="n")
    out = out.merge(jct.rename(columns={"mean": "jct_change", "ci_low": "jct_change_ci_low",
                                        "ci_high": "jct_change_ci_high"}).drop(columns="n"), on=["load_label", "arm"])
    out = out.merge(quality.rename(columns={"mean": "quality_lost", "ci_low": "quality_lost_ci_low",
                                            "ci_high": "quality_lost_ci_high"}).drop(columns="metric"),
                    on=["load_label", "arm"])
    tolerance = allj.drop_duplicates("arm").set_index("arm")["tolerance"]
    out["tolerance"] = out["arm"].map(tolerance)
    return out.sort_values(["load_label", "tolerance"]).reset_index(drop=True)


# --------------------------------------------------------------------------- sentences


def format_duration(seconds: float) -> str:
    """'45 s', '12.5 min', '3.2 h', '2.1 d' (n/a for NaN)."""
    if seconds is None or not np.isfinite(seconds):
        return "n/a"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _verb(before: float, after: float, up: str = "raised", down: str = "cut", rel_tol: float = 0.005) -> str:
    """How ``after`` compares with ``before``: up, down or 'left unchanged' (within ``rel_tol``)."""
    if not (np.isfinite(before) and np.isfinite(after)):
        return "changed (not computable)"
    if abs(after - before) <= rel_tol * max(abs(before), abs(after), 1e-12):
        return "left unchanged"
    return up if after > before else down


def _paired(rows: pd.DataFrame, base_arm: str, arm: str, metric: str,
            relative: bool = True) -> tuple[float, float, float]:
    """Change of ``metric`` from ``base_arm`` to ``arm`` over matched seeds (relative, or in the metric's
    unit): mean, CI low, CI high; NaN where a seed has no value (or a zero baseline, for a relative change)."""
    part = rows[rows["arm"].isin([base_arm, arm])]
    change = paired_change(part, "arm", base_arm, metric, [], relative=relative)
    seeds = part.loc[part["arm"] == arm, "seed"].nunique()
    if change.empty or change.iloc[0]["n"] < max(seeds, 2):
        return float("nan"), float("nan"), float("nan")
    row = change.iloc[0]
    return float(row["mean"]), float(row["ci_low"]), float(row["ci_high"])


def _signed_duration(seconds: float) -> str:
    return ("+" if seconds >= 0 else "−") + format_duration(abs(seconds))


def _delay_change_text(before: float, after: float, paired) -> str:
    """'1.0 min → 1.1 h, +1.1 h [95% CI +20.0 min, +1.9 h]': a change of a delay, in time (delays can be 0)."""
    text = f"{format_duration(before)} → {format_duration(after)}"
    mean, low, high = paired
    if np.isfinite(mean):
        text += f", {_signed_duration(mean)}"
        if np.isfinite(low) and np.isfinite(high):
            text += f" [95% CI {_signed_duration(low)}, {_signed_duration(high)}]"
    return text


def _change_text(before: float, after: float, paired=None) -> str:
    """'2.1 h → 1.5 h, −29% [95% CI −35%, −22%]': both means, and the paired relative change where known."""
    text = f"{format_duration(before)} → {format_duration(after)}"
    mean, low, high = paired if paired is not None else (float("nan"),) * 3
    if not np.isfinite(mean) and np.isfinite(before) and np.isfinite(after) and before > 0:
        mean = (after - before) / before
    if np.isfinite(mean):
        text += f", {_percent(mean)}"
        if np.isfinite(low) and np.isfinite(high):
            text += f" [95% CI {_percent(low)}, {_percent(high)}]"
    return text


def _percent(share: float) -> str:
    """A signed whole percentage: '+12%', '−3%', '±0%'."""
    value = round(100 * share)
    return "±0%" if value == 0 else f"{value:+d}%".replace("-", "−")


def _mean(rows: pd.DataFrame, metric: str, **where) -> float:
    sel = rows
    for column, value in where.items():
        sel = sel[sel[column] == value]
    return float(sel[metric].mean()) if len(sel) else float("nan")


def focus_bucket(rows: pd.DataFrame, candidates=("5-8", ">8", "2-4")) -> str:
    """The first of ``candidates`` with jobs in these rows (by default 5-8 GPUs: the largest gangs that fit on
    one server, so the ones locality and fragmentation matter most for)."""
    present = rows[rows["jobs"] > 0]["bucket"].unique()
    for bucket in candidates:
        if bucket in present:
            return bucket
    return "all"


def _best_arm(rows: pd.DataFrame, metric: str, exclude=()) -> tuple[str | None, float]:
    means = rows[~rows["arm"].isin(exclude)].groupby("arm", sort=False)[metric].mean().dropna()
    return (means.idxmin(), float(means.min())) if len(means) else (None, float("nan"))


def locality_conclusion(rows: pd.DataFrame, loads: list[str], bucket: str, main_load: str,
                        default_arm: str = "relax after 3 min") -> str:
    """One sentence: strict locality vs Philly's default relaxation for ``bucket`` jobs, load by load:
    queueing delay, JCT and the useful share of their GPU time.

    ``rows``: the locality experiment's rows (with ``arm``, ``load_label``,
    ``seed``); changes are paired by seed, with their 95% CI.
    """
    strict = "strict locality"
    clauses = []
    for load in [main_load, *[lo for lo in loads if lo != main_load]]:
        part = rows[(rows["load_label"] == load) & (rows["bucket"] == bucket)]
        q0, q1 = (_mean(part, "queue_mean_s", arm=a) for a in (default_arm, strict))
        j0, j1 = (_mean(part, "jct_mean_s", arm=a) for a in (default_arm, strict))
        u0, u1 = (_mean(part, "useful_share", arm=a) for a in (default_arm, strict))
        clauses.append(
            f"at {load} it {_verb(q0, q1)} their mean queueing delay "
            f"({_delay_change_text(q0, q1, _paired(part, default_arm, strict, 'queue_mean_s', relative=False))}), "
            f"{_verb(u0, u1)} the useful share of their GPU time ({u0:.0%} → {u1:.0%}) and {_verb(j0, j1)} their "
            f"mean JCT ({_change_text(j0, j1, _paired(part, default_arm, strict, 'jct_mean_s'))})")
    best, value = _best_arm(rows[(rows["load_label"] == main_load) & (rows["bucket"] == bucket)], "jct_mean_s")
    tail = f"; the lowest mean JCT for them at {main_load} came with '{best}' ({format_duration(value)})" \
        if best is not None else ""
    return (f"Holding {bucket}-GPU jobs to strict locality instead of Philly's '{default_arm}': "
            + "; ".join(clauses) + tail + ".")


def interference_conclusion(rows: pd.DataFrame, main_load: str, bucket: str) -> str:
    """One sentence: isolation vs packing vs spreading (speed, large jobs' fragmentation wait, JCT), and migration."""
    at = rows[rows["load_label"] == main_load]
    everyone, large = at[at["bucket"] == "all"], at[at["bucket"] == bucket]
    arms = ["pack (best fit)", "spread (Philly)", "dedicated servers"]
    speed = [_mean(everyone, "speed_mean", arm=a) for a in arms]
    frag = [_mean(large, "frag_delay_mean_s", arm=a) for a in arms]
    mig = ("spread (Philly)", "spread (Philly) + migration")
    before, after = (_mean(large, "frag_delay_mean_s", arm=a) for a in mig)
    best, value = _best_arm(everyone, "jct_mean_s")
    moved = _delay_change_text(before, after, _paired(large, *mig, "frag_delay_mean_s", relative=False))
    return (f"At {main_load}, jobs ran at a mean speed of {speed[2]:.2f} on dedicated servers vs {speed[0]:.2f} "
            f"packed and {speed[1]:.2f} spread, while {bucket}-GPU jobs waited on average "
            f"{format_duration(frag[2])} for a local placement with dedicated servers vs {format_duration(frag[0])} "
            f"packed and {format_duration(frag[1])} spread; migration {_verb(before, after)} that wait under "
            f"spreading ({moved})"
            + (f", and the lowest mean JCT of all jobs came from '{best}' ({format_duration(value)})"
               if best is not None else "") + ".")


def failures_conclusion(costs: pd.DataFrame, main_load: str) -> str:
    """One sentence per failure model at ``main_load``: GPU time wasted and good jobs' delay per retry policy."""
    parts = []
    for model, rows in costs[costs["load_label"] == main_load].groupby("failure_model", sort=False):
        listed = []
        for row in rows.itertuples():
            prerun = f" (+{100 * row.prerun_share_mean:.1f}% on pre-runs)" if row.prerun_share_mean > 0 else ""
            added = f"{'+' if row.good_jct_added_s >= 0 else '−'}{format_duration(abs(row.good_jct_added_s))}"
            if np.isfinite(row.good_jct_added_ci_low):
                added += (f" [95% CI {format_duration(row.good_jct_added_ci_low)}, "
                          f"{format_duration(row.good_jct_added_ci_high)}]").replace("-", "−")
            listed.append(f"{row.arm}: {100 * row.wasted_share_mean:.1f}% of GPU-hours on failed attempts{prerun}, "
                          f"mean JCT of never-failing jobs {added}")
        named = {"fitted": "the failure model fitted to the public data",
                 "illustrative": "the simulator's illustrative failure model"}.get(model, f"failure model {model}")
        parts.append(f"with {named}, " + "; ".join(listed))
    return (f"At {main_load}, " + "; ".join(parts)
            + " (JCT changes against the same seed's run without failures).")


def early_stop_conclusion(savings: pd.DataFrame, main_load: str) -> str:
    """One sentence: GPU-hours saved and quality lost per tolerance, at ``main_load`` and the other loads."""
    main = savings[savings["load_label"] == main_load]
    listed = ", ".join(f"within {t:.1%}: {-100 * g:.1f}% of GPU-hours saved for a mean quality loss of {100 * q:.3f}%"
                       for t, g, q in zip(main["tolerance"], main["gpu_hours_change"], main["quality_lost"]))
    others = savings[savings["load_label"] != main_load]
    other_text = "; ".join(
        f"at {load}: " + ", ".join(f"{-100 * g:.1f}%" for g in rows["gpu_hours_change"])
        for load, rows in others.groupby("load_label", sort=False))
    return (f"Stopping each job once its learning curve comes within a tolerance of its best, at {main_load}: "
            f"{listed}" + (f" (GPU-hours saved {other_text})" if other_text else "") + ".")


def policy_conclusion(rows: pd.DataFrame, loads: list[str], bucket: str) -> str:
    """One sentence: the best non-oracle policy's mean JCT against Philly's at each load (paired), the SRTF
    bound, and the p99 JCT of ``bucket`` jobs."""
    clauses = []
    oracle = POLICY_NAMES["srtf"]
    for load in loads:
        at = rows[rows["load_label"] == load]
        everyone = at[at["bucket"] == "all"]
        best, value = _best_arm(everyone, "jct_mean_s", exclude=(oracle,))
        if best is None:
            continue
        means = everyone[everyone["arm"] != oracle].groupby("arm")["jct_mean_s"].mean()
        if means.max() <= 1.005 * means.min():  # nothing queues: order and preemption have nothing to act on
            clauses.append(f"at {load} every non-oracle policy had the same mean JCT within 0.5% "
                           f"({format_duration(value)})")
            continue
        # compare the best with Philly, or, when Philly is the best, the runner-up with Philly
        other, _ = _best_arm(everyone, "jct_mean_s", exclude=(oracle, "Philly")) if best == "Philly" else (best, 0)
        philly = _mean(everyone, "jct_mean_s", arm="Philly")
        change = _change_text(philly, _mean(everyone, "jct_mean_s", arm=other),
                              _paired(everyone, "Philly", other, "jct_mean_s")) if other else "n/a"
        srtf = _mean(everyone, "jct_mean_s", arm=oracle)
        bound = f"; SRTF bound {format_duration(srtf)}" if np.isfinite(srtf) else "; SRTF not run at this load"
        large = at[at["bucket"] == bucket]
        by_size = []
        for size in SIZE_BUCKETS:
            size_best, size_value = _best_arm(at[at["bucket"] == size], "jct_mean_s", exclude=(oracle,))
            if size_best is not None:
                by_size.append(f"{size} GPU{'' if size == '1' else 's'}: {size_best}")
        clauses.append(
            f"at {load} the lowest mean JCT of the non-oracle policies was {best}'s ({format_duration(value)}; "
            f"Philly → {other}: {change}{bound}), with p99 JCT of {bucket}-GPU jobs "
            f"{format_duration(_mean(large, 'jct_p99_s', arm='Philly'))} under Philly vs "
            f"{format_duration(_mean(large, 'jct_p99_s', arm=other))} under {other}"
            + (", and the lowest mean JCT per job size from " + ", ".join(by_size) if by_size else ""))
    return "Across scheduling policies, " + "; ".join(clauses) + "."


# --------------------------------------------------------------------------- figures

LOAD_COLORS = ("#4C72B0", "#DD8452", "#C44E52", "#8172B2", "#55A868")
POLICY_COLORS = {"FIFO": "#8C8C8C", "Philly": "#4C72B0", "Tiresias 2D-LAS": "#55A868",
                 "Tiresias Gittins": "#DD8452", "SRTF (oracle bound)": "#C44E52"}
TIME_FLOOR_S = 1.0


def plot_points(ax, summary: pd.DataFrame, metric: str, x: str, hue: str, x_order: list, hue_order: list,
                colors: dict, width: float = 0.7) -> None:
    """Mean (marker) and CI (bar) of ``metric`` per (x, hue); hues side by side within each x position.

    Time metrics go on a log axis, values below 1 s drawn at 1 s.
    """
    rows = summary[summary["metric"] == metric]
    step = width / max(len(hue_order), 1)
    is_time = metric in TIME_METRICS
    means = []
    for k, h in enumerate(hue_order):
        part = rows[rows[hue] == h].set_index(x).reindex(x_order)
        xs = np.arange(len(x_order)) - width / 2 + step * (k + 0.5)
        mean, low, high = (part[c].to_numpy(float) for c in ("mean", "ci_low", "ci_high"))
        if is_time:
            mean, low, high = (np.maximum(v, TIME_FLOOR_S) for v in (mean, low, high))
        err = np.vstack([np.where(np.isnan(low), 0, mean - low), np.where(np.isnan(high), 0, high - mean)])
        ax.errorbar(xs, mean, yerr=err, fmt="o", ms=5, capsize=2, color=colors.get(h, "0.3"), label=str(h))
        means.extend(mean[np.isfinite(mean)])
    ax.set_xticks(range(len(x_order)), [str(v) for v in x_order])
    ax.grid(False, axis="x")
    ax.grid(alpha=0.3, axis="y")
    if not means:
        return
    # the axis follows the means; an interval reaching past it is cut at the edge
    lo, hi = min(means), max(means)
    if is_time:
        ax.set_yscale("log")
        ticks = [1, 60, 3600, 86400, 604800, 6048000]
        ax.set_yticks(ticks, ["1s", "1m", "1h", "1d", "1w", "10w"])
        ax.set_ylim(max(lo / 4, 0.7), hi * 4)
    else:
        pad = 0.15 * (hi - lo) if hi > lo else 0.1 * max(abs(hi), 1e-9)
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))


def metric_grid(summary: pd.DataFrame, metrics: list[str], loads: list[str], x: str, hue: str, x_order: list,
                hue_order: list, colors: dict, title: str, legend_title: str = "", panel_width: float = 5.0):
    """Rows = load settings, columns = metrics; each panel a :func:`plot_points`. Intervals past the
    panel's range (set by the means) are cut at its edge."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(loads), len(metrics), figsize=(panel_width * len(metrics), 3.3 * len(loads) + 1),
                             squeeze=False, sharex=True)
    for r, load in enumerate(loads):
        for c, metric in enumerate(metrics):
            ax = axes[r][c]
            plot_points(ax, summary[summary["load_label"] == load], metric, x, hue, x_order, hue_order, colors)
            ax.set_title(f"{METRIC_LABELS.get(metric, metric)} · {load}", fontsize=9)
            if r == len(loads) - 1:
                ax.tick_params(axis="x", labelrotation=35)
                for label in ax.get_xticklabels():
                    label.set_horizontalalignment("right")
    handles, labels = axes[0][0].get_legend_handles_labels()
    top = 1 - 0.9 / fig.get_figheight()
    fig.tight_layout(rect=(0, 0, 1, top))
    fig.suptitle(title, y=1 - 0.15 / fig.get_figheight(), fontsize=11)
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.35 / fig.get_figheight()), title=legend_title, title_fontsize=9)
    return fig


def plot_calibration(calibration: pd.DataFrame, target: float, factor: float):
    """Simulated busy-server share (and GPU allocation, queueing) against the load factor, with the real occupancy."""
    import matplotlib.pyplot as plt

    rows = calibration[(calibration["bucket"] == "all") & (calibration["population"] == "all jobs")]
    rows = rows.sort_values("load")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    ax = axes[0]
    ax.plot(rows["load"], rows["busy_server_share_dates"], "o-", color="#4C72B0",
            label="servers busy, simulated (dates of the occupancy data)")
    ax.plot(rows["load"], rows["busy_server_share"], "o--", color="#4C72B0", alpha=0.5,
            label="servers busy, simulated (whole arrival span)")
    ax.plot(rows["load"], rows["allocated_gpu_share"], "s-", color="#55A868", label="GPUs allocated, simulated")
    ax.axhline(target, color="k", lw=1, ls=":", label=f"servers busy, real occupancy data ({target:.1%})")
    ax.axvline(factor, color="#C44E52", lw=1.5, label=f"calibrated load x{factor:g}")
    ax.set_xlabel("load factor (inter-arrival times divided by it)")
    ax.set_ylabel("share of the cluster")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("Calibrating the load to the real occupancy", fontsize=10)
    ax = axes[1]
    ax.plot(rows["load"], np.maximum(rows["queue_mean_s"], TIME_FLOOR_S), "o-", color="#8172B2",
            label="mean queueing delay")
    ax.plot(rows["load"], np.maximum(rows["jct_mean_s"], TIME_FLOOR_S), "o-", color="0.4", label="mean JCT")
    ax.axvline(factor, color="#C44E52", lw=1.5)
    ax.set_yscale("log")
    ax.set_yticks([1, 60, 3600, 86400], ["1s", "1m", "1h", "1d"])
    ax.set_xlabel("load factor")
    ax.legend(fontsize=8)
    ax.set_title("Waiting and completion time (Philly policy)", fontsize=10)
    fig.tight_layout()
    return fig


def plot_failures(costs: pd.DataFrame, loads: list[str]):
    """Per failure model: GPU time lost to failures and pre-runs, and good jobs' added JCT, per retry policy."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(costs["failure_model"]))
    arms = [RETRY_NAMES[r] for r in ("philly", "adaptive", "prerun") if RETRY_NAMES[r] in set(costs["arm"])]
    colors = dict(zip(loads, LOAD_COLORS))
    fig, axes = plt.subplots(len(models), 2, figsize=(12, 3.4 * len(models) + 0.8), squeeze=False)
    width = 0.8 / max(len(loads), 1)
    for r, model in enumerate(models):
        part = costs[costs["failure_model"] == model]
        for k, load in enumerate(loads):
            rows = part[part["load_label"] == load].set_index("arm").reindex(arms)
            xs = np.arange(len(arms)) - 0.4 + width * (k + 0.5)
            wasted, prerun = 100 * rows["wasted_share_mean"].to_numpy(), 100 * rows["prerun_share_mean"].to_numpy()
            err = 100 * np.vstack([rows["wasted_share_mean"] - rows["wasted_share_ci_low"],
                                   rows["wasted_share_ci_high"] - rows["wasted_share_mean"]])
            axes[r][0].bar(xs, wasted, width, color=colors[load], label=load,
                           yerr=np.nan_to_num(err), capsize=2, ecolor="0.3")
            axes[r][0].bar(xs, prerun, width, bottom=wasted, color=colors[load], alpha=0.35, hatch="//")
            added = rows["good_jct_added_s"].to_numpy(float) / 60
            err = np.vstack([added - rows["good_jct_added_ci_low"] / 60, rows["good_jct_added_ci_high"] / 60 - added])
            axes[r][1].bar(xs, added, width, color=colors[load], yerr=np.nan_to_num(err), capsize=2, ecolor="0.3")
        axes[r][0].set_ylabel("% of all GPU-hours")
        axes[r][0].set_title(f"GPU time on failed attempts (hatched: pre-runs) · {FAILURE_MODEL_NAMES[model]}",
                             fontsize=9)
        axes[r][1].axhline(0, color="k", lw=0.8)
        axes[r][1].set_ylabel("minutes")
        axes[r][1].set_title(f"change in mean JCT of jobs that never fail vs no failures · "
                             f"{FAILURE_MODEL_NAMES[model]}", fontsize=9)
        axes[r][0].set_ylim(bottom=0)
        for ax in axes[r]:
            ax.set_xticks(range(len(arms)), [textwrap.fill(a, 18) for a in arms])
            ax.grid(False, axis="x")
            ax.grid(alpha=0.3, axis="y")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def plot_early_stop(savings: pd.DataFrame, loads: list[str]):
    """GPU-hours saved and mean JCT change against the quality lost, one line per load, points = tolerances."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for load, color in zip(loads, LOAD_COLORS):
        rows = savings[savings["load_label"] == load]
        q = np.maximum(100 * rows["quality_lost"].to_numpy(), 1e-4)  # a loss of 0 drawn at 0.0001%
        for ax, column in zip(axes, ("gpu_hours_change", "jct_change")):
            y = -100 * rows[column].to_numpy()
            err = 100 * np.vstack([rows[f"{column}_ci_high"] - rows[column], rows[column] - rows[f"{column}_ci_low"]])
            ax.errorbar(q, y, yerr=np.nan_to_num(err), fmt="o-", color=color, capsize=3, label=load)
            for xq, yy, t in zip(q, y, rows["tolerance"]):
                ax.annotate(f"{t:.1%}", (xq, yy), textcoords="offset points", xytext=(5, -10), fontsize=7,
                            color=color)
    axes[0].set_ylabel("GPU-hours saved (%)")
    axes[1].set_ylabel("mean JCT reduction (%)")
    axes[0].set_title("GPU-hours saved against quality lost (vs no early stop, paired by seed)", fontsize=9)
    axes[1].set_title("mean JCT reduction against quality lost (vs no early stop, paired by seed)", fontsize=9)
    for ax in axes:
        ax.set_xlabel("mean quality lost (% of the metric, relative to the run's best; log scale)")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}%")
        ax.set_ylim(bottom=min(0, ax.get_ylim()[0]))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title="point labels: tolerance", title_fontsize=7)
    fig.tight_layout()
    return fig
