"""The long-jobs migration arms: the oracle named in its label, and the variant by attained service."""

import numpy as np
import pandas as pd

from dlcluster import experiments as E
from dlcluster.experiments import locality
from dlcluster.sim.workload import Workload

EPOCH = pd.Timestamp("2017-10-03 07:00:00", tz="UTC")


def test_the_migration_arms_say_what_the_policy_knows():
    row = {"locality": "relax", "relax_after_s": 180.0}
    assert locality.locality_arm({**row, "long_jobs": "migrate"}) == \
        "relax after 3 min, long jobs migrated (remaining time known: oracle)"
    assert locality.locality_arm({**row, "long_jobs": "migrate-attained"}) == \
        "relax after 3 min, long jobs migrated (run at least 1 h: attained service)"
    assert locality.locality_arm({**row, "long_jobs": "strict"}) == "relax after 3 min, long jobs strict"


def test_the_attained_service_arm_migrates_by_the_time_run_not_the_work_left():
    w = Workload(jobid=np.array(["a"], dtype=object), vc=np.array(["vc"], dtype=object),
                 user=np.array(["u"], dtype=object), arrival_s=np.zeros(1), num_gpus=np.ones(1, dtype=np.int64),
                 service_s=np.full(1, 10.0), epoch=EPOCH)
    cell = {"experiment": "locality", "locality": "relax", "relax_after_s": 180.0}
    _, oracle, _, _ = locality.options({**cell, "long_jobs": "migrate"}, w, {}, None)
    _, attained, _, _ = locality.options({**cell, "long_jobs": "migrate-attained"}, w, {}, None)
    m = oracle["migration"]
    assert (m.min_remaining_s, m.min_attained_s, m.defragment, m.consolidate) == (3600.0, 0.0, False, True)
    m = attained["migration"]
    assert (m.min_remaining_s, m.min_attained_s, m.defragment, m.consolidate) == (0.0, 3600.0, False, True)
    assert attained["slowdown"] is None   # the replay's own slowdown, as every locality arm


def test_both_migration_arms_are_in_the_full_and_small_grids():
    for name in ("full", "small"):
        cells = E.experiment_cells(E.grid_spec(name), "public", "fp", [0], default_relax_s=180.0)
        arms = {c["long_jobs"] for c in cells if c["experiment"] == "locality"}
        assert {"migrate", "migrate-attained"} <= arms, name
