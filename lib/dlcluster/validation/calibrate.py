"""The replay's parameters and what they give the simulator: the one place a :class:`ReplayParams` becomes a simulation.

Unknown parameters (:class:`ReplayParams`): the quotas of the VCs missing from
the public node counts, how far VCs may borrow idle GPUs (each VC's maximum
capacity, a multiple of its quota) and whether a VC below its quota reclaims
lent GPUs by preemption (:mod:`dlcluster.sim.sharing`), Philly's locality and
the relax timeout of its back-off, the rack size, the placement strategy, and
the scheduler latency (:mod:`.latency`). Known, not fitted: the slowdown model, charged to each job relative
to its real placement (``slowdown``, :func:`replay_slowdown`: one cluster for notebooks 05 and 06).
:func:`replay_setup` turns them into the simulator's inputs and options, :func:`run_replay` runs them.

The study's later stages live beside this module: :mod:`.latency` (the scheduler
latency fitted on real waits), :mod:`.measures` (the replay against the real record
in the record's units, and the calibration objective :func:`.measures.evaluate`),
:mod:`.search` (the search over these parameters on the *fit span*) and
:mod:`.heldout` (figures on the *held-out span*, the ablation and the sensitivity).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..sim import PhillyPolicy, make_policy, simulate, topology_from_machines
from ..sim.attempts import PLANNED_RETRY, PlannedRetries
from ..sim.capacity import demand_caps
from ..sim.heartbeat import Heartbeat
from ..sim.lending import LendingLimit
from ..sim.packing import PackingPlacement
from ..sim.pools import draw_pools
from ..sim.service import in_service, scale_quotas
from ..sim.sharing import Reclaim
from ..sim.users import UserLimits
from ..sim.workload import quotas_from_table
from .ingredients import burst_users, planned_first_attempts
from .latency import scheduler_latency
from .replay import Replay
from .workload import ReplayWorkload

UNKNOWN_VC_QUOTAS = ("none", "demand")


@dataclass(frozen=True)
class ReplayParams:
    """The replay's modelling choices; the defaults are the simulator's defaults before calibration, but for the relax
    clock: the replay counts locality delay as YARN does (``relax_clock="headroom"``), the simulator's policies keep
    the first-pass clock unless told (:data:`dlcluster.sim.policies.base.RELAX_CLOCKS`)."""

    unknown_vc_quota: str = "none"   # "none": VCs without a public node count only borrow; "demand": see vc_quotas
    lending: bool = True
    # YARN's maximum-capacity of each VC: this multiple of its quota (at least MIN_CAP_GPUS); None: unlimited lending
    max_capacity_factor: float | None = None
    # YARN's max_wait_before_kill: a VC below its quota preempts borrowers after its job starved this long;
    # None: no reclaim (borrowed GPUs are never taken back)
    reclaim_after_s: float | None = None
    reclaim_keeps_progress: bool = False
    relax_after_s: float = 180.0
    # a gang larger than a server holds out at each locality level this long (sim/relax.py); None: relax_after_s
    gang_relax_after_s: float | None = None
    # issue 47: when the relax timer runs: "headroom" only while the job's VC, user limit and pool could give it its
    # GPUs (YARN's delay scheduling), "first_pass" from its first scheduling pass (the replay before issue 47)
    relax_clock: str = "headroom"
    rack_size: int = 16
    # "most_free", "best_fit", "whole_servers" (sim/placement.py) or "packed" (sim/packing.py's rules)
    placement: str = "most_free"
    # "packed" only (sim/packing.py): 1-GPU jobs to the smallest servers first; gangs larger than a server on whole
    # servers (else in pieces, best fit)
    steer_single: bool = True
    gang_whole_servers: bool = True
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
    # issue 47: names of the servers DRE's placements on the fit span used, kept in service first (sim/service.py;
    # calibration.start_params); (): the plain rule
    servers_seen: tuple = ()
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
    # issue 38: YARN's scheduling cycle, passes only every this many seconds (sim/heartbeat.py; None: a pass at every
    # event), and each VC lending at most this share of its idle quota (sim/lending.py; None: all of it)
    heartbeat_s: float | None = None
    lending_share: float | None = None
    # issue 38: each job placed within one GPU type's servers (sim/pools.py), drawn by the shares below
    gpu_pools: bool = False
    # rows (vc, size bucket, pool, share) of multi-GPU jobs per GPU type, read off DRE's placements on the fit span
    # (sim/pools.py pool_shares; calibration.start_params)
    pool_shares: tuple = ()
    # issue 47, one cluster: the slowdown model in the replay (sim/slowdown.py ReplaySlowdown), each job charged
    # speed(simulated placement) / speed(real placement) on top of its real duration (replay_slowdown)
    slowdown: bool = False
    # the fit span's DRE records per size bucket and their share on one server, "2-4:346:0.99422;5-8:..." (a string,
    # so that it is one value in results.json: real_placement_shares): the real placement of a job without a DRE
    # record, in expectation (calibration.start_params)
    real_placement_shares: str = ""

    def ingredients(self) -> str:
        """The issue-29 ingredients switched on, in words ("none" when every one is off)."""
        parts = []
        if self.servers_in_service is not None:
            parts.append(f"{self.servers_in_service} servers in service" +
                         (f" ({len(self.servers_seen)} seen in use on the fit span kept first)"
                          if self.servers_seen else ""))
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
        if self.heartbeat_s is not None:
            parts.append(f"a scheduling cycle of {self.heartbeat_s:g} s")
        if self.lending_share is not None:
            parts.append(f"each VC lends at most {self.lending_share:.0%} of its idle quota")
        if self.gpu_pools:
            parts.append("GPU-type pools (multi-GPU jobs by their VC's DRE placements; 1-GPU jobs balancing the "
                         "pools' load, assumed)")
        if self.slowdown:
            parts.append("placement slowdown relative to each job's real placement (its DRE record's, else "
                         "expected from the fit span's DRE shares)")
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
                f"relax={self.relax_after_s:g}s"
                f"{'' if self.gang_relax_after_s is None else f' (gangs: {self.gang_relax_after_s:g}s)'}"
                f"{'' if self.relax_clock == 'headroom' else ' (clock from the first pass)'}, "
                f"rack={self.rack_size}, placement={self.placement_label()}, "
                f"latency={latency}, policy={self.policy}, ingredients: {self.ingredients()}")

    def placement_label(self) -> str:
        """The placement rule in words (the packing rules switched on, for ``"packed"``)."""
        if self.placement != "packed":
            return self.placement
        rules = ["best fit"] + (["1-GPU jobs to the smallest servers"] if self.steer_single else []) + \
            (["whole servers for gangs"] if self.gang_whole_servers else [])
        return f"packed ({', '.join(rules)})"

    def effective(self) -> "ReplayParams":
        """These parameters with the fields below that cannot act, given the others, at their defaults: two parameter
        sets with the same effective parameters give the same simulation (the calibration's polish replays one of them).

        Inert: the packing rules (``steer_single``, ``gang_whole_servers``) without ``placement="packed"``; the gang
        timeout and the relax clock where locality does not relax (:mod:`dlcluster.sim.relax`); the relax timeout where
        nothing waits for it (locality ``"any"`` and the back-off only for gangs waiting for locality); the cap factor
        where caps come from demand (``cap_quantile``); every policy option under a policy other than Philly's; the
        lending limit where nothing is lent (no quotas, or lending off); the pools' shares without pools; the real
        placement shares without the slowdown.
        """
        default = ReplayParams()
        inert = {}
        if self.placement != "packed":
            inert.update(steer_single=default.steer_single, gang_whole_servers=default.gang_whole_servers)
        if self.policy != "philly":
            inert.update(locality=default.locality, relax_after_s=default.relax_after_s, backoff=default.backoff)
        if self.policy != "philly" or self.locality != "relax":
            inert.update(gang_relax_after_s=default.gang_relax_after_s, relax_clock=default.relax_clock)
        if self.policy == "philly" and self.locality == "any" and self.backoff == "gangs":
            inert["relax_after_s"] = default.relax_after_s
        if self.cap_quantile is not None:
            inert["max_capacity_factor"] = default.max_capacity_factor
        if not (self.quotas and self.lending):   # nothing is lent (sharing_options)
            inert["lending_share"] = default.lending_share
        if not self.gpu_pools:
            inert["pool_shares"] = default.pool_shares
        if not self.slowdown:
            inert["real_placement_shares"] = default.real_placement_shares
        if self.servers_in_service is None:
            inert["servers_seen"] = default.servers_seen
        return replace(self, **inert)

    @classmethod
    def from_dict(cls, fields: dict) -> "ReplayParams":
        """The inverse of :func:`dataclasses.asdict` after a JSON round trip (lists back to tuples)."""
        mixture = tuple(tuple(row) for row in fields.get("latency_mixture", ()))
        return cls(**{**fields, "latency_mixture": mixture, "demand_span": tuple(fields.get("demand_span", ())),
                      "attempt_split": tuple(fields.get("attempt_split", ())),
                      "servers_seen": tuple(fields.get("servers_seen", ())),
                      "pool_shares": tuple(tuple(row) for row in fields.get("pool_shares", ()))})


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
    """The simulation of ``replay`` under ``params`` (with ``params.slowdown``, the replay's slowdown,
    :func:`replay_slowdown`; else ideal speed, the real durations as they are; see :func:`run_replay`).

    ``quota_workload``: the workload whose demand shares out the quotas of the
    VCs without a public node count and sets the caps from demand, and whose
    jobs the attempt split is drawn for (default: ``replay``'s; a part of the
    calibrated replay passes the whole one, to get the calibrated quotas, caps and split).
    The issue-29 ingredients (:class:`ReplayParams`) each become a simulator option or
    input: the servers in service (quotas scaled with them), caps from demand,
    the back-off scope, gang holds, user limits (users named by bursts), the
    attempt split and the GPU-type pools (drawn for ``quota_workload``'s jobs, so
    that a part of the replay keeps each job's pool); so do issue 38's scheduling cycle and lending limit.
    """
    listed = topology_from_machines(machines, params.rack_size)
    topology = listed if params.servers_in_service is None else \
        in_service(listed, int(params.servers_in_service), params.rack_size, params.servers_seen)
    quota_workload = replay.workload if quota_workload is None else quota_workload
    quotas = vc_quotas(vc_table, quota_workload, listed.total_gpus, params.unknown_vc_quota) \
        if params.quotas else None
    if quotas is not None and topology.total_gpus != listed.total_gpus:
        quotas = scale_quotas(quotas, topology.total_gpus, listed.total_gpus)
    policy = PhillyPolicy(locality=params.locality, relax_after_s=params.relax_after_s, backoff=params.backoff,
                          gang_relax_after_s=params.gang_relax_after_s, relax_clock=params.relax_clock) \
        if params.policy == "philly" else make_policy(params.policy)
    workload = replay.workload
    latency = scheduler_latency(params, workload.num_gpus, seed)
    if latency.any():
        workload = replace(workload, arrival_s=workload.arrival_s + latency)
    options = sharing_options(params, quotas, topology.total_gpus, np.unique(workload.vc.astype(str)),
                              quota_workload)
    # sampled every minute, as the occupancy record (and the per-minute export) are
    options.update(placement=placement_option(params), slowdown=replay_slowdown(params, replay) if params.slowdown
                   else None, sample_interval_s=60.0)
    if params.heartbeat_s is not None:
        options["heartbeat"] = Heartbeat(float(params.heartbeat_s))
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
    if params.gpu_pools:
        options["gpu_pools"] = job_pools(params, topology, quota_workload, workload.jobid, seed)
    return ReplaySetup(workload, topology, quotas, policy, options, latency)


def real_placement_shares(waits: pd.DataFrame) -> str:
    """``"bucket:records:share;..."``: per size bucket of the multi-GPU DRE records in ``waits``
    (:func:`.workload.dre_first_waits`'s table, with ``num_servers``: pass the fit span's only, so that the held-out
    placements stay unseen by the fit), how many there are and the share on one server (6 decimals), for
    :attr:`ReplayParams.real_placement_shares` (:func:`placement_shares_of` reads it back)."""
    rows = []
    for bucket in ("2-4", "5-8", ">8"):
        part = waits[waits["bucket"] == bucket]
        if len(part):
            rows.append(f"{bucket}:{len(part)}:{round(float((part['num_servers'] == 1).mean()), 6):g}")
    return ";".join(rows)


def placement_shares_of(text: str) -> dict:
    """``{size bucket: share on one server}`` from :func:`real_placement_shares`'s string."""
    shares = {}
    for row in filter(None, text.split(";")):
        bucket, _records, share = row.rsplit(":", 2)
        shares[bucket] = float(share)
    return shares


def replay_slowdown(params: ReplayParams, replay: ReplayWorkload, model=None):
    """The replay's slowdown (:class:`dlcluster.sim.slowdown.ReplaySlowdown`): ``model`` (default: the default
    slowdown model, fitted to real step times) relative to each job's real placement.

    The real placement is the job's own DRE record's (the servers it spanned) where it has one: the job's own real
    duration holds that placement's speed, so it is read for every job replayed, held-out span included (it sets only
    that job's speed; the fit never sees a held-out record, as the fit span's replay stops at its end). Elsewhere it
    is the expected speed under ``params.real_placement_shares``, DRE's per-size shares read on the fit span only;
    :meth:`~dlcluster.sim.slowdown.ReplaySlowdown.shares` says how many jobs took which.
    """
    from ..sim.slowdown import ReplaySlowdown, default_slowdown_model, real_placement_speeds

    model = default_slowdown_model() if model is None else model
    if not params.real_placement_shares:
        raise ValueError("slowdown: real_placement_shares is empty; it holds DRE's per-size placement shares of the "
                         "fit span (real_placement_shares, set by calibration.start_params)")
    shares = placement_shares_of(params.real_placement_shares)
    speed, source = real_placement_speeds(model, replay.workload.num_gpus, replay.servers_spanned(), shares)
    return ReplaySlowdown(model, speed, source)


def job_pools(params: ReplayParams, topology, quota_workload, jobids, seed: int = 0) -> np.ndarray:
    """The GPU-type pool of each of ``jobids`` (sim/pools.py's draw over ``quota_workload``'s jobs, by
    ``params.pool_shares``, on the GPUs of ``topology``'s types)."""
    if not params.pool_shares:
        raise ValueError("gpu_pools: pool_shares is empty; it holds the shares read off DRE's placements "
                         "(sim/pools.py pool_shares, set by calibration.start_params)")
    pool_gpus = pd.Series(topology.server_gpus).groupby(list(topology.gpu_mem)).sum().to_dict()
    every = pd.Series(draw_pools(quota_workload.vc, quota_workload.num_gpus, quota_workload.service_s,
                                 params.pool_shares, pool_gpus, seed),
                      index=np.asarray(quota_workload.jobid, dtype=str))
    return every.reindex(np.asarray(jobids, dtype=str)).to_numpy()


def placement_option(params: ReplayParams):
    """The simulator's ``placement`` option for ``params``: a strategy name, or sim/packing.py's rules."""
    if params.placement == "packed":
        return PackingPlacement(steer_single=params.steer_single, whole_servers_for_gangs=params.gang_whole_servers)
    return params.placement


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
    if params.lending_share is not None:
        options["lending_limit"] = LendingLimit(float(params.lending_share))
    if params.reclaim_after_s is not None:
        options["reclaim"] = Reclaim(max_wait_before_kill_s=float(params.reclaim_after_s),
                                     keep_progress=params.reclaim_keeps_progress)
    return options


def run_replay(replay: ReplayWorkload, machines: pd.DataFrame, vc_table: pd.DataFrame,
               params: ReplayParams = ReplayParams(), seed: int = 0, quota_workload=None) -> Replay:
    """Simulate the workload on the reconstructed machines with ``params``.

    The service times are the real jobs' durations, which already contain
    whatever slowdown their placement caused: with ``params.slowdown`` a job is
    charged only the difference between its simulated and its real placement
    (:func:`replay_slowdown`), else none (ideal speed).
    Each job enters the queue :func:`scheduler_latency` after its submit (the
    time Philly's scheduler and launcher take before a job can be placed, an
    unknown); the job's wait is still counted from its real submit time.
    ``quota_workload``: as for :func:`replay_setup`.
    """
    setup = replay_setup(replay, machines, vc_table, params, quota_workload=quota_workload, seed=seed)
    result = simulate(setup.workload, setup.topology, setup.policy, quotas=setup.quotas, seed=seed, **setup.options)
    return Replay(result, setup.topology, setup.quotas, bool(setup.options["lending"]), params=params, replay=replay,
                  latency_s=setup.latency_s)
