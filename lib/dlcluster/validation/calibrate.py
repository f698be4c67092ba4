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

from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from ..ordering import counts_desc
from ..sim import PhillyPolicy, make_policy, simulate, topology_from_machines
from ..sim.attempts import PLANNED_RETRY, PlannedRetries
from ..sim.backoff import BACKOFF_SCOPES
from ..sim.capacity import demand_caps
from ..sim.service import in_service, scale_quotas
from ..sim.sharing import Reclaim
from ..sim.users import UserLimits
from ..sim.workload import quotas_from_table
from ..trace.schema import size_bucket
from . import fig3
from .ingredients import burst_users, planned_first_attempts
from ..parallel import map_in_processes
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
    # the ingredients of issue 29, each a model option of the simulator (sim/service.py, capacity.py, backoff.py,
    # gang.py, users.py, attempts.py); the defaults leave each out
    servers_in_service: int | None = None    # None: every listed server; N: N of them (VC quotas scaled with them)
    # each VC's maximum capacity = this quantile of its own offered demand over demand_span (replaces the factor)
    cap_quantile: float | None = None
    demand_span: tuple = ()                  # (begin, end), ISO UTC: where caps from demand are read (the fit span)
    # "every": a job of any size that cannot start backs off one timeout; "borrowers": one that would borrow does
    backoff: str = "gangs"
    gang_hold: bool = False                  # a waiting gang holds the free GPUs it wants until it starts or relaxes
    user_limit_factor: float | None = None   # YARN's user limits within a VC (None: none); users = bursts (assumed)
    minimum_user_limit_percent: float = 100.0
    # (share of jobs with an earlier attempt, quantiles of the share of its duration before its last attempt),
    # read off the DRE records (ingredients.fit_attempt_split); (): every job one attempt
    attempt_split: tuple = ()

    def ingredients(self) -> str:
        """The issue-29 ingredients switched on, in words ("none" when every one is off)."""
        parts = []
        if self.servers_in_service is not None:
            parts.append(f"{self.servers_in_service} servers in service")
        if self.cap_quantile is not None:
            parts.append(f"caps at the {self.cap_quantile:.2f} quantile of each VC's demand")
        if self.backoff != "gangs":
            parts.append({"every": "back-off for every size", "borrowers": "back-off before borrowing"}[self.backoff])
        if self.gang_hold:
            parts.append("gangs hold GPUs while waiting")
        if self.user_limit_factor is not None:
            parts.append(f"user limits (factor {self.user_limit_factor:g}, "
                         f"minimum {self.minimum_user_limit_percent:g}%; users = bursts, assumed)")
        if self.attempt_split:
            parts.append(f"{self.attempt_split[0]:.0%} of jobs split into two attempts")
        return ", ".join(parts) or "none"

    def label(self) -> str:
        if self.latency_mixture:
            latency = "mixture (" + ", ".join(
                f"{row[0]}: ~{row[2]:.0f}s" if row[1] >= 1 else
                f"{row[0]}: {row[1]:.0%} at ~{row[2]:.0f}s, else ~{row[4]:.0f}s" if row[1] else
                f"{row[0]}: ~{row[4]:.0f}s"
                for row in self.latency_mixture) + ")"
        else:
            latency = f"{self.latency_s:g}s (spread {self.latency_spread:g})"
        lending = "off" if not self.lending else (
            f"up to each VC's {self.cap_quantile:.2f} demand quantile" if self.cap_quantile is not None else
            "unlimited" if self.max_capacity_factor is None else f"up to {self.max_capacity_factor:.2f}x quota")
        reclaim = "off" if self.reclaim_after_s is None else (
            f"after {self.reclaim_after_s:g}s ({'resume' if self.reclaim_keeps_progress else 'restart'})")
        return (f"quotas={'on' if self.quotas else 'off'} (unknown VCs: {self.unknown_vc_quota}), "
                f"lending={lending}, reclaim={reclaim}, locality={self.locality}, "
                f"relax={self.relax_after_s:g}s, rack={self.rack_size}, placement={self.placement}, "
                f"latency={latency}, policy={self.policy}, ingredients: {self.ingredients()}")

    @classmethod
    def from_dict(cls, fields: dict) -> "ReplayParams":
        """The inverse of :func:`dataclasses.asdict` after a JSON round trip (lists back to tuples)."""
        mixture = tuple(tuple(row) for row in fields.get("latency_mixture", ()))
        return cls(**{**fields, "latency_mixture": mixture, "demand_span": tuple(fields.get("demand_span", ())),
                      "attempt_split": tuple(fields.get("attempt_split", ()))})


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
    VCs without a public node count and sets the caps from demand, and whose
    jobs the attempt split is drawn for (default: ``replay``'s; a part of the
    calibrated replay passes the whole one, to get the calibrated quotas, caps and split).
    The issue-29 ingredients (:class:`ReplayParams`) each become a simulator option or
    input: the servers in service (quotas scaled with them), caps from demand,
    the back-off scope, gang holds, user limits (users named by bursts) and the
    attempt split.
    """
    listed = topology_from_machines(machines, params.rack_size)
    topology = listed if params.servers_in_service is None else \
        in_service(listed, int(params.servers_in_service), params.rack_size)
    quota_workload = replay.workload if quota_workload is None else quota_workload
    quotas = vc_quotas(vc_table, quota_workload, listed.total_gpus, params.unknown_vc_quota) \
        if params.quotas else None
    if quotas is not None and topology.total_gpus != listed.total_gpus:
        quotas = scale_quotas(quotas, topology.total_gpus, listed.total_gpus)
    policy = PhillyPolicy(locality=params.locality, relax_after_s=params.relax_after_s, backoff=params.backoff) \
        if params.policy == "philly" else make_policy(params.policy)
    workload = replay.workload
    latency = scheduler_latency(params, workload.num_gpus, seed)
    if latency.any():
        workload = replace(workload, arrival_s=workload.arrival_s + latency)
    options = sharing_options(params, quotas, topology.total_gpus, np.unique(workload.vc.astype(str)),
                              quota_workload)
    # sampled every minute, as the occupancy record (and the per-minute export) are
    options.update(placement=params.placement, slowdown=None, sample_interval_s=60.0)
    if params.gang_hold:
        options["gang_hold"] = True
    if params.user_limit_factor is not None and quotas is not None:
        workload = replace(workload, user=burst_users(replay.workload))
        options["user_limits"] = UserLimits(params.user_limit_factor, params.minimum_user_limit_percent,
                                            MIN_CAP_GPUS)
    if params.attempt_split:
        every = pd.Series(planned_first_attempts(quota_workload.service_s, params.attempt_split, seed),
                          index=np.asarray(quota_workload.jobid, dtype=str))
        first = every.reindex(np.asarray(workload.jobid, dtype=str)).to_numpy()
        options.update(failures=PlannedRetries(first), retry=PLANNED_RETRY)
    return ReplaySetup(workload, topology, quotas, policy, options, latency)


#: The smallest maximum capacity a VC gets (one 8-GPU server), so that a VC without a quota can still run a job.
MIN_CAP_GPUS = 8


def max_capacity(quota: int, factor: float) -> int:
    """A VC's maximum capacity: ``factor`` x its quota, at least its quota and :data:`MIN_CAP_GPUS`."""
    return max(quota, int(np.floor(quota * factor)), MIN_CAP_GPUS)


def sharing_options(params: ReplayParams, quotas: dict | None, total_gpus: int, vcs, demand_workload=None) -> dict:
    """The simulator's sharing options (:mod:`dlcluster.sim.sharing`) for ``params`` and the workload's ``vcs``.

    With ``params.cap_quantile`` each VC's cap comes from its own offered demand in ``demand_workload`` over
    ``params.demand_span`` (:func:`dlcluster.sim.capacity.demand_caps`), else from the one factor.
    """
    options = {"lending": params.lending}
    if quotas is None or not params.lending:
        return options
    if params.cap_quantile is not None:
        if demand_workload is None or len(params.demand_span) != 2:
            raise ValueError("cap_quantile needs the workload and the span (demand_span) the demand is read on")
        begin, end = ((pd.Timestamp(t) - demand_workload.epoch) / pd.Timedelta(seconds=1) for t in params.demand_span)
        caps = demand_caps(demand_workload, begin, end, params.cap_quantile, quotas, min_gpus=MIN_CAP_GPUS)
        options["max_capacity"] = {str(vc): caps.get(str(vc), max(int(quotas.get(vc, 0)), MIN_CAP_GPUS)) for vc in vcs}
    elif params.max_capacity_factor is not None:
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


def busy_by_period(result, occupancy: pd.DataFrame, span: tuple, freq: str = "7D") -> pd.DataFrame:
    """Busy servers per period of ``freq`` inside ``span``: the replay's and the record's mean counts and the MAE in
    points of the record's total (:func:`busy_servers`): where the error comes from."""
    table = busy_servers(result, occupancy)
    table = table[(table.index >= span[0]) & (table.index < span[1])]
    period = span[0] + ((table.index - span[0]) // pd.Timedelta(freq)) * pd.Timedelta(freq)
    grouped = table.assign(err=100.0 * (table["simulated"] - table["real"]).abs() / table["total"]).groupby(period)
    out = grouped[["real", "simulated", "total"]].mean()
    out["mae_pp"] = grouped["err"].mean()
    return out.rename_axis("period_start").rename(columns={"real": "real_busy", "simulated": "simulated_busy",
                                                           "total": "record_total"})


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


def real_allocated_lower_bound(cdf: pd.DataFrame) -> float:
    """At least this share of the *reporting* GPUs was allocated: 1 - the share of their minutes at 0% utilization.

    A GPU with no job reports 0%, and so can an allocated GPU that idles, so the
    GPU-minutes at 0% bound the unallocated ones from above and the allocated
    share from below. Offline GPUs report nothing: the share is of the GPUs in
    service, the units of :func:`gpu_allocation`.
    """
    at_zero = cdf.loc[cdf["gpu_util_percent"] <= 0.0, "cdf_percent"]
    return 1.0 - (float(at_zero.max() / 100.0) if len(at_zero) else 0.0)


def gpu_allocation(result, cdf: pd.DataFrame, span: tuple) -> dict:
    """The replay's allocated share of its GPUs in service in ``span`` beside the real lower bound
    (:func:`real_allocated_lower_bound`); ``shortfall_pp`` = points below the bound (<= 0: within it)."""
    share = allocated_share(result, span)
    bound = real_allocated_lower_bound(cdf)
    return {"simulated_allocated_share": share, "real_allocated_share_lower_bound": bound,
            "shortfall_pp": 100.0 * (bound - share), "gpus_in_service": int(result.topology.total_gpus)}


def busy_servers(result, occupancy: pd.DataFrame, freq: str = "1h") -> pd.DataFrame:
    """Busy servers in the record's units, per ``freq`` bin: the replay's count beside the record's active count.

    The record (``node_sequence``) counts active servers out of its own total
    (420 on most days), the replay its servers with a job out of the servers in
    service. Both are compared as counts, and errors are taken in points of the
    record's total; monitoring gaps are left out. Columns ``simulated``,
    ``real``, ``total`` (means per bin), the bins both have.
    """
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    simulated = pd.Series(result.topology.num_servers - ts["idle_servers"].to_numpy(), index=times)
    occ = occupancy[~monitoring_gaps(occupancy)].set_index("time")
    table = pd.concat([simulated.resample(freq).mean().rename("simulated"),
                       occ["active"].resample(freq).mean().rename("real"),
                       occ["total"].resample(freq).mean().rename("total")], axis=1, join="inner")
    return table.dropna()


def busy_servers_mae_pp(result, occupancy: pd.DataFrame, span: tuple) -> float:
    """Mean |replay - real| busy servers per hour in ``span``, in points of the record's total
    (:func:`busy_servers`)."""
    table = busy_servers(result, occupancy)
    table = table[(table.index >= span[0]) & (table.index < span[1])]
    if table.empty:
        raise ValueError("busy_servers_mae_pp: the replay and the record share no hour inside the span")
    return float(100.0 * ((table["simulated"] - table["real"]).abs() / table["total"]).mean())


@dataclass(frozen=True)
class Evaluation:
    """The calibration objective's parts on one span, and the objective."""

    busy_servers_mae_pp: float
    allocation_shortfall_pp: float
    log_median_error: float
    log_p90_error: float
    mean_ks: float
    objective: float


#: Weight of the wait terms in the objective: one unit of log error (a factor of e) or of KS costs as much as 10
#: points of busy-server error.
DELAY_WEIGHT = 10.0


def evaluate(rep: Replay, occupancy: pd.DataFrame, real_waits: pd.DataFrame, span: tuple, gpu_util_cdf: pd.DataFrame,
             delay_weight: float = DELAY_WEIGHT) -> Evaluation:
    """The calibration objective on one span.

    Busy-server MAE in points of the record (:func:`busy_servers_mae_pp`) + the points by which the replay's GPU
    allocation falls below the real lower bound (0 when within it; :func:`gpu_allocation`) + ``delay_weight`` x (mean
    |ln(replay/real median)| + mean |ln(replay/real p90)| + mean KS) of the first-attempt waits per size bucket (the DRE
    records submitted in the span, job for job). The full trace's Figure 3 never enters it.
    """
    return _evaluation(busy_servers_mae_pp(rep.result, occupancy, span),
                       gpu_allocation(rep.result, gpu_util_cdf, span)["shortfall_pp"],
                       delay_table(paired_delays(rep, real_waits), span), delay_weight)


def _evaluation(busy: float, shortfall_pp: float, delays: pd.DataFrame, delay_weight: float = DELAY_WEIGHT):
    """:func:`evaluate` from its parts: busy-server MAE, allocation shortfall and the per-bucket wait table."""
    shortfall = max(0.0, shortfall_pp)
    med, p90 = log_median_error(delays), log_median_error(delays, stat="p90")
    ks = float(delays["ks_statistic"].mean())
    return Evaluation(busy, shortfall, med, p90, ks, busy + shortfall + delay_weight * (med + p90 + ks))


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
                     complete_until: pd.Timestamp | None = None, fig3_table: pd.DataFrame | None = None) -> dict:
    """Every validation figure on ``span`` (and, with ``fig3_table``, the full trace's Figure 3 over the whole replay).

    Busy servers in the record's units (MAE in points of its total, also up to
    ``complete_until``, the job set's completeness horizon:
    :func:`.jobsets.completeness_horizon`), first-attempt waits per size bucket
    (median and p90 ratios), KS per VC of the DRE records, servers spanned per
    job vs the DRE records, the share of waiting that is latency only,
    preemptions, with ``gpu_util_cdf`` the GPU allocation beside its real lower
    bound, and with ``fig3_table`` the comparison with the full trace's Figure 3
    (:mod:`.fig3`: every job the replay ran, every attempt's wait).
    """
    pairs = paired_delays(rep, real_waits)
    delays = delay_table(pairs, span)
    ks = vc_ks(pairs, span, top_vcs)
    spanned = servers_spanned_table(servers_spanned(rep, real_waits, span))
    causes = wait_by_cause(rep, span)
    total = sum(causes.values())
    complete = span if complete_until is None else (span[0], min(span[1], complete_until))
    out = {"busy_servers_mae_pp": busy_servers_mae_pp(rep.result, occupancy, span),
           "busy_servers_mae_pp_complete": busy_servers_mae_pp(rep.result, occupancy, complete),
           "delays": delays, "vc_ks": ks,
           "max_median_ratio": either_way(delays["median_ratio"]), "max_p90_ratio": either_way(delays["p90_ratio"]),
           "max_ks": float(ks["ks"].max()), "log_median_error": log_median_error(delays),
           "servers_spanned": spanned, "servers_spanned_max_ks": float(spanned["ks"].max()),
           "wait_by_cause_s": causes, "latency_only_wait_share": causes["latency"] / total if total else float("nan"),
           "preemptions": preemption_figures(rep, span)}
    if gpu_util_cdf is not None:
        allocation = gpu_allocation(rep.result, gpu_util_cdf, span)
        out.update(allocation=allocation, gpu_allocated_share=allocation["simulated_allocated_share"],
                   gpu_allocation_shortfall_pp=allocation["shortfall_pp"],
                   evaluation=_evaluation(out["busy_servers_mae_pp"], allocation["shortfall_pp"], delays))
    if fig3_table is not None:
        cells = fig3.cell_table(fig3.attempt_waits(rep, retry_overheads(rep)), fig3_table)
        out["fig3_cell_table"] = cells
        out.update({f"fig3_{k}": v for k, v in fig3.summary(cells).items()})   # fig3_cells: how many are scored
    return out


def retry_overheads(rep: Replay, seed: int = 1) -> np.ndarray:
    """A fresh draw of the replay's scheduler overhead for each attempt after a job's first
    (:func:`.fig3.attempt_waits`)."""
    att = rep.result.attempts
    later = att[att["attempt"] > 0]
    return scheduler_latency(rep.params, later["num_gpus"].to_numpy(), seed) if len(later) else np.zeros(0)


#: YARN's defaults for the per-user limits of a queue: a user may hold up to the queue's capacity (user-limit-factor 1),
#: and shares it with the other active users down to 100% (minimum-user-limit-percent: no floor below an equal share)
YARN_USER_LIMITS = {"user_limit_factor": 1.0, "minimum_user_limit_percent": 100.0}
#: The ablation row of each back-off scope (sim/backoff.py)
BACKOFF_ROWS = {"gangs": "back-off for gangs only", "every": "back-off for every size",
                "borrowers": "back-off for jobs that would borrow"}
#: The cap quantile an ablation row tries when the calibration left caps from demand out
ABLATION_CAP_QUANTILE = 0.95
#: Servers the occupancy record counts on most days (its ``total``)
RECORD_SERVERS = 420


def ingredient_variants(best: ReplayParams) -> dict:
    """Each issue-29 ingredient switched the other way from the calibrated parameters: ``{row name: params}``.

    Servers in service (all listed, or the record's 420), each VC's cap from its demand (or one factor), the
    back-off for every size, gang holds, user limits (YARN's defaults; users named by bursts: an assumption the data
    cannot support) and the attempt split.
    """
    rows = {}
    if best.servers_in_service is not None:
        rows["all listed servers in service (539)"] = replace(best, servers_in_service=None)
    if best.servers_in_service != RECORD_SERVERS:
        rows[f"{RECORD_SERVERS} servers in service (the record's count)"] = replace(
            best, servers_in_service=RECORD_SERVERS)
    if best.cap_quantile is not None:
        rows["one cap factor for every VC (no caps from demand)"] = replace(best, cap_quantile=None)
    else:
        rows[f"caps from each VC's demand ({ABLATION_CAP_QUANTILE:g} quantile)"] = replace(
            best, cap_quantile=ABLATION_CAP_QUANTILE)
    for scope in BACKOFF_SCOPES:
        if scope != best.backoff:
            rows[BACKOFF_ROWS[scope]] = replace(best, backoff=scope)
    rows["no gang holds" if best.gang_hold else "gangs hold GPUs while waiting"] = replace(
        best, gang_hold=not best.gang_hold)
    if best.user_limit_factor is None:
        rows["user limits (YARN defaults; users = bursts, assumed)"] = replace(best, **YARN_USER_LIMITS)
    else:
        rows["no user limits"] = replace(best, user_limit_factor=None)
    if best.attempt_split:
        rows["one attempt per job (no split)"] = replace(best, attempt_split=())
    return rows


def ablation_variants(best: ReplayParams, real_waits: pd.DataFrame | None = None,
                      fit_span: tuple | None = None) -> dict:
    """One modelling ingredient changed at a time from the calibrated parameters (workload variants are the caller's).

    The issue-29 ingredients (:func:`ingredient_variants`), then the contention mechanism's: reclaim, the cap,
    lending, locality, quotas and the latency; with ``real_waits`` and ``fit_span``, also the model before the
    contention mechanism: the scheduler latency fitted to the whole real waits (a two-mode mixture per size, so its
    slow mode *is* the queueing) with unlimited lending, no reclaim, every listed server in service and none of the
    queueing ingredients (the attempt split, a property of the workload, stays).
    """
    variants = ingredient_variants(best)
    if best.reclaim_after_s is not None:
        variants["no reclaim"] = replace(best, reclaim_after_s=None)
    if best.max_capacity_factor is not None or best.cap_quantile is not None:
        variants["no cap (unlimited lending)"] = replace(best, max_capacity_factor=None, cap_quantile=None)
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
            cap_quantile=None, reclaim_after_s=None, lending=True, servers_in_service=None, backoff="gangs",
            gang_hold=False, user_limit_factor=None)
    return variants


#: The ablation table's figures (besides the per-bucket ratios), each a key of :func:`held_out_figures`.
ABLATION_FIGURES = ("busy_servers_mae_pp_complete", "gpu_allocated_share", "gpu_allocation_shortfall_pp",
                    "max_median_ratio", "max_p90_ratio", "max_ks", "servers_spanned_max_ks", "latency_only_wait_share",
                    "fig3_cells", "fig3_median_ks", "fig3_max_ks", "fig3_share_3min_within")


def ablation_row(rep: Replay, occupancy: pd.DataFrame, real_waits: pd.DataFrame, span: tuple, top_vcs: int = 5,
                 complete_until: pd.Timestamp | None = None, gpu_util_cdf: pd.DataFrame | None = None,
                 fig3_table: pd.DataFrame | None = None) -> dict:
    """One replay's row of the ablation table (:func:`ablation`); with ``gpu_util_cdf``, also the objective's parts
    on ``span`` (:func:`evaluate`) as ``evaluation.<part>``, for :func:`sensitivity` to reuse."""
    figures = held_out_figures(rep, occupancy, real_waits, span, gpu_util_cdf, top_vcs=top_vcs,
                               complete_until=complete_until, fig3_table=fig3_table)
    row = {"jobs": len(rep.replay.workload)}
    if "evaluation" in figures:
        row.update({f"evaluation.{part}": value for part, value in asdict(figures["evaluation"]).items()})
    for bucket, r in figures["delays"].iterrows():
        row[f"median_ratio_{bucket}"] = r["median_ratio"]
        row[f"p90_ratio_{bucket}"] = r["p90_ratio"]
    row.update({key: float(figures.get(key, np.nan)) for key in ABLATION_FIGURES})
    row["preemptions"] = figures["preemptions"]["count"]
    row["wall_s"] = rep.result.summary["wall_s"]
    return row


def ablation(variants: dict, machines: pd.DataFrame, vc_table: pd.DataFrame, occupancy: pd.DataFrame,
             real_waits: pd.DataFrame, span: tuple, top_vcs: int = 5, done: dict | None = None,
             complete_until: pd.Timestamp | None = None, gpu_util_cdf: pd.DataFrame | None = None,
             fig3_table: pd.DataFrame | None = None, quota_workload=None, workers: int | None = None,
             rows: dict | None = None) -> pd.DataFrame:
    """Held-out figures of each variant ``{name: (ReplayWorkload, ReplayParams)}``, one row each (:func:`ablation_row`).

    ``done``: ``{name: Replay}`` already simulated (measured first, not rerun); ``rows``: ``{name: row}`` already
    measured (:func:`ablation_row`, e.g. in a worker process), listed next. The variants' replays run side by
    side in up to ``workers`` processes (:mod:`dlcluster.parallel`; the table does not depend on it). Columns: the
    median and p90 ratio per size bucket and :data:`ABLATION_FIGURES` (NaN where a figure needs an input not given),
    the preemptions and the replay's wall time.
    """
    measures = dict(occupancy=occupancy, real_waits=real_waits, span=span, top_vcs=top_vcs,
                    complete_until=complete_until, gpu_util_cdf=gpu_util_cdf, fig3_table=fig3_table)

    def row_of(item):
        workload, params = item
        return ablation_row(run_replay(workload, machines, vc_table, params, quota_workload=quota_workload), **measures)

    table = {name: ablation_row(rep, **measures) for name, rep in (done or {}).items()}
    table.update(rows or {})
    table.update(zip(variants, map_in_processes(row_of, list(variants.values()), workers), strict=True))
    return pd.DataFrame.from_dict(table, orient="index").rename_axis("variant")


def ablation_evaluations(table: pd.DataFrame, variants: dict, replay: ReplayWorkload) -> list:
    """``[(params, Evaluation)]`` of the ablation rows (:func:`ablation`, with ``gpu_util_cdf``) that replayed
    ``replay`` itself (``variants``: ``{name: (ReplayWorkload, params)}``), for :func:`sensitivity`."""
    parts = [f"evaluation.{name}" for name in Evaluation.__dataclass_fields__]
    return [(params, Evaluation(*(float(table.loc[name, part]) for part in parts)))
            for name, (workload, params) in variants.items()
            if workload is replay and name in table.index and set(parts) <= set(table.columns)]


def _moves(best: ReplayParams) -> list[tuple[str, str, ReplayParams]]:
    """(parameter, label of the move, moved params): each fitted value moved once or twice, the others kept."""
    moves = []
    if best.locality == "relax":
        moves.append(("relax_after_s", "x2", replace(best, relax_after_s=best.relax_after_s * 2)))
    if best.reclaim_after_s is not None:
        moves.append(("reclaim_after_s", "off", replace(best, reclaim_after_s=None)))
    else:
        moves.append(("reclaim_after_s", "on after 300 s", replace(best, reclaim_after_s=300.0)))
    if best.cap_quantile is not None:
        q = best.cap_quantile
        moves.append(("cap_quantile", "halfway to 1", replace(best, cap_quantile=round(q + (1 - q) / 2, 6))))
        moves.append(("cap_quantile", "off (unlimited)", replace(best, cap_quantile=None, max_capacity_factor=None)))
    elif best.max_capacity_factor is not None:
        f = best.max_capacity_factor
        moves.append(("max_capacity_factor", "halfway to the quota",
                      replace(best, max_capacity_factor=1 + (f - 1) / 2)))
        moves.append(("max_capacity_factor", "unlimited", replace(best, max_capacity_factor=None)))
    else:
        moves.append(("max_capacity_factor", "2x quota", replace(best, max_capacity_factor=2.0)))
    if best.servers_in_service is not None:
        n = best.servers_in_service
        for k in (0.95, 1.05):
            moves.append(("servers_in_service", f"x{k:g}", replace(best, servers_in_service=int(round(n * k)))))
    flips = {"locality": {"relax": "any", "any": "relax"},
             "placement": {"most_free": "best_fit", "best_fit": "most_free"}, "rack_size": {16: 32, 32: 16},
             "unknown_vc_quota": {"none": "demand", "demand": "none"}, "gang_hold": {False: True, True: False}}
    for name, other in flips.items():
        value = other.get(getattr(best, name))
        if value is not None:
            moves.append((name, f"{value}", replace(best, **{name: value})))
    moves.extend(("backoff", scope, replace(best, backoff=scope)) for scope in BACKOFF_SCOPES if scope != best.backoff)
    return moves


def sensitivity(best: ReplayParams, replay: ReplayWorkload, machines: pd.DataFrame, vc_table: pd.DataFrame,
                occupancy: pd.DataFrame, real_waits: pd.DataFrame, span: tuple, gpu_util_cdf: pd.DataFrame,
                workers: int | None = None, calibrated: Replay | None = None,
                evaluated: list[tuple[ReplayParams, Evaluation]] = ()) -> pd.DataFrame:
    """The held-out objective (:func:`evaluate` on ``span``) as each fitted value moves, beside the calibrated one.

    One replay per move (:func:`_moves`): a timeout doubled, caps moved halfway towards their bound or switched off,
    the servers in service 5% fewer and more, switches flipped; side by side in up to ``workers`` processes.
    ``calibrated``: the replay of ``best`` on ``replay``, if already run (else it is run here); ``evaluated``:
    ``(params, evaluation)`` of replays of ``replay`` already run on the same span (the ablation's rows with the
    same parameters, :func:`ablation_evaluations`): a move to those parameters is not replayed again.
    """
    moves = _moves(best)

    def objective_of(params):
        return evaluate(run_replay(replay, machines, vc_table, params), occupancy, real_waits, span, gpu_util_cdf)

    def known(params):
        return next((ev for done, ev in evaluated if done == params), None)

    runs = [params for _, _, params in moves if known(params) is None]
    if calibrated is None:
        base, *fresh = map_in_processes(objective_of, [best] + runs, workers)
    else:
        base = evaluate(calibrated, occupancy, real_waits, span, gpu_util_cdf)
        fresh = map_in_processes(objective_of, runs, workers)
    fresh = iter(fresh)
    evaluations = [known(params) or next(fresh) for _, _, params in moves]
    rows = []
    for (name, label, params), ev in zip(moves, evaluations, strict=True):
        rows.append({"parameter": name, "moved": label, "calibrated": str(getattr(best, name)),
                     "value": str(getattr(params, name)), "objective": ev.objective,
                     "objective_change": ev.objective - base.objective,
                     "busy_servers_mae_pp": ev.busy_servers_mae_pp,
                     "allocation_shortfall_pp": ev.allocation_shortfall_pp,
                     "log_median_error": ev.log_median_error, "log_p90_error": ev.log_p90_error, "mean_ks": ev.mean_ks})
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
