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


def no_slowdown(gpus_per_server: Sequence[int], num_racks: int, colocated_jobs: int) -> float:
    """Every placement runs at ideal speed (pure replay of service times)."""
    return 1.0
