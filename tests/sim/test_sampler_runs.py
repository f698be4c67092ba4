"""The sampler keeps one state per stretch between events, however many sample times the stretch covers: its time
series equals the one a sampler recording every sample time on its own gives, sample for sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_helpers import make_workload
from test_sim_properties import SETTINGS, scenarios

from dlcluster.sim import engine, simulate
from dlcluster.sim.sampler import Sampler
from dlcluster.sim.topology import Topology


class SampleBySample(Sampler):
    """The sampler as it was before the run-length form: the state appended once per sample time."""

    def __init__(self, sim):
        super().__init__(sim)
        self.rows = []

    def until(self, now: float) -> None:
        c, sim = self.sim.cluster, self.sim
        state = (c.total_gpus - c.total_free, c.total_free, c.idle_servers, c.total_free - c.idle_gpus,
                 len(sim.running), len(sim.waiting), *sim.pending_jobs, *sim.pending_gpus, *sim.vc_used)
        while self.next < now:
            self.rows.append((self.next, state))
            self.count += 1
            self.next = self.count * self.interval

    def table(self, num_vcs: int):
        times = np.array([t for t, _ in self.rows], dtype=float)
        return times, np.array([s for _, s in self.rows], dtype=np.int64).reshape(len(self.rows), -1)


def _both(monkeypatch, *args, **options):
    kept = simulate(*args, **options)
    with monkeypatch.context() as patch:
        patch.setattr(engine, "Sampler", SampleBySample)
        plain = simulate(*args, **options)
    return kept.timeseries, plain.timeseries


def test_a_long_quiet_stretch_is_one_state_and_every_sample_time_is_kept(monkeypatch):
    # two jobs: the second ends ~3 days after the first, with nothing happening in between
    workload = make_workload([("a", 0, 1, 100), ("b", 50, 2, 250_000)])
    topology = Topology(("s0",), (4,), (0,))
    kept, plain = _both(monkeypatch, workload, topology, "fifo", sample_interval_s=60.0)
    pd.testing.assert_frame_equal(kept, plain, check_exact=True)
    assert len(kept) == 250_050 // 60 + 2   # samples at 0, 60, ... up to the last end, plus one after it
    assert kept["time_s"].iloc[-1] == (len(kept) - 1) * 60.0
    quiet = kept[(kept["time_s"] > 200) & (kept["time_s"] < 250_000)]
    assert (quiet["allocated_gpus"] == 2).all() and (quiet["running_jobs"] == 1).all()


@pytest.mark.parametrize("interval", [0.1, 7.0, 300.0])
def test_sample_times_that_fall_exactly_on_an_event(monkeypatch, interval):
    # events at multiples of the interval, and at times a float quotient rounds across a multiple (0.1 * 3)
    rows = [(f"j{i}", round(i * 0.3, 1), 1, d) for i, d in enumerate([0.3, 0.7, 2.1, 3.0, 0.2, 6.0, 0.4])]
    workload = make_workload(rows)
    topology = Topology(("s0",), (2,), (0,))
    kept, plain = _both(monkeypatch, workload, topology, "fifo", sample_interval_s=interval)
    pd.testing.assert_frame_equal(kept, plain, check_exact=True)


@SETTINGS
@given(scenarios(), st.sampled_from([1.0, 30.0, 300.0]))
def test_the_run_length_form_never_changes_a_time_series(scenario, interval):
    workload, topology, policy, options = scenario
    with pytest.MonkeyPatch.context() as patch:
        kept, plain = _both(patch, workload, topology, policy, **{**options, "sample_interval_s": interval})
    pd.testing.assert_frame_equal(kept, plain, check_exact=True)
