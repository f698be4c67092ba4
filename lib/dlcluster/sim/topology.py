"""Cluster topology: racks (RDMA/InfiniBand domains) of servers with their GPU counts.

The Philly trace has no rack information. :func:`topology_from_machines` builds
racks by a fixed, deterministic rule: servers with at least one GPU, sorted by
the number in their id (``m2`` before ``m10``), are cut into consecutive groups
of ``rack_size`` servers (the last rack may be smaller). Servers with 0 GPUs
(13 in the reconstructed list) are left out and counted in ``excluded``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

DEFAULT_RACK_SIZE = 16
_MACHINE_NUMBER = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Topology:
    """Servers (index order = placement tie order), their GPU counts and racks."""

    server_names: tuple[str, ...]
    server_gpus: tuple[int, ...]
    server_rack: tuple[int, ...]
    gpu_mem: tuple[str, ...] = ()
    excluded: dict = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.server_names)
        if n == 0:
            raise ValueError("topology: no servers with GPUs")
        if len(self.server_gpus) != n or len(self.server_rack) != n:
            raise ValueError("topology: server_names, server_gpus and server_rack differ in length")
        if any(g < 1 for g in self.server_gpus):
            raise ValueError("topology: server_gpus must be >= 1 for every server")
        if len(set(self.server_names)) != n:
            raise ValueError("topology: server_names are not unique")
        if self.gpu_mem and len(self.gpu_mem) != n:
            raise ValueError("topology: gpu_mem must be empty or one entry per server")
        racks = sorted(set(self.server_rack))
        if racks != list(range(len(racks))):
            raise ValueError("topology: server_rack must number racks 0..R-1")

    @property
    def num_servers(self) -> int:
        return len(self.server_names)

    @property
    def num_racks(self) -> int:
        return max(self.server_rack) + 1

    @property
    def total_gpus(self) -> int:
        return sum(self.server_gpus)

    @property
    def max_server_gpus(self) -> int:
        return max(self.server_gpus)

    def rack_servers(self) -> list[list[int]]:
        racks = [[] for _ in range(self.num_racks)]
        for s, r in enumerate(self.server_rack):
            racks[r].append(s)
        return racks

    def rack_gpus(self) -> list[int]:
        totals = [0] * self.num_racks
        for g, r in zip(self.server_gpus, self.server_rack, strict=True):
            totals[r] += g
        return totals

    def describe(self) -> str:
        sizes = pd.Series(self.server_gpus).value_counts().sort_index(ascending=False, kind="stable")
        mix = ", ".join(f"{n}x{g}" for g, n in sizes.items())
        racks = f"{self.num_racks} rack" + ("s" if self.num_racks != 1 else "")
        text = f"{self.num_servers} servers ({mix} GPUs), {self.total_gpus} GPUs, {racks}"
        if self.excluded:
            text += "; excluded: " + ", ".join(f"{v} {k}" for k, v in self.excluded.items())
        return text


def topology_from_spec(racks: int, servers_per_rack: int, gpus_per_server: int) -> Topology:
    """A uniform cluster: ``racks`` x ``servers_per_rack`` servers of ``gpus_per_server`` GPUs."""
    for name, value in (("racks", racks), ("servers_per_rack", servers_per_rack),
                        ("gpus_per_server", gpus_per_server)):
        if int(value) != value or value < 1:
            raise ValueError(f"topology spec: {name} must be a positive integer, got {value!r}")
    n = racks * servers_per_rack
    return Topology(server_names=tuple(f"m{i}" for i in range(n)), server_gpus=(gpus_per_server,) * n,
                    server_rack=tuple(i // servers_per_rack for i in range(n)))


def parse_spec(text: str) -> Topology:
    """``"RxSxG"`` (e.g. ``"2x4x8"``: 2 racks of 4 servers with 8 GPUs) -> topology."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"topology spec {text!r}: expected RACKSxSERVERSxGPUS, e.g. 2x4x8")
    return topology_from_spec(*(int(p) for p in parts))


def topology_from_machines(machines: pd.DataFrame, rack_size: int = DEFAULT_RACK_SIZE) -> Topology:
    """Topology from a machines table (columns ``machine``, ``num_gpus``; optional ``gpu_mem``).

    Racks follow the module rule (consecutive groups of ``rack_size`` servers in
    machine-number order). Machines with 0 or unknown GPUs are excluded and counted.
    """
    for column in ("machine", "num_gpus"):
        if column not in machines.columns:
            raise ValueError(f"machines table: missing column {column!r}")
    if int(rack_size) != rack_size or rack_size < 1:
        raise ValueError(f"rack_size must be a positive integer, got {rack_size!r}")
    gpus = pd.to_numeric(machines["num_gpus"], errors="coerce")
    names = machines["machine"].astype(str)
    unknown = gpus.isna()
    zero = ~unknown & (gpus <= 0)
    keep = ~unknown & ~zero
    table = pd.DataFrame({"machine": names[keep], "num_gpus": gpus[keep].astype(int)})
    if "gpu_mem" in machines.columns:
        table["gpu_mem"] = machines.loc[keep, "gpu_mem"].astype("string").fillna("").to_numpy()
    numbers = table["machine"].map(lambda m: int(_MACHINE_NUMBER.search(m).group(1))
                                   if _MACHINE_NUMBER.search(m) else np.iinfo(np.int64).max)
    table = table.assign(_number=numbers).sort_values(["_number", "machine"], kind="stable")
    excluded = {}
    if zero.any():
        excluded["servers with 0 GPUs"] = int(zero.sum())
    if unknown.any():
        excluded["servers with unknown GPU count"] = int(unknown.sum())
    n = len(table)
    return Topology(server_names=tuple(table["machine"]), server_gpus=tuple(int(g) for g in table["num_gpus"]),
                    server_rack=tuple(i // rack_size for i in range(n)),
                    gpu_mem=tuple(table["gpu_mem"]) if "gpu_mem" in table else (), excluded=excluded)
