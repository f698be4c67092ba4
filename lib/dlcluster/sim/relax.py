"""Relax timeouts per job size (issue 38): how long a job holds out at each locality level before it loosens.

Philly relaxes a waiting gang's locality after a back-off (about 3 minutes in one
summary of the paper). Which level each size waits for, and how long, no public
source states; DRE's placements show gangs of more than 8 GPUs on whole or half
servers, never spread thin, and their real waits are long (a median of 100 s and
a p90 of over two hours on the held-out span). The hypothesis modelled here (an
assumption, searched by the calibration): a gang larger than a server (whose
tightest level is a rack) holds out at each level for its own timeout,
``gang_relax_after_s``, while a job that fits a server relaxes after
``relax_after_s`` as before. ``None`` keeps one timeout for every size.
"""

from __future__ import annotations

from .placement import Locality

_SERVER = int(Locality.SERVER)


def check_gang_timeout(gang_relax_after_s: float | None) -> float | None:
    if gang_relax_after_s is None:
        return None
    if not gang_relax_after_s > 0:
        raise ValueError(f"gang_relax_after_s must be > 0 or None, got {gang_relax_after_s!r}")
    return float(gang_relax_after_s)


def relax_timeout(job, relax_after_s: float, gang_relax_after_s: float | None) -> float:
    """Seconds ``job`` waits at its current level before it loosens: the gang timeout for a job that no server can
    hold (its tightest level is looser than a server), else ``relax_after_s``."""
    if gang_relax_after_s is not None and job.min_level > _SERVER:
        return gang_relax_after_s
    return relax_after_s
