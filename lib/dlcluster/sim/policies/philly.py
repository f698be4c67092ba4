"""Philly's scheme as summarised from the paper: FIFO order, ask for the
highest locality, and relax it one level (server -> rack -> anywhere) after
each ``relax_after_s`` of waiting (default 180 s: the "2-3 minute" figure of
one summary). GPUs are chosen in the rack with the most free GPUs, then on the
server with the most free GPUs."""

from __future__ import annotations

from .base import SchedulingPolicy


class PhillyPolicy(SchedulingPolicy):
    name = "philly"
    default_locality = "relax"
    default_placement = "most_free"

    def queue_key(self, job, now):
        return (job.arrival, job.idx)
