"""The sharp step in the runtime to failure: a limit of the scheduler, a property of the selection, or an artifact?"""

import numpy as np
import pandas as pd

from dlcluster.analysis.failures import rtf_step, rtf_step_text


def _records(step_users, step_vcs, spread_s, longer):
    rng = np.random.default_rng(0)
    n_step, n_other = 60, 200
    users = [f"u{i % step_users}" for i in range(n_step)] + [f"v{i % 40}" for i in range(n_other)]
    vcs = [f"vc{i % step_vcs}" for i in range(n_step)] + [f"vc{i % 5}" for i in range(n_other)]
    duration = np.r_[14400 + rng.uniform(-spread_s, spread_s, n_step), rng.uniform(300, 14000, n_other)]
    duration[n_step:n_step + longer] = 20000.0
    jobs = pd.DataFrame({"jobid": [f"j{i}" for i in range(n_step + n_other)], "vc": vcs,
                         "submitted": pd.Timestamp("2017-10-02", tz="UTC") + pd.to_timedelta(np.arange(260) * 7, "h")})
    outcomes = pd.DataFrame({"jobid": jobs["jobid"], "user": users, "num_gpus": 8, "duration_s": duration,
                             "outcome": "failed", "failed": True})
    return outcomes, jobs


def test_a_step_shared_by_many_users_to_the_second_is_a_limit_some_jobs_carry():
    outcomes, jobs = _records(step_users=20, step_vcs=5, spread_s=8, longer=30)
    step = rtf_step(outcomes, jobs)
    assert step["minutes"] == 240 and step["failures"] == 60 and step["users"] == 20 and step["vcs"] == 5
    assert step["failed_longer"] == 30 and step["spread_s"] <= 10
    text = rtf_step_text(step, selected_min_run_s=300)
    assert "A time limit" in text and "Not a limit on every job: 30 failed" in text
    assert "acts on the start of a run, not its end" in text


def test_a_step_of_one_users_jobs_is_not_called_a_limit():
    outcomes, jobs = _records(step_users=1, step_vcs=1, spread_s=8, longer=0)
    assert "may be one group's jobs" in rtf_step_text(rtf_step(outcomes, jobs))


def test_no_failure_no_step():
    outcomes, jobs = _records(20, 5, 8, 0)
    assert rtf_step(outcomes.assign(failed=False), jobs) == {}
