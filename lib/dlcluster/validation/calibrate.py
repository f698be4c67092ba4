"""The replay's parameters, what they give the simulator, and the measures that hold the replay against the real record.

Unknown parameters (:class:`ReplayParams`): the quotas of the VCs missing from
the public node counts, how far VCs may borrow idle GPUs (each VC's maximum
capacity, a multiple of its quota) and whether a VC below its quota reclaims
lent GPUs by preemption (:mod:`dlcluster.sim.sharing`), Philly's locality and
the relax timeout of its back-off, the rack size, the placement strategy, and
the scheduler latency. The latency carries only the launcher's own overhead
(:func:`fit_overhead_latency`: a lognormal fitted to the real waits that are
clearly not queueing); every longer wait must come from the simulated
contention. The two-mode mixture fitted to the whole real waits
(:func:`fit_latency_mixture`, whose slow mode *is* the queueing) stays as an
ablation row.

The search over these (:mod:`.search`) looks only at the *fit span* (the first
``fit_days`` of the real occupancy data); the *held-out span* is the rest.
:func:`evaluate` is its objective: the occupancy error in percentage points
plus ``delay_weight`` x (mean |ln replay/real| of the median and of the p90
first-attempt wait per size bucket + their mean KS distance), the DRE complete
records compared job for job with the same jobs in the replay.

Held-out figures each beside the real value (:func:`held_out_figures`):
occupancy MAE, first-wait median and p90 per size bucket, per-VC wait CDFs
with the KS distance, servers spanned per job against the real placements,
the share of waiting left to the latency, preemptions, and the replay's GPU
allocation beside the share of real GPU-minutes at 0% utilization; then the
ablation, the sensitivity of each fitted value, and the long waits per day.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from ..ordering import counts_desc
from ..sim import PhillyPolicy, make_policy, simulate, topology_from_machines
from ..sim.sharing import Reclaim
from ..sim.workload import quotas_from_table
from ..trace.schema import size_bucket
from .replay import Replay, compare_delays
from .workload import ReplayWorkload

DELAY_BUCKETS = ("2-4", "5-8", ">8")
UNKNOWN_VC_QUOTAS = ("none", "demand")


@dataclass(frozen=True)
class ReplayParams:
    """The replay's modelling choices; the defaults are the simulator's defaults before calibration."""

    unknown_vc_quota: str = "none"   # "none": VCs without a public node count only borrow; "demand": see vc_quotas
    lending: bool = True
    # YARN's maximum-capacity of each VC: this multiple of its quota (at least MIN_CAP_GPUS); None: unlimited lending
    max_capacity_factor: float | None = None
    # YARN's max_wait_before_kill: a VC below its quota preempts borrowers after its job starved this long;
    # None: no reclaim (borrowed GPUs are never taken back)
    reclaim_after_s: float | None = None
    reclaim_keeps_progress: bool = False
    relax_after_s: float = 180.0
    rack_size: int = 16
    placement: str = "most_free"
    policy: str = "philly"
    locality: str = "relax"          # Philly policy: "relax" (back-off, then loosen), "any" (no locality)
    quotas: bool = True              # False: no VC limits at all
    latency_s: float = 0.0           # scheduler latency: a job enters the queue this long after its submit (median)
    latency_spread: float = 0.0      # its spread: sigma of a lognormal around latency_s (0: the same for every job)
    # when given, replaces latency_s/latency_spread: rows of LATENCY_FIELDS per size bucket (fit_latency_mixture)
    latency_mixture: tuple = ()

    def label(self) -> str:
        if self.latency_mixture:
            latency = "mixture (" + ", ".join(
                f"{row[0]}: ~{row[2]:.0f}s" if row[1] >= 1 else
                f"{row[0]}: {row[1]:.0%} at ~{row[2]:.0f}s, else ~{row[4]:.0f}s" if row[1] else
                f"{row[0]}: ~{row[4]:.0f}s"
                for row in self.latency_mixture) + ")"
        else:
            latency = f"{self.latency_s:g}s (spread {self.latency_spread:g})"
        lending = "off" if not self.lending else ("unlimited" if self.max_capacity_factor is None else
                                                  f"up to {self.max_capacity_factor:.2f}x quota")
        reclaim = "off" if self.reclaim_after_s is None else (
            f"after {self.reclaim_after_s:g}s ({'resume' if self.reclaim_keeps_progress else 'restart'})")
        return (f"quotas={'on' if self.quotas else 'off'} (unknown VCs: {self.unknown_vc_quota}), "
                f"lending={lending}, reclaim={reclaim}, locality={self.locality}, "
                f"relax={self.relax_after_s:g}s, rack={self.rack_size}, placement={self.placement}, "
                f"latency={latency}, policy={self.policy}")

    @classmethod
    def from_dict(cls, fields: dict) -> "ReplayParams":
        """The inverse of :func:`dataclasses.asdict` after a JSON round trip (lists back to tuples)."""
        mixture = tuple(tuple(row) for row in fields.get("latency_mixture", ()))
        return cls(**{**fields, "latency_mixture": mixture})


def vc_quotas(vc_table: pd.DataFrame, workload, total_gpus: int, unknown_vc_quota: str) -> dict:
    """GPU quotas: the public node counts, and for the other VCs of the workload by ``unknown_vc_quota``.

    ``"none"``: quota 0 (they only borrow idle GPUs). ``"demand"``: the GPUs not
    covered by the public counts, shared among those VCs in proportion to their
    GPU-seconds in the workload (floored).
    """
    if unknown_vc_quota not in UNKNOWN_VC_QUOTAS:
        raise ValueError(f"unknown_vc_quota must be one of {UNKNOWN_VC_QUOTAS}, got {unknown_vc_quota!r}")
    quotas = quotas_from_table(vc_table)
    missing = sorted(set(map(str, workload.vc)) - set(quotas))
    if unknown_vc_quota == "none" or not missing:
        return quotas
    left = max(0, int(total_gpus) - sum(quotas.values()))
    demand = pd.Series(workload.num_gpus * workload.service_s, index=workload.vc).groupby(level=0).sum()
    demand = demand.reindex(missing).fillna(0.0)
    shares = demand / demand.sum() if demand.sum() > 0 else pd.Series(1.0 / len(missing), index=missing)
    return {**quotas, **{vc: int(np.floor(left * s)) for vc, s in shares.items()}}


#: One row of :attr:`ReplayParams.latency_mixture`: a size bucket ("all" = every size), the fast mode's share, and
#: each mode's median (s) and sigma (of a lognormal).
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


def scheduler_latency(params: ReplayParams, num_gpus, seed: int = 0) -> np.ndarray:
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


@dataclass(frozen=True)
class ReplaySetup:
    """What a replay with ``params`` simulates: the workload (scheduler latency applied), machines, quotas,
    policy and the simulator options, for :func:`run_replay` and the experiments that run on the validated replay."""

    workload: object
    topology: object
    quotas: dict | None
    policy: object
    options: dict
    latency_s: np.ndarray            # each job's scheduler latency (already added to its arrival)


def replay_setup(replay: ReplayWorkload, machines: pd.DataFrame, vc_table: pd.DataFrame,
                 params: ReplayParams = ReplayParams(), quota_workload=None, seed: int = 0) -> ReplaySetup:
    """The simulation of ``replay`` under ``params`` (ideal speed: no slowdown model; see :func:`run_replay`).

    ``quota_workload``: the workload whose demand shares out the quotas of the
    VCs without a public node count (default: ``replay``'s; a part of the
    calibrated replay passes the whole one, to get the calibrated quotas).
    """
    topology = topology_from_machines(machines, params.rack_size)
    quota_workload = replay.workload if quota_workload is None else quota_workload
    quotas = vc_quotas(vc_table, quota_workload, topology.total_gpus, params.unknown_vc_quota) \
        if params.quotas else None
    policy = PhillyPolicy(locality=params.locality, relax_after_s=params.relax_after_s) \
        if params.policy == "philly" else make_policy(params.policy)
    workload = replay.workload
    latency = scheduler_latency(params, workload.num_gpus, seed)
    if latency.any():
        workload = replace(workload, arrival_s=workload.arrival_s + latency)
    sharing = sharing_options(params, quotas, topology.total_gpus, np.unique(workload.vc.astype(str)))
    return ReplaySetup(workload, topology, quotas, policy,
                       {**sharing, "placement": params.placement, "slowdown": None}, latency)


#: The smallest maximum capacity a VC gets (one 8-GPU server), so that a VC without a quota can still run a job.
MIN_CAP_GPUS = 8


def max_capacity(quota: int, factor: float) -> int:
    """A VC's maximum capacity: ``factor`` x its quota, at least its quota and :data:`MIN_CAP_GPUS`."""
    return max(quota, int(np.floor(quota * factor)), MIN_CAP_GPUS)


def sharing_options(params: ReplayParams, quotas: dict | None, total_gpus: int, vcs) -> dict:
    """The simulator's sharing options (:mod:`dlcluster.sim.sharing`) for ``params`` and the workload's ``vcs``."""
    options = {"lending": params.lending}
    if quotas is None or not params.lending:
        return options
    if params.max_capacity_factor is not None:
        options["max_capacity"] = {str(vc): max_capacity(int(quotas.get(vc, 0)), params.max_capacity_factor)
                                   for vc in vcs}
    if params.reclaim_after_s is not None:
        options["reclaim"] = Reclaim(max_wait_before_kill_s=float(params.reclaim_after_s),
                                     keep_progress=params.reclaim_keeps_progress)
    return options


def run_replay(replay: ReplayWorkload, machines: pd.DataFrame, vc_table: pd.DataFrame,
               params: ReplayParams = ReplayParams(), seed: int = 0, quota_workload=None) -> Replay:
    """Simulate the workload on the reconstructed machines with ``params`` (ideal speed: no slowdown model).

    The service times are the real jobs' durations, which already contain
    whatever slowdown their placement caused, so no slowdown model is applied.
    Each job enters the queue :func:`scheduler_latency` after its submit (the
    time Philly's scheduler and launcher take before a job can be placed, an
    unknown); the job's wait is still counted from its real submit time.
    ``quota_workload``: as for :func:`replay_setup`.
    """
    setup = replay_setup(replay, machines, vc_table, params, quota_workload=quota_workload, seed=seed)
    result = simulate(setup.workload, setup.topology, setup.policy, quotas=setup.quotas, seed=seed, **setup.options)
    return Replay(result, setup.topology, setup.quotas, bool(setup.options["lending"]), params=params, replay=replay,
                  latency_s=setup.latency_s)


# --------------------------------------------------------------------------- measures


def spans(occupancy: pd.DataFrame, fit_days: float, total_days: float | None = None) -> dict:
    """``{"fit": (begin, end), "held_out": (begin, end)}`` over the real occupancy data (UTC, end exclusive).

    ``total_days`` ends the held-out span that many days after the data's start
    (a shorter validation); None runs it to the data's end.
    """
    begin, end = occupancy["time"].min(), occupancy["time"].max() + pd.Timedelta(minutes=1)
    if total_days is not None:
        end = min(end, begin + pd.Timedelta(days=total_days))
    cut = begin + pd.Timedelta(days=fit_days)
    if not begin < cut < end:
        raise ValueError(f"fit_days={fit_days} leaves no held-out span in {begin}..{end}")
    return {"fit": (begin, cut), "held_out": (cut, end)}


def monitoring_gaps(occupancy: pd.DataFrame) -> pd.Series:
    """Minutes whose record says no server had a job (``active == 0``).

    The job sets have hundreds of jobs running at every such minute (the longest
    stretch is most of 2017-10-26), so these are gaps in the monitoring, not an
    empty cluster: they are left out of every error and counted.
    """
    return occupancy["active"] == 0


def real_occupancy(occupancy: pd.DataFrame, freq: str = "1h") -> pd.Series:
    """Real share of servers with a job (active / total), mean per ``freq`` bin, monitoring gaps left out."""
    occ = occupancy[~monitoring_gaps(occupancy)].set_index("time")
    return (occ["active"] / occ["total"]).resample(freq).mean().dropna().rename("real")


def simulated_occupancy(result, freq: str = "1h") -> pd.Series:
    """Replay's share of servers with a job (1 - idle servers / servers), mean per ``freq`` bin (UTC)."""
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    busy = 1.0 - ts["idle_servers"].to_numpy() / result.topology.num_servers
    return pd.Series(busy, index=times).resample(freq).mean().dropna().rename("simulated")


def mae_points(simulated: pd.Series, real: pd.Series, span: tuple | None = None) -> float:
    """Mean absolute error in percentage points between two share series on their common index (within ``span``)."""
    both = pd.concat([simulated.rename("s"), real.rename("r")], axis=1, join="inner").dropna()
    if span is not None:
        both = both[(both.index >= span[0]) & (both.index < span[1])]
    if both.empty:
        raise ValueError("mae_points: the series share no time inside the span")
    return float(100.0 * (both["s"] - both["r"]).abs().mean())


def mae_by_period(simulated: pd.Series, real: pd.Series, span: tuple, freq: str = "7D") -> pd.DataFrame:
    """Occupancy error (pp) and mean shares per period of ``freq`` inside ``span``: where the error comes from."""
    both = pd.concat([simulated.rename("simulated"), real.rename("real")], axis=1, join="inner").dropna()
    both = both[(both.index >= span[0]) & (both.index < span[1])]
    period = span[0] + ((both.index - span[0]) // pd.Timedelta(freq)) * pd.Timedelta(freq)
    grouped = both.assign(abs_err=(both["simulated"] - both["real"]).abs()).groupby(period)
    out = grouped[["real", "simulated"]].mean() * 100.0
    out["mae_pp"] = grouped["abs_err"].mean() * 100.0
    return out.rename_axis("period_start").rename(columns={"real": "real_pct", "simulated": "simulated_pct"})


def ks_distance(a, b) -> float:
    """Two-sample Kolmogorov-Smirnov distance (max gap between the empirical CDFs)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    return float(stats.ks_2samp(a, b).statistic)


def paired_delays(rep: Replay, real_waits: pd.DataFrame, column: str = "first_wait_s") -> pd.DataFrame:
    """Real complete records beside the same jobs in the replay: real (``column``) and simulated first wait.

    ``real_waits``: :func:`.workload.dre_first_waits`'s table (``first_wait_s``
    by the official definition, ``recorded_wait_s`` as DRE recorded it). A job
    the replay never started (e.g. a VC without quota when lending is off) gets
    the wait it had when the replay ended, a lower bound, and
    ``never_started`` True.
    """
    sim = rep.result.jobs
    ids = rep.replay.dre_jobid
    have = np.flatnonzero(pd.notna(ids))
    delay = sim["queueing_delay_s"].to_numpy(float)[have]
    never = np.isnan(delay)
    censored = float(rep.result.summary["end_time_s"]) - sim["arrival_s"].to_numpy(float)[have]
    delay = np.where(never, censored, delay + rep.latency_s[have])
    sim_delay = pd.DataFrame({"simulated_s": delay, "never_started": never}, index=ids[have].astype(str))
    real = real_waits.set_index("jobid")
    common = real.index.intersection(sim_delay.index)
    real = real.loc[common]
    return pd.DataFrame({"jobid": common, "vc": real["vc"].to_numpy(), "submitted": real["submitted"].to_numpy(),
                         "num_gpus": real["num_gpus"].to_numpy(), "bucket": real["bucket"].to_numpy(),
                         "real_s": real[column].to_numpy(float),
                         "simulated_s": sim_delay.loc[common, "simulated_s"].to_numpy(),
                         "never_started": sim_delay.loc[common, "never_started"].to_numpy()})


def in_span(frame: pd.DataFrame, span: tuple | None) -> pd.DataFrame:
    if span is None:
        return frame
    t = pd.to_datetime(frame["submitted"])
    return frame[(t >= span[0]) & (t < span[1])]


def delay_table(pairs: pd.DataFrame, span: tuple | None = None) -> pd.DataFrame:
    """Median and p90 queueing delay per size bucket, replay beside real, with the median ratio and KS."""
    part = in_span(pairs, span)
    table = compare_delays(part.rename(columns={"real_s": "delay_s"})[["bucket", "delay_s"]],
                           part.rename(columns={"simulated_s": "delay_s"})[["bucket", "delay_s"]])
    table = table.reindex([b for b in DELAY_BUCKETS if b in table.index])
    table["median_ratio"] = table["simulated_median_s"] / table["real_median_s"]
    table["p90_ratio"] = table["simulated_p90_s"] / table["real_p90_s"]
    return table


def vc_ks(pairs: pd.DataFrame, span: tuple | None = None, top: int = 5) -> pd.DataFrame:
    """KS distance of replay vs real delay per VC, for the ``top`` VCs with most records in the span."""
    part = in_span(pairs, span)
    vcs = counts_desc(part["vc"]).head(top).index
    rows = [{"vc": vc, "records": int((part["vc"] == vc).sum()),
             "real_median_s": float(part.loc[part["vc"] == vc, "real_s"].median()),
             "simulated_median_s": float(part.loc[part["vc"] == vc, "simulated_s"].median()),
             "ks": ks_distance(part.loc[part["vc"] == vc, "real_s"], part.loc[part["vc"] == vc, "simulated_s"])}
            for vc in vcs]
    return pd.DataFrame(rows).set_index("vc")


def log_median_error(table: pd.DataFrame, floor_s: float = 1.0, stat: str = "median") -> float:
    """Mean over buckets of |ln(replay / real)| of the median (or ``stat="p90"``), both floored at ``floor_s``."""
    s = np.maximum(table[f"simulated_{stat}_s"].to_numpy(float), floor_s)
    r = np.maximum(table[f"real_{stat}_s"].to_numpy(float), floor_s)
    return float(np.mean(np.abs(np.log(s / r))))


def either_way(ratios) -> float:
    """The largest of the ratios taken either way (2 and 0.5 both count as 2); NaN if there is none."""
    r = np.asarray(ratios, float)
    r = r[np.isfinite(r) & (r > 0)]
    return float(np.max(np.maximum(r, 1.0 / r))) if len(r) else float("nan")


def allocated_share(result, span: tuple) -> float:
    """Replay's mean share of GPUs allocated in ``span``."""
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    inside = (times >= span[0]) & (times < span[1])
    return float((ts["allocated_gpus"].to_numpy()[inside] / result.topology.total_gpus).mean())


def allocation_vs_idle_gpus(result, cdf: pd.DataFrame, span: tuple) -> dict:
    """Replay's allocated GPU share in ``span`` beside the real share of GPU-minutes at 0% utilization.

    A GPU with no job shows 0%, so 1 - (real share at 0%) bounds the real
    allocated share from above; allocated GPUs can also idle, so it is a bound,
    not a value.
    """
    allocated = allocated_share(result, span)
    at_zero = cdf.loc[cdf["gpu_util_percent"] <= 0.0, "cdf_percent"]
    zero_share = float(at_zero.max() / 100.0) if len(at_zero) else 0.0
    return {"simulated_allocated_share": allocated, "real_gpu_minutes_at_0pct": zero_share,
            "real_allocated_share_upper_bound": 1.0 - zero_share}


@dataclass(frozen=True)
class Evaluation:
    """The calibration objective's parts on one span, and the objective."""

    occupancy_mae_pp: float
    log_median_error: float
    log_p90_error: float
    mean_ks: float
    objective: float


#: Weight of the wait terms in the objective: one unit of log error (a factor of e) or of KS costs as much as 10
#: points of occupancy error.
DELAY_WEIGHT = 10.0


def evaluate(rep: Replay, occupancy: pd.DataFrame, real_waits: pd.DataFrame, span: tuple,
             delay_weight: float = DELAY_WEIGHT) -> Evaluation:
    """The calibration objective on one span.

    Occupancy MAE (points) + ``delay_weight`` x (mean |ln(replay/real median)| + mean |ln(replay/real p90)| + mean
    KS) of the first-attempt waits per size bucket (the DRE records submitted in the span, job for job).
    """
    mae = mae_points(simulated_occupancy(rep.result), real_occupancy(occupancy), span)
    delays = delay_table(paired_delays(rep, real_waits), span)
    med, p90 = log_median_error(delays), log_median_error(delays, stat="p90")
    ks = float(delays["ks_statistic"].mean())
    return Evaluation(mae, med, p90, ks, mae + delay_weight * (med + p90 + ks))


# --------------------------------------------------------------------------- validation and ablation


def servers_spanned(rep: Replay, real_waits: pd.DataFrame, span: tuple | None = None) -> pd.DataFrame:
    """Servers each real multi-GPU job spanned (its DRE record's last attempt) beside the same job in the replay.

    ``real_waits``: :func:`.workload.dre_first_waits`'s table (with ``num_servers``).
    The replay's figure is its last attempt's; jobs the replay never started are left out.
    """
    att = rep.result.attempts.sort_values(["jobid", "attempt"], kind="stable")
    last = att.groupby("jobid", sort=False)["num_servers"].last()
    ids = pd.Series(rep.replay.dre_jobid, index=rep.replay.workload.jobid.astype(str)).dropna()
    simulated = pd.Series(last.reindex(ids.index).to_numpy(), index=ids.astype(str).to_numpy()).dropna()
    real = in_span(real_waits, span).set_index("jobid")
    common = real.index.intersection(simulated.index)
    return pd.DataFrame({"jobid": common, "bucket": real.loc[common, "bucket"].to_numpy(),
                         "num_gpus": real.loc[common, "num_gpus"].to_numpy(),
                         "real_servers": real.loc[common, "num_servers"].to_numpy(int),
                         "simulated_servers": simulated.loc[common].to_numpy(int)})


def servers_spanned_table(spanned: pd.DataFrame) -> pd.DataFrame:
    """Per size bucket: jobs, median and mean servers spanned, real beside replay, and the KS distance."""
    rows = []
    for bucket in DELAY_BUCKETS:
        part = spanned[spanned["bucket"] == bucket]
        if part.empty:
            continue
        rows.append({"bucket": bucket, "jobs": len(part),
                     "real_median": float(part["real_servers"].median()),
                     "simulated_median": float(part["simulated_servers"].median()),
                     "real_mean": float(part["real_servers"].mean()),
                     "simulated_mean": float(part["simulated_servers"].mean()),
                     "real_one_server_share": float((part["real_servers"] == 1).mean()),
                     "simulated_one_server_share": float((part["simulated_servers"] == 1).mean()),
                     "ks": ks_distance(part["real_servers"], part["simulated_servers"])})
    return pd.DataFrame(rows).set_index("bucket")


def wait_by_cause(rep: Replay, span: tuple | None = None) -> dict:
    """Seconds of waiting of the jobs submitted in ``span``, by cause: the simulator's three and the latency."""
    jobs = rep.result.jobs.assign(latency_s=rep.latency_s)
    jobs = jobs[jobs["queueing_delay_s"].notna()]
    if span is not None:
        t = pd.to_datetime(jobs["submitted"])
        jobs = jobs[(t >= span[0]) & (t < span[1])]
    return {"fair_share": float(jobs["delay_fair_share_s"].sum()),
            "fragmentation": float(jobs["delay_fragmentation_s"].sum()),
            "backoff": float(jobs["delay_backoff_s"].sum()), "latency": float(jobs["latency_s"].sum())}


def preemption_figures(rep: Replay, span: tuple | None = None) -> dict:
    """Attempts ended by a reclaim (job preempted) among jobs submitted in ``span``: count, share, GPU-hours lost.

    Lost GPU-hours are the preempted attempts' GPU time when the reclaim loses
    progress; with ``reclaim_keeps_progress`` nothing is lost but the wait.
    """
    att, jobs = rep.result.attempts, rep.result.jobs
    if span is not None:
        t = pd.to_datetime(jobs["submitted"])
        att = att[att["jobid"].isin(jobs.loc[(t >= span[0]) & (t < span[1]), "jobid"])]
    pre = att[att["outcome"] == "preempted"]
    held = float(((pre["end_s"] - pre["start_s"]) * pre["num_gpus"]).sum() / 3600.0)
    return {"count": int(len(pre)), "attempts": int(len(att)),
            "share_of_attempts": float(len(pre) / len(att)) if len(att) else float("nan"),
            "jobs_preempted": int(pre["jobid"].nunique()),
            "gpu_hours_lost": 0.0 if rep.params.reclaim_keeps_progress else held,
            "attempts_per_job": float(len(att) / att["jobid"].nunique()) if len(att) else float("nan")}


def held_out_figures(rep: Replay, occupancy: pd.DataFrame, real_waits: pd.DataFrame, span: tuple,
                     gpu_util_cdf: pd.DataFrame | None = None, top_vcs: int = 5,
                     complete_until: pd.Timestamp | None = None) -> dict:
    """Every validation figure on ``span``.

    Occupancy MAE (also up to ``complete_until``, the job set's completeness
    horizon: :func:`.jobsets.completeness_horizon`), first-attempt waits per size
    bucket (median and p90 ratios), KS per VC, servers spanned per job vs the DRE
    records, the share of waiting that is latency only, preemptions, and (with
    ``gpu_util_cdf``) the GPU allocation.
    """
    sim_occ, real_occ = simulated_occupancy(rep.result), real_occupancy(occupancy)
    pairs = paired_delays(rep, real_waits)
    delays = delay_table(pairs, span)
    ks = vc_ks(pairs, span, top_vcs)
    spanned = servers_spanned_table(servers_spanned(rep, real_waits, span))
    causes = wait_by_cause(rep, span)
    total = sum(causes.values())
    complete = span if complete_until is None else (span[0], min(span[1], complete_until))
    out = {"occupancy_mae_pp": mae_points(sim_occ, real_occ, span),
           "occupancy_mae_pp_complete": mae_points(sim_occ, real_occ, complete), "delays": delays, "vc_ks": ks,
           "max_median_ratio": either_way(delays["median_ratio"]), "max_p90_ratio": either_way(delays["p90_ratio"]),
           "max_ks": float(ks["ks"].max()), "log_median_error": log_median_error(delays),
           "servers_spanned": spanned, "servers_spanned_max_ks": float(spanned["ks"].max()),
           "wait_by_cause_s": causes, "latency_only_wait_share": causes["latency"] / total if total else float("nan"),
           "preemptions": preemption_figures(rep, span)}
    if gpu_util_cdf is not None:
        out["allocation"] = allocation_vs_idle_gpus(rep.result, gpu_util_cdf, span)
    return out


def ablation_variants(best: ReplayParams, real_waits: pd.DataFrame | None = None,
                      fit_span: tuple | None = None) -> dict:
    """One modelling ingredient removed at a time from the calibrated parameters (workload variants are the caller's).

    Reclaim, the cap, locality, quotas and the latency; with ``real_waits`` and
    ``fit_span``, also the model before the contention mechanism: the scheduler
    latency fitted to the whole real waits (a two-mode mixture per size, so its
    slow mode *is* the queueing) with unlimited lending and no reclaim.
    """
    variants = {}
    if best.reclaim_after_s is not None:
        variants["no reclaim"] = replace(best, reclaim_after_s=None)
    if best.max_capacity_factor is not None:
        variants["no cap (unlimited lending)"] = replace(best, max_capacity_factor=None)
    variants["lending off" if best.lending else "lending on"] = replace(best, lending=not best.lending)
    if best.locality != "any":
        variants["no locality (no racks, no back-off)"] = replace(best, locality="any")
    else:
        variants["locality on (racks, relax back-off)"] = replace(best, locality="relax")
    variants["no VC quotas"] = replace(best, quotas=False)
    variants["no scheduler latency"] = replace(best, latency_s=0.0, latency_mixture=())
    if real_waits is not None and fit_span is not None:
        variants["latency fitted to the real waits, no contention"] = replace(
            best, latency_mixture=fit_latency_mixture(real_waits, fit_span), max_capacity_factor=None,
            reclaim_after_s=None, lending=True)
    return variants


def ablation(variants: dict, machines: pd.DataFrame, vc_table: pd.DataFrame, occupancy: pd.DataFrame,
             real_waits: pd.DataFrame, span: tuple, top_vcs: int = 5,
             done: dict | None = None, complete_until: pd.Timestamp | None = None) -> tuple[pd.DataFrame, dict]:
    """Held-out figures of each variant: ``{name: (ReplayWorkload, ReplayParams)}`` -> (table, replays).

    ``done``: ``{name: Replay}`` already simulated (measured first, not rerun).

    Table columns: occupancy MAE (pp; also before ``complete_until``), median and p90 ratio (replay / real) per size
    bucket, the largest of each (either way), the largest KS of the ``top_vcs`` VCs, of servers spanned, the
    latency-only share of waiting, preemptions, and the replay's allocated GPU share.
    """
    rows, replays = [], {}
    runs = [(name, rep) for name, rep in (done or {}).items()] + list(variants.items())
    for name, item in runs:
        rep = item if isinstance(item, Replay) else run_replay(item[0], machines, vc_table, item[1])
        workload = rep.replay
        figures = held_out_figures(rep, occupancy, real_waits, span, top_vcs=top_vcs, complete_until=complete_until)
        replays[name] = rep
        row = {"variant": name, "jobs": len(workload.workload), "occupancy_mae_pp": figures["occupancy_mae_pp"],
               "occupancy_mae_pp_complete": figures["occupancy_mae_pp_complete"]}
        for bucket, r in figures["delays"].iterrows():
            row[f"median_ratio_{bucket}"] = r["median_ratio"]
            row[f"p90_ratio_{bucket}"] = r["p90_ratio"]
        for key in ("max_median_ratio", "max_p90_ratio", "max_ks", "servers_spanned_max_ks", "latency_only_wait_share"):
            row[key] = figures[key]
        row["preemptions"] = figures["preemptions"]["count"]
        row["allocated_gpu_share"] = allocated_share(rep.result, span)
        row["wall_s"] = rep.result.summary["wall_s"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("variant"), replays


def _moves(best: ReplayParams) -> list[tuple[str, str, ReplayParams]]:
    """(parameter, label of the move, moved params): each fitted value moved, the others kept."""
    moves = []
    if best.locality == "relax":
        for k in (0.5, 2.0):
            moves.append(("relax_after_s", f"x{k:g}", replace(best, relax_after_s=best.relax_after_s * k)))
    if best.reclaim_after_s is not None:
        for k in (0.5, 2.0):
            moves.append(("reclaim_after_s", f"x{k:g}", replace(best, reclaim_after_s=best.reclaim_after_s * k)))
        moves.append(("reclaim_after_s", "off", replace(best, reclaim_after_s=None)))
    else:
        moves.append(("reclaim_after_s", "on after 300 s", replace(best, reclaim_after_s=300.0)))
    if best.max_capacity_factor is not None:
        f = best.max_capacity_factor
        moves.append(("max_capacity_factor", "halfway to the quota",
                      replace(best, max_capacity_factor=1 + (f - 1) / 2)))
        moves.append(("max_capacity_factor", "twice as far from it",
                      replace(best, max_capacity_factor=1 + (f - 1) * 2)))
        moves.append(("max_capacity_factor", "unlimited", replace(best, max_capacity_factor=None)))
    else:
        moves.append(("max_capacity_factor", "2x quota", replace(best, max_capacity_factor=2.0)))
    flips = {"locality": {"relax": "any", "any": "relax"},
             "placement": {"most_free": "best_fit", "best_fit": "most_free"},
             "rack_size": {16: 32, 32: 16}, "unknown_vc_quota": {"none": "demand", "demand": "none"}}
    for name, other in flips.items():
        value = other.get(getattr(best, name))
        if value is not None:
            moves.append((name, f"{value}", replace(best, **{name: value})))
    return moves


def sensitivity(best: ReplayParams, replay: ReplayWorkload, machines: pd.DataFrame, vc_table: pd.DataFrame,
                occupancy: pd.DataFrame, real_waits: pd.DataFrame, span: tuple) -> pd.DataFrame:
    """The held-out objective (:func:`evaluate` on ``span``) as each fitted value moves, beside the calibrated one.

    One replay per move: numbers halved and doubled (a maximum capacity moved
    halfway towards its quota and twice as far), switches flipped.
    """
    base = evaluate(run_replay(replay, machines, vc_table, best), occupancy, real_waits, span)
    rows = []
    for name, label, params in _moves(best):
        ev = evaluate(run_replay(replay, machines, vc_table, params), occupancy, real_waits, span)
        rows.append({"parameter": name, "moved": label, "calibrated": str(getattr(best, name)),
                     "value": str(getattr(params, name)), "objective": ev.objective,
                     "objective_change": ev.objective - base.objective,
                     "occupancy_mae_pp": ev.occupancy_mae_pp, "log_median_error": ev.log_median_error,
                     "log_p90_error": ev.log_p90_error, "mean_ks": ev.mean_ks})
    return pd.DataFrame(rows).set_index(["parameter", "moved"])


def daily_long_waits(rep: Replay, real_waits: pd.DataFrame, occupancy: pd.DataFrame, span: tuple,
                     long_s: float = 1000.0, min_records: int = 10) -> pd.DataFrame:
    """Per day of ``span`` (days with ``min_records``): the share of real first waits over ``long_s``, of the same
    jobs' waits in the replay, and the real share of servers with a job."""
    pairs = in_span(paired_delays(rep, real_waits), span)
    day = pd.to_datetime(pairs["submitted"]).dt.floor("D")
    table = pairs.assign(day=day, real_long=pairs["real_s"] > long_s, simulated_long=pairs["simulated_s"] > long_s) \
        .groupby("day").agg(records=("jobid", "size"), real_long_share=("real_long", "mean"),
                            simulated_long_share=("simulated_long", "mean"))
    busy = real_occupancy(occupancy, "1D")
    table["real_busy_share"] = busy.reindex(table.index).to_numpy()
    return table[table["records"] >= min_records]
