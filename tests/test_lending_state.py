"""LendingState keeps what borrowers may take up to date as the VCs' use changes (one VC's share of the sums at a
time): after every change it equals the full derivation, and whole runs equal those that derive it in full."""

import pandas as pd
import pytest

from dlcluster.sim import simulate
from dlcluster.sim.lending import LendingLimit, LendingState
from test_dedicated_arm import real_jobs_with_sharing


def run(gang_hold: bool) -> pd.DataFrame:
    inputs, sharing = real_jobs_with_sharing(6)
    return simulate(inputs.workload, inputs.topology, "philly", quotas=inputs.quotas, seed=0, placement="best_fit",
                    lending_limit=LendingLimit(0.6), gang_hold=gang_hold, **sharing).jobs


def derived(state: LendingState):
    return state._at, list(state._lendable), list(state._lent), state._pool


@pytest.mark.parametrize("gang_hold", [False, True])
def test_each_change_equals_the_full_derivation_and_runs_equal_full_derivations(monkeypatch, gang_hold):
    changed, checked = LendingState.changed, []

    def checking(self, vc):
        incremental = self._at == self.sim.allocation_changes - 1
        changed(self, vc)
        kept = derived(self)
        self._refresh()
        assert kept == derived(self)
        checked.append(incremental)

    monkeypatch.setattr(LendingState, "changed", checking)
    jobs = run(gang_hold)
    assert sum(checked) > 1000   # most changes were kept incrementally
    # the same runs when every change leaves the state to be derived in full at its next use
    monkeypatch.setattr(LendingState, "changed", lambda self, vc: None)
    pd.testing.assert_frame_equal(jobs, run(gang_hold))
    assert (jobs["delay_fair_share_s"] > 0).sum() > 100   # the limit and quotas hold jobs back
