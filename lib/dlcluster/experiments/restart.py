"""Preemption's restart overhead, a named assumption (issue 48, point 2): what a preempted job pays to restart.

A preempted job that keeps its progress (Tiresias's 2D-LAS and Gittins, SRTF; Philly's reclaim with
``keep_progress``) restarts from its checkpoint: it holds its GPUs for ``restart_overhead_s`` and makes no progress
before it resumes (:class:`dlcluster.sim.engine.Simulator`: each attempt after the first). Left at 0, preemption is
free and a preemptive policy's gain is an upper bound.

No public data measure a checkpoint-restore cost: the paper (``../shared/reference/atc19_published.md``) names
model-checkpoint errors as a failure reason but gives no time to save or restore one, and the Philly trace records
no restore. :data:`RESTART_OVERHEADS_S` is a sensitivity, not a fit: free (0 s, today's replay), one minute (60 s,
the pause the simulator already assumes for a migration, ``sim.migration.Migration.cost_s``: an assumption too) and
five minutes (300 s, a pessimistic restore of a large model from a distributed store).
"""

from __future__ import annotations

#: The restart overheads (s) a preemptive arm runs under: an assumption (no public data measure them), a sensitivity
RESTART_OVERHEADS_S = (0.0, 60.0, 300.0)


def restart_options(cell: dict) -> dict:
    """The simulator option of a cell's restart overhead (``restart_overhead_s``; 0 s, free, when it names none)."""
    return {"restart_overhead_s": float(cell.get("restart_overhead_s", 0.0))}
