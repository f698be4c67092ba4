"""How placement and colocation slow a job down: the speed factor model.

A job's speed (1.0 = its service rate at ideal placement) depends on how its
GPUs are spread and on other jobs sharing its servers. The simulator accepts
any callable ``speed(gpus_per_server, num_racks, colocated_jobs) -> float`` in
(0, 1]; :func:`default_slowdown_model` builds the default:

* **Spread over servers** (placement, locality): fitted to real measurements,
  the per-placement step times of six models in the Pollux artifact
  (``learning_curves/*/placements.csv``, ResNet-50 among them as ``imagenet``).
  For each model, the step time of a one-server placement divided by that of
  each multi-server placement with the same GPUs and per-GPU batch size; the
  median per model, then the median over the six models (the stated pooling;
  :func:`spread_factor_from_placements`). The data come from one cluster with
  one network, so they cannot tell a placement within an InfiniBand rack from
  one across Ethernet racks: both take the same factor.
* **Colocation** (interference between jobs sharing a server): no real data
  here measure it, so it is an explicit scenario, :data:`NO_INTERFERENCE` by
  default. An experiment that needs it passes its own assumed factors
  (:meth:`SlowdownModel.with_interference`) and names them; the library holds
  no published value as an input.

The factors multiply: a spread job with neighbours runs at spread x colocated_spread.

**In a replay of real durations** (:class:`ReplaySlowdown`): a real job's duration already holds the speed of the
placement it really had, so the replay charges only the difference, speed(simulated placement) / speed(real
placement); a job placed as Philly placed it runs at its real duration, one placed better runs faster than it did.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .. import paths

SpeedFunction = Callable[[Sequence[int], int, int], float]

#: Colocation costs nothing: the default, as no data here measure interference.
NO_INTERFERENCE = {"colocated_one_server": 1.0, "colocated_spread": 1.0}


@dataclass(frozen=True)
class SlowdownModel:
    """Speed factors for spreading across servers and racks and for colocation."""

    cross_server: float
    cross_rack: float
    colocated_one_server: float = 1.0
    colocated_spread: float = 1.0
    provenance: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        for name in ("cross_server", "cross_rack", "colocated_one_server", "colocated_spread"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"slowdown model: {name} must be in (0, 1], got {value!r}")

    def speed(self, gpus_per_server: Sequence[int], num_racks: int, colocated_jobs: int) -> float:
        """Speed factor of a job with this placement and this many other jobs on its servers."""
        spread = len(gpus_per_server) > 1
        factor = 1.0 if not spread else (self.cross_server if num_racks <= 1 else self.cross_rack)
        if colocated_jobs > 0:
            factor *= self.colocated_spread if spread else self.colocated_one_server
        return factor

    __call__ = speed

    @property
    def colocation(self) -> str:
        """What of a job's neighbours its speed depends on (the simulator reads it to skip needless work): ``"none"``
        when colocation costs nothing (a running job's speed then never changes), else ``"any"`` (whether another
        job shares one of its servers, not how many)."""
        return "none" if self.colocated_one_server == 1.0 and self.colocated_spread == 1.0 else "any"

    def with_interference(self, colocated_one_server: float, colocated_spread: float, source: str) -> "SlowdownModel":
        """This model with assumed colocation factors, and where they come from (``source``, shown with results)."""
        return replace(self, colocated_one_server=float(colocated_one_server), colocated_spread=float(colocated_spread),
                       provenance={**self.provenance, "colocated": source})


def spread_factor_from_placements(directory: str | Path | None = None) -> tuple[float, dict]:
    """Median (over models) of the median one-server / multi-server step-time ratio.

    Compares placements with the same total GPUs and per-GPU batch size, for
    totals that have a one-server placement (2-4 GPUs in the data). Returns the
    factor and the per-model medians.
    """
    directory = Path(directory) if directory else paths.external_dir() / "learning_curves"
    files = sorted(directory.glob("*/placements.csv"))
    if not files:
        raise FileNotFoundError(f"no */placements.csv under {directory}")
    per_model = {}
    for file in files:
        table = pd.read_csv(file, dtype={"placement": str})
        for column in ("placement", "local_bsz", "step_time"):
            if column not in table.columns:
                raise ValueError(f"{file}: missing column {column!r}")
        table["total"] = table["placement"].map(lambda p: sum(int(c) for c in p))
        single = table[table["placement"] == table["total"].astype(str)]
        single = single.groupby(["total", "local_bsz"])["step_time"].mean()
        multi = table[(table["placement"].str.len() > 1) & table["total"].isin(single.index.get_level_values(0))]
        base = single.reindex(pd.MultiIndex.from_frame(multi[["total", "local_bsz"]])).to_numpy()
        ratios = base / multi["step_time"].to_numpy()
        ratios = ratios[np.isfinite(ratios)]
        if len(ratios):
            per_model[file.parent.name] = float(np.median(ratios))
    if not per_model:
        raise ValueError(f"{directory}: no placement pairs to compare")
    return float(np.median(list(per_model.values()))), per_model


@functools.lru_cache(maxsize=4)
def default_slowdown_model(learning_curves_dir: str | None = None) -> SlowdownModel:
    """The default speed model: spread fitted to the real step times, no interference (see the module docstring)."""
    spread, per_model = spread_factor_from_placements(learning_curves_dir)
    return SlowdownModel(
        cross_server=spread, cross_rack=spread, **NO_INTERFERENCE,
        provenance={
            "spread": "median over six models of the median one-server / multi-server step time, same GPUs and "
                      "per-GPU batch (learning_curves/*/placements.csv, Pollux artifact); "
                      "within and across racks alike",
            "spread_per_model": per_model,
            "colocated": "none: no real data here measure interference (an experiment passes its assumed factors)",
        })


#: Where a job's real placement comes from (:attr:`ReplaySlowdown.real_source`): its own DRE record (the servers it
#: spanned), or, without a record, the expected speed under DRE's per-size placement shares (labelled as such).
REAL_FROM_RECORD = "dre record"
REAL_FROM_SHARES = "dre per-size shares (expected)"


def spread_shape(num_gpus: int, num_servers: int) -> list[int]:
    """``num_gpus`` over ``num_servers`` servers as evenly as they go (a real placement known by its servers only)."""
    num_servers = max(1, min(int(num_servers), int(num_gpus)))
    base, extra = divmod(int(num_gpus), num_servers)
    return [base + 1] * extra + [base] * (num_servers - extra)


def real_speeds(slowdown, num_jobs: int) -> list[float] | None:
    """Each job's real-placement speed that the simulator divides by (a :class:`ReplaySlowdown`'s), checked to be one
    per job of the workload; None for any other slowdown (speeds are absolute)."""
    real_speed = getattr(slowdown, "real_speed", None)
    if real_speed is None:
        return None
    if len(real_speed) != num_jobs:
        raise ValueError(f"slowdown: {len(real_speed)} real speeds for {num_jobs} jobs")
    return [float(v) for v in real_speed]


@dataclass(frozen=True, eq=False)
class ReplaySlowdown:
    """A slowdown model for a replay of real durations: job ``i`` runs at ``model.speed(its simulated placement) /
    real_speed[i]``, the speed of its placement relative to the one it really had (the simulator divides,
    :meth:`dlcluster.sim.engine.Simulator._speed_of`), so a job placed as in Philly runs at its real duration.

    ``real_speed[i]``: the model's speed of job ``i``'s real placement, without neighbours (no data say who shared
    its servers); ``real_source[i]``: :data:`REAL_FROM_RECORD` or :data:`REAL_FROM_SHARES`
    (:func:`real_placement_speeds`). One entry per job of the simulated workload, in its order.
    """

    model: SlowdownModel
    real_speed: np.ndarray
    real_source: np.ndarray

    def __post_init__(self):
        speed = np.asarray(self.real_speed, dtype=float)
        if speed.ndim != 1 or len(speed) != len(self.real_source) or not ((speed > 0) & (speed <= 1)).all():
            raise ValueError("ReplaySlowdown: one real speed in (0, 1] per job, and one source per job")

    def speed(self, gpus_per_server: Sequence[int], num_racks: int, colocated_jobs: int) -> float:
        """The model's speed of a placement (the simulator divides it by the job's real speed)."""
        return self.model.speed(gpus_per_server, num_racks, colocated_jobs)

    __call__ = speed

    @property
    def colocation(self) -> str:
        return self.model.colocation

    def with_interference(self, colocated_one_server: float, colocated_spread: float,
                          source: str) -> "ReplaySlowdown":
        """The same replay under assumed colocation factors (the real speeds, taken without neighbours, stay)."""
        return replace(self, model=self.model.with_interference(colocated_one_server, colocated_spread, source))

    def shares(self) -> dict:
        """The share of jobs whose real placement is each source's (for a results key)."""
        source = np.asarray(self.real_source, dtype=object)
        return {s: float(np.mean(source == s)) for s in (REAL_FROM_RECORD, REAL_FROM_SHARES)}


def real_placement_speeds(model, num_gpus, real_servers, one_server_shares: dict, max_server_gpus: int = 8):
    """Each job's speed at its real placement under ``model`` and where that placement comes from.

    ``real_servers[i]``: servers job ``i``'s DRE record spanned (< 1 or NaN: no record). With a record: the model's
    speed of its GPUs spread evenly over those servers, in one rack (DRE names servers, not the replay's racks;
    the default model charges one factor within and across racks). Without one: the speed whose duration is the
    expected duration under ``one_server_shares`` (``{size bucket: share of the bucket's DRE records on one server}``),
    ``1 / (p / speed(one server) + (1 - p) / speed(spread))``; a 1-GPU job is on one server, and a job larger than
    ``max_server_gpus`` spread, whatever the shares. Returns (speeds, sources)."""
    from ..trace.schema import size_bucket

    speed = getattr(model, "speed", model)
    gpus = np.asarray(num_gpus, dtype=np.int64)
    servers = np.nan_to_num(np.asarray(real_servers, dtype=float), nan=0.0).astype(np.int64)
    buckets = np.asarray(size_bucket(pd.Series(gpus, dtype=float)).astype(str), dtype=object)
    out = np.ones(len(gpus), dtype=float)
    source = np.where(servers >= 1, REAL_FROM_RECORD, REAL_FROM_SHARES).astype(object)
    cache: dict = {}

    def at(g: int, n: int) -> float:
        if (g, n) not in cache:
            cache[(g, n)] = float(speed(spread_shape(g, n), 1, 0))
        return cache[(g, n)]

    for i, (g, n) in enumerate(zip(gpus.tolist(), servers.tolist(), strict=True)):
        if n >= 1:
            out[i] = at(g, n)
        elif g > 1:
            p = 0.0 if g > max_server_gpus else float(one_server_shares.get(buckets[i], np.nan))
            if not 0 <= p <= 1:
                raise ValueError(f"real_placement_speeds: no one-server share for {buckets[i]}-GPU jobs "
                                 f"(shares given for {sorted(one_server_shares)})")
            out[i] = 1.0 / (p / at(g, 1) + (1 - p) / at(g, 2))
    return out, source


def no_slowdown(gpus_per_server: Sequence[int], num_racks: int, colocated_jobs: int) -> float:
    """Every placement runs at ideal speed (pure replay of service times)."""
    return 1.0
