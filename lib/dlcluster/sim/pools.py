"""GPU-type pools (issue 38): each job runs on the servers of one GPU type only, a candidate beside sim/packing.py.

DRE's last-attempt placements joined with the machine list (notebook 05 counts
them, :func:`dlcluster.validation.ingredients.placement_facts`): 29 of the 5,910
jobs spanned both GPU memory sizes (12 GB and 24 GB), and servers were shared
across VCs. So Philly's pools look like GPU types, not VC partitions. The model:

* **a pool per GPU type**: the machine list's ``gpu_mem`` of each server
  (:attr:`~.topology.Topology.gpu_mem`); a server belongs to its type's pool;
* **each job is given one pool before the run** (:func:`draw_pools`, seeded:
  one uniform draw per job in job order, inverse CDF over the pools in name
  order) and is placed only on that pool's servers (:class:`PooledCluster`:
  one :class:`~.cluster.ClusterState` per pool, kept in step with the whole
  cluster's, asked by the placement instead of the whole cluster); the wait
  causes (fair share, back-off, fragmentation) count the free GPUs of its pool;
* **multi-GPU jobs** take each pool with the share of their VC's DRE jobs of
  the same size bucket (2-4, 5-8, >8 GPUs) that ran on it (:func:`pool_shares`),
  where the VC has at least :data:`MIN_RECORDS` records in that bucket; other
  jobs (VCs without DRE records, or too few) take the bucket's share over every
  VC's records (the cluster-wide share);
* **1-GPU jobs**: DRE has no 1-GPU record, so which pool they used the public
  data do not say. No multi-GPU job ran on the 82 12-GB 4-GPU servers, so 1-GPU
  jobs (or nothing) ran there: they used both types. The model **assumes** the
  pools were equally loaded: 1-GPU jobs take each pool with the share of their
  GPU-time that brings each pool's offered GPU-time (multi-GPU jobs as drawn,
  plus 1-GPU jobs) closest to its share of the GPUs (:func:`single_gpu_shares`);
  the same share for every VC;
* a gang whose locality its pool can never give (larger than the pool's
  largest server or rack) is placed at the tightest level the pool can give
  (:meth:`PooledCluster.choose`); a job larger than its pool's GPUs goes to the
  largest pool (it could never run otherwise).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .cluster import ClusterState
from .placement import best_feasible_level
from .topology import Topology

#: Size buckets of multi-GPU jobs whose pool shares are read per VC (1-GPU jobs: :func:`single_gpu_shares`).
POOL_BUCKETS = (("2-4", 2, 4), ("5-8", 5, 8), (">8", 9, None))
#: Records of one VC in one size bucket below which the bucket's cluster-wide share is used instead.
MIN_RECORDS = 20
#: The VC name of a cluster-wide share row.
ANY_VC = "*"


def size_key(num_gpus: int) -> str:
    """The pool-share bucket of a job of ``num_gpus`` GPUs: ``"1"`` or one of :data:`POOL_BUCKETS`."""
    if num_gpus <= 1:
        return "1"
    for name, low, high in POOL_BUCKETS:
        if num_gpus >= low and (high is None or num_gpus <= high):
            return name
    raise ValueError(f"num_gpus must be >= 1, got {num_gpus!r}")


def pool_shares(placements: pd.DataFrame, machines: pd.DataFrame, jobs: pd.DataFrame,
                min_records: int = MIN_RECORDS) -> tuple:
    """Each VC's share of multi-GPU jobs per pool and size bucket, from DRE's last-attempt placements.

    ``placements``: ``jobid``, ``attempt``, ``machine`` (one row per GPU); ``machines``: ``machine``, ``gpu_mem``;
    ``jobs``: ``jobid``, ``vc`` (the records to count, e.g. the fit span's). A job's pool is the GPU type most of
    its GPUs had (ties: the first type in name order; 29 of 5,910 DRE jobs spanned both). Returns rows
    ``(vc, bucket, pool, share)``, sorted: the cluster-wide rows (vc :data:`ANY_VC`, every bucket with a record),
    then each (VC, bucket) with at least ``min_records`` records. Shares of one (vc, bucket) sum to 1.
    """
    for name, table, columns in (("placements", placements, ("jobid", "attempt", "machine")),
                                 ("machines", machines, ("machine", "gpu_mem")), ("jobs", jobs, ("jobid", "vc"))):
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise ValueError(f"pool_shares: {name} table lacks column(s) {missing}")
    last = placements[placements["jobid"].isin(set(jobs["jobid"]))]
    last = last[last["attempt"] == last.groupby("jobid")["attempt"].transform("max")]
    last = last.merge(machines[["machine", "gpu_mem"]], on="machine", how="left")
    if last["gpu_mem"].isna().any():
        missing = sorted(last.loc[last["gpu_mem"].isna(), "machine"].unique())[:5]
        raise ValueError(f"pool_shares: placements name machines without a gpu_mem in the machine list, e.g. {missing}")
    gpus = last.groupby(["jobid", "gpu_mem"], sort=True).size().rename("gpus").reset_index()
    gpus = gpus.sort_values(["jobid", "gpus", "gpu_mem"], ascending=[True, False, True], kind="stable")
    per_job = gpus.groupby("jobid", sort=True).agg(pool=("gpu_mem", "first"), gpus=("gpus", "sum"))
    per_job = per_job.join(jobs.drop_duplicates("jobid").set_index("jobid")["vc"].astype(str))
    per_job = per_job[per_job["gpus"] > 1]
    per_job["bucket"] = [size_key(int(g)) for g in per_job["gpus"]]
    rows = []
    for vc, part in [(ANY_VC, per_job), *sorted(per_job.groupby("vc", sort=True), key=lambda item: item[0])]:
        for bucket, _, _ in POOL_BUCKETS:
            counts = part.loc[part["bucket"] == bucket, "pool"].value_counts().sort_index(kind="stable")
            total = int(counts.sum())
            if total == 0 or (vc != ANY_VC and total < min_records):
                continue
            rows += [(str(vc), bucket, str(pool), round(float(n / total), 6)) for pool, n in counts.items()]
    return tuple(rows)


def share_table(shares: tuple) -> dict:
    """``{(vc, bucket): {pool: share}}`` from :func:`pool_shares`' rows (shares checked: in [0, 1], summing to 1)."""
    table: dict = {}
    for row in shares:
        if len(row) != 4:
            raise ValueError(f"pool shares: each row must be (vc, bucket, pool, share), got {row!r}")
        vc, bucket, pool, share = row
        if not 0 <= float(share) <= 1:
            raise ValueError(f"pool shares: share of ({vc}, {bucket}, {pool}) must be in [0, 1], got {share!r}")
        table.setdefault((str(vc), str(bucket)), {})[str(pool)] = float(share)
    for key, by_pool in table.items():
        if abs(sum(by_pool.values()) - 1) > 1e-4:
            raise ValueError(f"pool shares: the shares of {key} sum to {sum(by_pool.values()):.6f}, expected 1")
    return table


def single_gpu_shares(pool_gpus: dict, multi_gpu_s: dict, single_gpu_s: float) -> dict:
    """The share of 1-GPU GPU-time per pool that brings each pool's offered GPU-time closest to its share of the GPUs.

    ``pool_gpus``: ``{pool: GPUs}``; ``multi_gpu_s``: ``{pool: GPU-seconds of the multi-GPU jobs drawn to it}``;
    ``single_gpu_s``: the 1-GPU jobs' GPU-seconds. Pool ``p`` gets ``max(0, G_p / G x total - M_p)``, the shares
    normalised (water filling: a pool already over its share gets none); all zero: the shares of the GPUs.
    """
    if not pool_gpus or any(g <= 0 for g in pool_gpus.values()):
        raise ValueError(f"single_gpu_shares: every pool needs GPUs, got {pool_gpus!r}")
    gpus = sum(pool_gpus.values())
    total = single_gpu_s + sum(multi_gpu_s.values())
    room = {p: max(0.0, g / gpus * total - multi_gpu_s.get(p, 0.0)) for p, g in pool_gpus.items()}
    if sum(room.values()) <= 0:
        room = dict(pool_gpus)
    scale = sum(room.values())
    return {p: room[p] / scale for p in sorted(pool_gpus)}


def draw_pools(vc, num_gpus, service_s, shares: tuple, pool_gpus: dict, seed: int = 0) -> np.ndarray:
    """Each job's pool (a GPU type), drawn as the module docstring says; seeded, deterministic.

    ``vc``, ``num_gpus``, ``service_s``: per job; ``shares``: :func:`pool_shares`' rows; ``pool_gpus``: ``{pool:
    GPUs}`` of the cluster the jobs run on. Multi-GPU jobs are drawn first (their VC's share, else the cluster-wide
    one), then 1-GPU jobs by :func:`single_gpu_shares` on the drawn multi-GPU jobs' GPU-time.
    """
    vc = np.asarray(vc, dtype=str)
    num_gpus = np.asarray(num_gpus, dtype=np.int64)
    service_s = np.asarray(service_s, dtype=float)
    if not len(vc) == len(num_gpus) == len(service_s):
        raise ValueError("draw_pools: vc, num_gpus and service_s differ in length")
    pools = sorted(pool_gpus)
    table = share_table(shares)
    unknown = sorted({p for by_pool in table.values() for p in by_pool} - set(pools))
    if unknown:
        raise ValueError(f"draw_pools: shares name pools {unknown} the cluster lacks (pools: {pools})")
    u = np.random.default_rng([seed, 0x9001]).random(len(vc))
    out = np.empty(len(vc), dtype=object)
    multi = num_gpus > 1
    for i in np.flatnonzero(multi):
        bucket = size_key(int(num_gpus[i]))
        by_pool = table.get((vc[i], bucket)) or table.get((ANY_VC, bucket))
        if by_pool is None:
            raise ValueError(f"draw_pools: no pool share for {bucket}-GPU jobs (no cluster-wide row)")
        out[i] = _pick(pools, [by_pool.get(p, 0.0) for p in pools], u[i])
    gpu_s = num_gpus * service_s
    multi_s = {p: float(gpu_s[multi & (out == p)].sum()) for p in pools}
    single = single_gpu_shares(pool_gpus, multi_s, float(gpu_s[~multi].sum()))
    weights = [single[p] for p in pools]
    for i in np.flatnonzero(~multi):
        out[i] = _pick(pools, weights, u[i])
    too_big = num_gpus > np.array([pool_gpus[p] for p in out]) if len(out) else np.zeros(0, dtype=bool)
    if too_big.any():
        largest = max(pools, key=lambda p: (pool_gpus[p], p))
        out[too_big] = largest
    return out


def _pick(pools: list, weights: list, u: float):
    cumulative = np.cumsum(weights)
    k = int(np.searchsorted(cumulative / cumulative[-1], u, side="right"))
    return pools[min(k, len(pools) - 1)]


class PooledCluster(ClusterState):
    """The whole cluster's state plus one :class:`ClusterState` per pool, kept in step (every change of a server's
    free GPUs goes to its pool's state too); a pool's racks are its servers in each rack of the whole cluster."""

    def __init__(self, topology: Topology):
        if not topology.gpu_mem or any(not m for m in topology.gpu_mem):
            raise ValueError("GPU-type pools need the GPU memory size (gpu_mem) of every server in the topology")
        super().__init__(topology)
        self.pool_names = sorted(set(topology.gpu_mem))
        index = {name: p for p, name in enumerate(self.pool_names)}
        self.server_pool = [index[m] for m in topology.gpu_mem]
        self.pool_servers = [[s for s, p in enumerate(self.server_pool) if p == q] for q in range(len(self.pool_names))]
        self.local = [0] * len(self.server_pool)
        self.pool_states = []
        for servers in self.pool_servers:
            racks = {r: k for k, r in enumerate(sorted({topology.server_rack[s] for s in servers}))}
            self.pool_states.append(ClusterState(Topology(
                server_names=tuple(topology.server_names[s] for s in servers),
                server_gpus=tuple(topology.server_gpus[s] for s in servers),
                server_rack=tuple(racks[topology.server_rack[s]] for s in servers))))
            for k, s in enumerate(servers):
                self.local[s] = k

    def pool_index(self, names) -> list[int]:
        """Each job's pool index from its pool name (a GPU type of this cluster)."""
        index = {name: p for p, name in enumerate(self.pool_names)}
        unknown = sorted({str(n) for n in names} - set(index))
        if unknown:
            raise ValueError(f"gpu_pools: jobs name pools {unknown[:5]}; the cluster's GPU types are {self.pool_names}")
        return [index[str(n)] for n in names]

    def _set_free(self, s: int, new: int) -> None:
        super()._set_free(s, new)
        self.pool_states[self.server_pool[s]]._set_free(self.local[s], new)

    def choose(self, placement, job):
        """``placement``'s choice for ``job`` among its pool's servers (whole-cluster server indices), or None.

        A job whose locality its pool can never give (a gang larger than the pool's largest server or rack) is
        placed at the tightest level the pool can give.
        """
        state = self.pool_states[job.pool]
        g = job.gpus_now
        low = max(job.min_level, int(best_feasible_level(g, state.max_cap, state.max_rack_cap)))
        choice = placement.choose(state, g, low, max(job.level, low))
        if choice is None:
            return None
        servers = self.pool_servers[job.pool]
        return [(servers[s], k) for s, k in choice[0]], choice[1]

    def to_whole(self, pool: int, counts) -> list:
        """``(server, GPUs)`` pairs of one pool's state in whole-cluster server indices."""
        servers = self.pool_servers[pool]
        return [(servers[s], k) for s, k in counts]


def changed_causes(groups_of_vc: dict, seen: list, room: int, pool_states: list):
    """``(job, available GPUs)`` for each waiting job of one VC whose wait cause may have changed, by pool.

    ``groups_of_vc``: the simulator's groups of the VC (``{gpus: {(level, pool): [(key, job)]}}``); ``seen``: the GPUs
    each pool last offered the VC (updated here); ``room``: what the VC may still take (its cap less its use). A job's
    answer changes only if its gang size lies between the old and the new GPUs available in its pool.
    """
    for p, state in enumerate(pool_states):
        avail = min(state.total_free, room)
        old = seen[p]
        if avail == old:
            continue
        seen[p] = avail
        low, high = (avail, old) if avail < old else (old, avail)
        for g, by_level in groups_of_vc.items():
            if low < g <= high:
                for (_, pool), group in by_level.items():
                    if pool == p:
                        for _, job in group:
                            yield job, avail
