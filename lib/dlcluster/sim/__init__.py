"""A fast discrete-event simulator of a Philly-like multi-tenant GPU cluster.

It replays the real Philly workload on the real Philly machines (to attribute
every waiting minute to a cause) and runs the paper's design-implication
experiments (locality, migration, failure handling, early stopping).

    from dlcluster.sim import public_inputs, simulate
    inputs = public_inputs()                     # 82,247 real jobs, 539 servers, VC quotas
    result = simulate(inputs.workload, inputs.topology, "philly", quotas=inputs.quotas)
    result.jobs, result.attempts, result.timeseries, result.summary
    write_raw_trace(result, "out/")              # Philly raw format, readable by load_trace

    # another cluster's job table (CSV/Parquet) instead of the Philly jobs:
    workload, quality = workload_from_job_table("jobs.csv.gz", columns="columns.yaml")
    result = simulate(workload, parse_spec("2x8x8"), "fifo")

Parts: :mod:`.topology`, :mod:`.workload`, :mod:`.placement`,
:mod:`.policies` (one file per policy), :mod:`.slowdown`, :mod:`.failures`,
:mod:`.migration`, :mod:`.engine`, :mod:`.results`, :mod:`.rawtrace` (a run in the raw format,
through :mod:`dlcluster.trace.rawwrite`), :mod:`.synthetic` (the SYNTHETIC benchmark trace).
See README.md in this folder for the model and its assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass

from .convergence import assign_convergence, convergence_fractions_from_learning_curves
from .engine import Simulator
from .failures import (FailureClass, FailureModel, RETRY_PRESETS, RetryPolicy, default_failure_model)
from .migration import Migration
from .peer import PeerInputs, PeerResult, peer_compatible, simulate_peer_compatible
from .placement import Locality, LocalityPlacement
from .policies import (POLICIES, FifoPolicy, GittinsPolicy, LasPolicy, PhillyPolicy, SchedulingPolicy,
                       SjfPolicy, SrtfPolicy, make_policy)
from .rawtrace import write_raw_trace
from .results import SimResult
from .slowdown import SlowdownModel, default_slowdown_model, no_slowdown
from .topology import (DEFAULT_RACK_SIZE, Topology, parse_spec, topology_from_machines, topology_from_spec)
from .workload import (Workload, generate_workload, quotas_from_table, workload_from_job_table, workload_from_jobs,
                       workload_from_trace)

__all__ = [
    "simulate", "Simulator", "SimResult", "public_inputs", "PublicInputs",
    "Workload", "workload_from_jobs", "workload_from_trace", "workload_from_job_table", "generate_workload",
    "quotas_from_table",
    "Topology", "topology_from_machines", "topology_from_spec", "parse_spec", "DEFAULT_RACK_SIZE",
    "SchedulingPolicy", "FifoPolicy", "PhillyPolicy", "SjfPolicy", "LasPolicy", "GittinsPolicy", "SrtfPolicy",
    "POLICIES", "peer_compatible", "simulate_peer_compatible", "PeerInputs", "PeerResult",
    "make_policy", "Locality", "LocalityPlacement", "SlowdownModel", "default_slowdown_model", "no_slowdown",
    "FailureClass", "FailureModel", "default_failure_model", "RetryPolicy", "RETRY_PRESETS", "Migration",
    "assign_convergence", "convergence_fractions_from_learning_curves", "write_raw_trace",
]


@dataclass(frozen=True)
class PublicInputs:
    workload: Workload
    topology: Topology
    quotas: dict


def public_inputs(rack_size: int = DEFAULT_RACK_SIZE, trace=None) -> PublicInputs:
    """The real Philly jobs (Pollux, 82,247), reconstructed machines and VC quotas of the public data.

    VCs without a quota in the public data (4 small ones) get none: they only
    borrow idle GPUs.
    """
    if trace is None:
        from ..trace import load_trace
        trace = load_trace("public")
    if trace.vc_quotas is None:
        raise ValueError("trace has no vc_quotas table")
    return PublicInputs(workload=workload_from_trace(trace), topology=topology_from_machines(trace.machines, rack_size),
                        quotas=quotas_from_table(trace.vc_quotas))


def simulate(workload: Workload, topology: Topology, policy="philly", **options) -> SimResult:
    """Run one simulation; ``options`` are those of :class:`Simulator`."""
    return Simulator(workload, topology, policy, **options).run()
