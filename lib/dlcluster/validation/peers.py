"""The reconstructed workload beside a peer's run on the complete Philly job log (Helios).

Helios's authors simulated the complete job log (Pass, Failed and Killed jobs
submitted 2017-10-01..11-30, retries merged) with each of 11 VCs confined to
its node count (``data/reference/helios_philly_complete_log.csv``). Their input
file is not public, so this is the check of our workload that it allows: the
same window and options (:mod:`dlcluster.sim.peer`) on our reconstruction of
the real demand, per VC, beside their figures.
"""

from __future__ import annotations

import pandas as pd

from ..paths import data_dir
from ..sim.peer import HELIOS_PHILLY_WINDOW, peer_inputs, simulate_peer_compatible
from ..sim.workload import Workload

PEER_FIGURES = "helios_philly_complete_log.csv"


def helios_complete_log() -> pd.DataFrame:
    """Helios's published mean JCT and queueing (s) per VC and ``all``, FIFO/SJF/SRTF."""
    path = data_dir() / "reference" / PEER_FIGURES
    table = pd.read_csv(path, dtype={"vc": str})
    expected = {"vc", "nodes"} | {f"{p}_{m}_s" for p in ("fifo", "sjf", "srtf") for m in ("jct", "queue")}
    missing = expected - set(table.columns)
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)}")
    return table.set_index("vc")


def complete_log_comparison(workload: Workload, vc_quotas: pd.DataFrame,
                            policies: tuple[str, ...] = ("fifo", "sjf")) -> tuple[pd.DataFrame, dict]:
    """Peer-compatible replay of ``workload`` in Helios's window, per VC beside Helios's figures.

    Returns ``(table, excluded)``: rows are the VCs and ``all``; columns ``jobs``
    (ours) and, per policy, ``ours_<p>_jct_s``, ``helios_<p>_jct_s``,
    ``ours_<p>_queue_s``, ``helios_<p>_queue_s``; ``excluded`` counts the jobs
    left out (other VCs, outside the window).
    """
    inputs = peer_inputs(workload, vc_quotas, HELIOS_PHILLY_WINDOW)
    helios = helios_complete_log()
    table = pd.DataFrame(index=list(helios.index))
    for policy in policies:
        jobs = simulate_peer_compatible(inputs, policy).jobs
        per_vc = jobs.groupby("vc").agg(jobs=("jct_s", "size"), jct=("jct_s", "mean"),
                                        queue=("queueing_delay_s", "mean"))
        per_vc.loc["all"] = [len(jobs), jobs["jct_s"].mean(), jobs["queueing_delay_s"].mean()]
        table["jobs"] = per_vc["jobs"]
        table[f"ours_{policy}_jct_s"] = per_vc["jct"]
        table[f"helios_{policy}_jct_s"] = helios[f"{policy}_jct_s"]
        table[f"ours_{policy}_queue_s"] = per_vc["queue"]
        table[f"helios_{policy}_queue_s"] = helios[f"{policy}_queue_s"]
    table.index.name = "vc"
    return table, dict(inputs.workload.excluded)
