"""The scheduling pass leaves out the tries that could only fail (sim/scheduling.py: beyond a VC's room, more GPUs than
are free, a gang size and level that already failed in the pass): whole runs equal those of the plain pass, which
makes every try, under each rule the skip reads (lending limit, maximum capacity, no lending, head-of-line blocking,
GPU-type pools, the isolate arm's migration)."""

import numpy as np
import pandas as pd
import pytest

from dlcluster.sim import Simulator, simulate
from dlcluster.sim.isolation import IsolatePlacement, IsolatingMigration
from dlcluster.sim.lending import LendingLimit
from test_dedicated_arm import real_jobs_with_sharing


def cases(inputs, sharing):
    w = inputs.workload
    no_reclaim = {k: v for k, v in sharing.items() if k != "reclaim"}
    pools = np.where(np.arange(len(w)) % 3 == 0, "24GB", "12GB")   # a third of the jobs on the 24 GB servers
    return {
        "lending limit and caps": dict(placement="best_fit", lending_limit=LendingLimit(0.6), **no_reclaim),
        "caps, most free": dict(placement="most_free", **no_reclaim),
        "no lending, head of line": dict(policy="fifo-hol", lending=False),
        "GPU-type pools": dict(placement="best_fit", gpu_pools=pools, **no_reclaim),
        "isolate gangs with migration": dict(placement=IsolatePlacement(w.num_gpus > 1),
                                             migration=IsolatingMigration(), **no_reclaim),
    }


def run(inputs, options) -> pd.DataFrame:
    options = dict(options)
    policy = options.pop("policy", "philly")
    if policy == "fifo-hol":
        from dlcluster.sim.policies import make_policy
        policy = make_policy("fifo", backfill=False)
    return simulate(inputs.workload, inputs.topology, policy, quotas=inputs.quotas, seed=0, **options).jobs


@pytest.mark.parametrize("case", ["lending limit and caps", "caps, most free", "no lending, head of line",
                                  "GPU-type pools", "isolate gangs with migration"])
def test_whole_runs_equal_the_plain_pass(monkeypatch, case):
    inputs, sharing = real_jobs_with_sharing(6)
    options = cases(inputs, sharing)[case]
    skipping = run(inputs, options)
    monkeypatch.setattr(Simulator, "skips_failing_tries", False)
    pd.testing.assert_frame_equal(skipping, run(inputs, options))
    assert skipping["queueing_delay_s"].mean() > 600   # a busy cluster: passes leave jobs waiting
