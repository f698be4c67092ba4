"""Scheduling policies, one per file, by name."""

from __future__ import annotations

from .base import SchedulingPolicy
from .fifo import FifoPolicy
from .philly import PhillyPolicy
from .sjf import SjfPolicy
from .srtf import SrtfPolicy
from .tiresias import GittinsPolicy, LasPolicy

POLICIES = {p.name: p for p in (FifoPolicy, PhillyPolicy, SjfPolicy, LasPolicy, GittinsPolicy, SrtfPolicy)}

__all__ = ["SchedulingPolicy", "FifoPolicy", "PhillyPolicy", "LasPolicy", "GittinsPolicy", "SrtfPolicy",
           "SjfPolicy", "POLICIES", "make_policy"]


def make_policy(spec, **options) -> SchedulingPolicy:
    """A policy from its name (``fifo, philly, sjf, las, gittins, srtf``) and options, or a policy object."""
    if isinstance(spec, SchedulingPolicy):
        if options:
            raise ValueError("policy options are given but the policy is already an object")
        return spec
    if spec not in POLICIES:
        raise ValueError(f"unknown policy {spec!r}; choose from {sorted(POLICIES)}")
    return POLICIES[spec](**options)
