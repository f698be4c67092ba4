"""How placement and colocation slow a job down: the speed factor model.

A job's speed (1.0 = its service rate at ideal placement) depends on how its
GPUs are spread and on other jobs sharing its servers. The simulator accepts
any callable ``speed(gpus_per_server, num_racks, colocated_jobs) -> float`` in
(0, 1]; :func:`default_slowdown_model` builds the default from real
measurements:

* **Across servers within a rack** (RDMA/InfiniBand in Philly): the paper's
  ResNet-50 table (Table 4, provenance 'summary'): DiffServer 98.0 images/s vs
  SameServer 114.8 -> 0.854.
* **Across racks** (Ethernet in Philly): the public learning-curve data
  (Pollux artifact, six models measured on an Ethernet cluster). For each
  model, the step time of a one-server placement divided by the step time of
  each multi-server placement with the same GPUs and per-GPU batch size; the
  median per model, then the median over the six models (0.72 with the
  committed data). Assumption: that Ethernet cluster stands in for Philly's
  cross-rack network; the data have no intra-rack/cross-rack split.
* **Colocated jobs** on the job's servers (any number >= 1; the table has one
  level): IntraServer/SameServer = 75.6/114.8 = 0.659 for a job on one
  server, InterServer/DiffServer = 74.1/98.0 = 0.756 for a spread job.
  Assumption: applies to jobs of any size, including 1-GPU jobs.

The factors multiply: a cross-rack job with neighbours runs at 0.72 x 0.756.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .. import paths

# Paper Table 4, ResNet-50 throughput in images/s (provenance: summary).
RESNET50_IMAGES_PER_S = {"SameServer": 114.8, "DiffServer": 98.0, "IntraServer": 75.6, "InterServer": 74.1}

SpeedFunction = Callable[[Sequence[int], int, int], float]


@dataclass(frozen=True)
class SlowdownModel:
    """Speed factors for spreading across servers and racks and for colocation."""

    cross_server: float
    cross_rack: float
    colocated_one_server: float
    colocated_spread: float
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


def cross_server_factor_from_placements(directory: str | Path | None = None) -> tuple[float, dict]:
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
    """The default speed model (see the module docstring for sources and assumptions)."""
    t = RESNET50_IMAGES_PER_S
    cross_rack, per_model = cross_server_factor_from_placements(learning_curves_dir)
    return SlowdownModel(
        cross_server=t["DiffServer"] / t["SameServer"],
        cross_rack=cross_rack,
        colocated_one_server=t["IntraServer"] / t["SameServer"],
        colocated_spread=t["InterServer"] / t["DiffServer"],
        provenance={
            "cross_server": "paper Table 4 ResNet-50 DiffServer/SameServer (summary)",
            "cross_rack": "median over models of one-server/multi-server step time, learning_curves/*/placements.csv",
            "cross_rack_per_model": per_model,
            "colocated_one_server": "paper Table 4 IntraServer/SameServer (summary)",
            "colocated_spread": "paper Table 4 InterServer/DiffServer (summary)",
        })


def no_slowdown(gpus_per_server: Sequence[int], num_racks: int, colocated_jobs: int) -> float:
    """Every placement runs at ideal speed (pure replay of service times)."""
    return 1.0
