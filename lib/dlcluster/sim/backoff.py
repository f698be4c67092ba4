"""Philly's back-off for every job size: a job that cannot start when it is first tried waits one timeout.

Philly's scheduler relaxes a gang's locality after it has waited a timeout
(about 3 minutes). The full trace's Figure 3 shows a step near 3 minutes in most
VCs for 1-GPU jobs too, which a locality rule cannot produce: a 1-GPU job fits on
any server with a free GPU. The hypothesis modelled here (an assumption, named
in the policy as ``backoff="every"``): whenever the scheduler fails to place a
job, it backs off and does not try that job again for ``relax_after_s``,
whatever its size. While backed off the job is *held*: it sits in the queue at
the level :data:`HELD`, which no scheduling pass tries. When the timer fires
it is released one locality level looser than it started (a gang) and is then
placed as soon as GPUs allow, relaxing further every timeout as before.

``backoff="borrowers"``: a job that, when it is queued, would have to borrow
beyond its VC's quota (its VC's quota is used up) is held one timeout before it
may borrow idle GPUs, whether or not GPUs are free; a job within its VC's
quota is placed at once. The hypothesis: the scheduler gives a VC's guarantee at
once and lends only after a back-off (an assumption; YARN lends at once).

``backoff="gangs"`` (the default) is Philly's scheme as the simulator had it:
only a gang whose locality cannot be met holds out, and it starts the moment a
placement at its current level exists.

A held job's waiting is attributed as any other job's (:mod:`.engine`):
fair-share while its VC could not give it the GPUs anyway, back-off while it
could and the timer alone holds it.
"""

from __future__ import annotations

from .placement import Locality

#: The level of a held job (below every real locality level: no pass tries it).
HELD = -1
BACKOFF_SCOPES = ("gangs", "every", "borrowers")


def check_scope(backoff: str) -> str:
    if backoff not in BACKOFF_SCOPES:
        raise ValueError(f"backoff must be one of {BACKOFF_SCOPES}, got {backoff!r}")
    return backoff


def released_level(job, locality: str) -> int:
    """The level a held job takes when its back-off ends: one looser than its tightest with ``relax`` (it has
    waited one timeout), its tightest with ``strict``, anywhere with ``any``."""
    if locality == "any":
        return int(Locality.ANYWHERE)
    if locality == "strict":
        return job.min_level
    return min(job.min_level + 1, int(Locality.ANYWHERE))
