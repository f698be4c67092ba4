"""Servers in service: the cluster the jobs actually had, as a subset of the machine list.

The public machine list has 539 servers with GPUs (3,205 GPUs); the per-minute
occupancy record counts 420 servers on most days. Which servers were in service
(online, not reserved, not drained) is not in any public data, and a smaller
cluster cannot be told apart from demand missing from the job sets: both make
the same jobs contend for fewer GPUs. The replay treats the number in service
as an unknown (the 420 of the record as its upper bound) and keeps that many
servers by a fixed rule, stated so that it can be replaced:

* the mix of server sizes is kept: each GPU count keeps its share of the
  servers (largest remainders, ties to the larger count, then the lower GPU count);
* within a size, the kept servers are spread evenly over the machine order
  (the ``i``-th of ``k`` kept from ``c`` is number ``floor((i + 1/2) c / k)``);
* racks are rebuilt as consecutive groups of ``rack_size`` of the kept servers;
* **servers seen in use are kept first** (``seen``, issue 47): a server a job
  is recorded on was in service. The calibration names the servers DRE's
  placements on the fit span used (only the fit span's: the held-out
  placements stay unseen). The rule above picks among the servers seen when
  they are more than ``servers``, else keeps them all and picks the rest among
  the others. Without it the rule took a third of the 12-GB 8-GPU servers out
  of service (80 of 238 at 360 in service), when the fit span's records show
  233 of them in use and none of the 82 12-GB 4-GPU servers: the 12-GB pool's
  gangs then contended for two thirds of their servers (sim/pools.py).

The VCs' guarantees are shares of the cluster (YARN capacities are
percentages): :func:`scale_quotas` scales them with the GPUs in service.
"""

from __future__ import annotations

import math

from .topology import Topology


def in_service(topology: Topology, servers: int, rack_size: int, seen=()) -> Topology:
    """``servers`` of ``topology``'s servers by the module's rule, re-racked in groups of ``rack_size``; the servers
    named in ``seen`` (recorded in use) first."""
    n = topology.num_servers
    if int(servers) != servers or not 1 <= servers <= n:
        raise ValueError(f"servers in service must be a whole number in 1..{n}, got {servers!r}")
    if int(rack_size) != rack_size or rack_size < 1:
        raise ValueError(f"rack_size must be a positive integer, got {rack_size!r}")
    names = set(map(str, seen))
    first = [s for s, name in enumerate(topology.server_names) if str(name) in names]
    if len(first) >= servers:
        kept = _spread(topology, first, int(servers))
    else:
        rest = [s for s, name in enumerate(topology.server_names) if str(name) not in names]
        kept = sorted(first + _spread(topology, rest, int(servers) - len(first)))
    return Topology(server_names=tuple(topology.server_names[s] for s in kept),
                    server_gpus=tuple(topology.server_gpus[s] for s in kept),
                    server_rack=tuple(i // int(rack_size) for i in range(len(kept))),
                    gpu_mem=tuple(topology.gpu_mem[s] for s in kept) if topology.gpu_mem else (),
                    excluded={**topology.excluded, "servers out of service (assumed)": n - len(kept)})


def _spread(topology: Topology, candidates: list[int], servers: int) -> list[int]:
    """``servers`` of the ``candidates`` (server indices in machine order): each GPU count keeps its share, spread
    evenly over the machine order (the module's rule)."""
    if servers <= 0:
        return []
    by_size: dict[int, list[int]] = {}
    for s in candidates:
        by_size.setdefault(topology.server_gpus[s], []).append(s)
    exact = {g: servers * len(members) / len(candidates) for g, members in by_size.items()}
    keep = {g: math.floor(x) for g, x in exact.items()}
    left = servers - sum(keep.values())
    for g in sorted(exact, key=lambda g: (-(exact[g] - keep[g]), -len(by_size[g]), g))[:left]:
        keep[g] += 1
    return sorted(members[math.floor((i + 0.5) * len(members) / keep[g])]
                  for g, members in by_size.items() for i in range(keep[g]))


def scale_quotas(quotas: dict, gpus_in_service: int, gpus_listed: int) -> dict:
    """Each VC's quota scaled by the share of the listed GPUs in service (floored)."""
    if gpus_listed <= 0:
        raise ValueError("scale_quotas: the listed cluster has no GPUs")
    return {vc: int(math.floor(q * gpus_in_service / gpus_listed)) for vc, q in quotas.items()}
