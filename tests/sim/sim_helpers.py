"""Shared helpers for the simulator tests: tiny workloads and invariant checks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlcluster.sim import Workload

EPOCH = pd.Timestamp("2017-10-03 07:00:00", tz="UTC")


def make_workload(rows, vcs=None, fail_class=None, converge_frac=None, users=None) -> Workload:
    """rows: (name, arrival_s, gpus, service_s); ``users``: each job's user (default: one user per job)."""
    names = [r[0] for r in rows]
    return Workload(
        jobid=np.array(names, dtype=object),
        vc=np.array(vcs or ["vc"] * len(rows), dtype=object),
        user=np.array(users or [f"u-{n}" for n in names], dtype=object),
        arrival_s=np.array([float(r[1]) for r in rows]),
        num_gpus=np.array([int(r[2]) for r in rows], dtype=np.int64),
        service_s=np.array([float(r[3]) for r in rows]),
        epoch=EPOCH,
        fail_class=None if fail_class is None else np.array(fail_class, dtype=object),
        converge_frac=None if converge_frac is None else np.array(converge_frac, dtype=float),
    )


def job(result, name) -> pd.Series:
    return result.jobs.set_index("jobid").loc[name]


def attempts_of(result, name) -> list[tuple]:
    a = result.attempts[result.attempts["jobid"] == name]
    return [(float(s), float(e), str(o)) for s, e, o in zip(a["start_s"], a["end_s"], a["outcome"], strict=True)]


def check_invariants(result, workload, topology) -> None:
    """Invariants every run must satisfy, checked from the outputs alone."""
    jobs, att = result.jobs, result.attempts
    # every job finishes or is reported
    assert len(jobs) == len(workload)
    assert set(jobs["status"]) <= {"Pass", "Failed", "Rejected"}
    assert list(jobs["jobid"]) == list(workload.jobid)
    rejected = jobs["status"] == "Rejected"
    assert not att["jobid"].isin(jobs.loc[rejected, "jobid"]).any()
    # gang all-or-nothing: every attempt holds the whole gang (one GPU for a pre-run)
    gang = jobs.set_index("jobid")["num_gpus"]
    expected = np.where(att["prerun"], 1, gang.reindex(att["jobid"]).to_numpy())
    assert (att["num_gpus"].to_numpy() == expected).all()
    placements = result.placements()
    per_attempt = placements.groupby(["jobid", "attempt"]).size()
    assert (per_attempt.reindex(pd.MultiIndex.from_frame(att[["jobid", "attempt"]])).to_numpy()
            == att["num_gpus"].to_numpy()).all()
    # never more GPUs than exist: each GPU exists and is held by one attempt at a time
    cap = dict(zip(topology.server_names, topology.server_gpus, strict=True))
    assert (placements["gpu"] < placements["machine"].map(cap)).all()
    spans = placements.merge(att[["jobid", "attempt", "start_s", "end_s"]], on=["jobid", "attempt"])
    spans = spans[spans["end_s"] > spans["start_s"]].sort_values(["machine", "gpu", "start_s"])
    same_gpu = (spans["machine"].shift() == spans["machine"]) & (spans["gpu"].shift() == spans["gpu"])
    assert (spans["start_s"][same_gpu] >= spans["end_s"].shift()[same_gpu] - 1e-9).all()
    # a job's attempts are consecutive rows, numbered 0, 1, ... in row order (measures.servers_spanned reads the
    # last row of a job as its last attempt)
    runs = (att["jobid"] != att["jobid"].shift()).cumsum()
    assert runs.groupby(att["jobid"]).nunique().le(1).all()
    assert (att["attempt"].to_numpy() == att.groupby(runs).cumcount().to_numpy()).all()
    # attempts of a job are sequential and inside [arrival, end]
    att_sorted = att.sort_values(["jobid", "attempt"])
    same_job = att_sorted["jobid"].shift() == att_sorted["jobid"]
    assert (att_sorted["start_s"][same_job] >= att_sorted["end_s"].shift()[same_job] - 1e-9).all()
    assert (att["end_s"] >= att["start_s"]).all()
    ran = jobs[~rejected].set_index("jobid")
    first = att.groupby("jobid")["start_s"].min()
    last = att.groupby("jobid")["end_s"].max()
    assert np.allclose(first.reindex(ran.index), ran["first_start_s"])
    assert np.allclose(last.reindex(ran.index), ran["end_s"])
    assert (ran["first_start_s"] >= ran["arrival_s"] - 1e-9).all()
    # GPU-time conservation: job-level sum == cluster-level integral; waiting + running == JCT
    att_gpu_s = ((att["end_s"] - att["start_s"]) * att["num_gpus"]).sum()
    assert np.isclose(att_gpu_s, jobs["gpu_time_s"].sum(), rtol=1e-9, atol=1e-6)
    # (GPUs a waiting gang held, sim/gang.py, are allocated too)
    assert np.isclose(att_gpu_s + jobs["held_gpu_s"].sum(), result.summary["allocated_gpu_s"], rtol=1e-9, atol=1e-6)
    held = (att["end_s"] - att["start_s"]).groupby(att["jobid"]).sum().reindex(ran.index)
    assert np.allclose(held + ran["wait_s"], ran["jct_s"], atol=1e-6)
    causes = ran[["delay_fair_share_s", "delay_fragmentation_s", "delay_backoff_s"]]
    assert (causes >= -1e-9).all().all()
    assert np.allclose(causes.sum(axis=1), ran["wait_s"])
    # back-off and fragmentation split again, exactly, by what held the job and how each stretch of it ended
    split = ran[["held_by_timer_s", "locality_relaxed_s", "locality_placed_s", "locality_contended_s"]]
    assert (split >= -1e-9).all().all()
    assert np.allclose(split.sum(axis=1), ran["delay_fragmentation_s"] + ran["delay_backoff_s"], atol=1e-6)
