"""Peer-compatible mode: replay the jobs the way the Helios and Lucid simulators do.

It checks our engine against those two public implementations (HeliosArtifact
``framework/QSSF Service``, Lucid ``simulation``; see
``docs/peer-compatibility.md`` for every difference and its effect). The option set:

* jobs: the Pollux jobs of the VCs that have a Helios node count (82,229 of the
  82,247; the 18 jobs of the other 4 VCs are excluded and counted, as the
  peers drop those VCs);
* each VC confined to its own servers: ``nodes`` x 8-GPU servers from the
  ``vc_quotas`` table (Helios ``philly_vc.csv``), no lending, no borrowing,
  no racks (a VC's servers are one rack);
* FIFO (or SJF) without backfill: the head of a VC's queue blocks the rest of it;
* ``whole_servers`` placement (the peers' "consolidate" placer);
* no slowdown, and the job's duration as its service time (``gpu_time / num_gpus``,
  which equals the duration for every Pollux job).

VCs share nothing in this mode, so each VC is simulated on its own servers and
the job tables are concatenated: the same result as one run with the VCs'
server pools kept apart, and each run stays small.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .engine import Simulator
from .policies import make_policy
from .results import SimResult
from .topology import Topology, topology_from_spec
from .workload import Workload, workload_from_trace

PEER_GPUS_PER_NODE = 8  # HeliosArtifact simulator.py --num_gpus_per_node default; its placer supports only 8
PEER_POLICIES = ("fifo", "sjf")
PEER_OPTIONS = {"placement": "whole_servers", "slowdown": None, "lending": False}
# Helios's own Philly run: jobs submitted in this window of US/Pacific wall-clock time (HeliosArtifact
# framework/QSSF Service/simulator.py line 27, utils.py lines 73-103)
HELIOS_PHILLY_WINDOW = ("2017-10-01 00:00:00", "2017-11-30 23:59:00")


@dataclass(frozen=True)
class PeerInputs:
    """The jobs of VCs with a node count, and each VC's servers."""

    workload: Workload
    vc_nodes: dict

    def topology(self, vc: str) -> Topology:
        return topology_from_spec(1, self.vc_nodes[vc], PEER_GPUS_PER_NODE)


@dataclass
class PeerResult:
    jobs: pd.DataFrame               # all VCs, in workload order
    by_vc: dict                      # vc -> SimResult
    summary: dict


def peer_compatible(trace=None, window: tuple[str, str] | None = None) -> PeerInputs:
    """Peer-compatible inputs from a trace (default ``load_trace("public")``: the Pollux jobs).

    ``window``: keep only jobs submitted from ``window[0]`` to ``window[1]`` (inclusive), read as
    US/Pacific wall-clock times like the raw log (e.g. :data:`HELIOS_PHILLY_WINDOW`); the others are
    excluded and counted.
    """
    if trace is None:
        from ..trace import load_trace
        trace = load_trace("public", with_util=False)
    workload = workload_from_trace(trace, source="pollux" if trace.name == "public" else None)
    return peer_inputs(workload, trace.vc_quotas, window)


def peer_inputs(workload: Workload, vc_quotas: pd.DataFrame, window: tuple[str, str] | None = None) -> PeerInputs:
    """Peer-compatible inputs from any workload: keep the jobs of VCs with a node count (and in ``window``)."""
    if vc_quotas is None or "nodes" not in vc_quotas.columns:
        raise ValueError("no vc_quotas table with a 'nodes' column (the Helios node counts)")
    nodes = {str(v): int(n) for v, n in zip(vc_quotas["vc"], vc_quotas["nodes"], strict=True)}
    bad = {v: n for v, n in nodes.items() if n < 1}
    if bad:
        raise ValueError(f"vc_quotas: node counts must be >= 1, got {bad}")
    known = pd.Series(workload.vc).isin(list(nodes)).to_numpy()
    excluded = dict(workload.excluded)
    if (~known).any():
        excluded["VC without a node count (peer mode)"] = int((~known).sum())
    keep = known
    if window is not None:
        local = (workload.epoch + pd.to_timedelta(workload.arrival_s, unit="s")).tz_convert("US/Pacific")
        local = local.tz_localize(None)
        inside = np.asarray((local >= pd.Timestamp(window[0])) & (local <= pd.Timestamp(window[1])))
        if (known & ~inside).any():
            excluded[f"submitted outside {window[0]} .. {window[1]} (peer mode)"] = int((known & ~inside).sum())
        keep = known & inside
    if not keep.any():
        raise ValueError("peer-compatible inputs: no job of a VC with a node count is left")
    workload = replace(workload.take(keep), excluded=excluded, source=f"{workload.source} (peer-compatible)")
    return PeerInputs(workload=workload, vc_nodes={v: n for v, n in nodes.items() if v in set(workload.vc)})


def simulate_peer_compatible(inputs: PeerInputs | None = None, policy: str = "fifo") -> PeerResult:
    """Replay ``inputs`` (default: :func:`peer_compatible`) with each VC on its own servers."""
    if policy not in PEER_POLICIES:
        raise ValueError(f"peer-compatible policy must be one of {PEER_POLICIES}, got {policy!r}")
    inputs = inputs or peer_compatible()
    w = inputs.workload
    by_vc: dict[str, SimResult] = {}
    for vc in sorted(inputs.vc_nodes):
        sub = w.take(w.vc == vc)
        by_vc[vc] = Simulator(sub, inputs.topology(vc), make_policy(policy, backfill=False), **PEER_OPTIONS).run()
    jobs = pd.concat([r.jobs for r in by_vc.values()]).set_index("jobid").loc[w.jobid].reset_index()
    return PeerResult(jobs=jobs, by_vc=by_vc, summary=_summary(jobs, inputs, policy))


def _summary(jobs: pd.DataFrame, inputs: PeerInputs, policy: str) -> dict:
    per_vc = jobs.groupby("vc").agg(jobs=("jct_s", "size"), jct_mean_s=("jct_s", "mean"),
                                    queueing_mean_s=("queueing_delay_s", "mean"))
    return {"mode": "peer-compatible", "policy": policy, "options": dict(PEER_OPTIONS, backfill=False),
            "workload": inputs.workload.source, "workload_excluded": dict(inputs.workload.excluded),
            "vc_nodes": dict(inputs.vc_nodes), "gpus_per_node": PEER_GPUS_PER_NODE,
            "jobs": len(jobs), "status": {k: int(v) for k, v in jobs["status"].value_counts(sort=False).items()},
            "jct_s": {"mean": float(jobs["jct_s"].mean())},
            "queueing_delay_s": {"mean": float(jobs["queueing_delay_s"].mean())},
            "per_vc": per_vc.round(1).to_dict(orient="index")}
