"""Progress from inside a kernel to the terminal: events, throttling, the ETA line, the tailing thread."""

import json

import pandas as pd

from dlcluster.experiments.sweep import expand_grid, run_sweep
from dlcluster.report.progress import PROGRESS_ENV, ProgressTail, SweepThrottle, emit, format_duration, sweep_line


def squared(params: dict) -> dict:
    return {"a_squared": params["a"] ** 2}


def test_format_duration():
    assert [format_duration(s) for s in (4.4, 65, 3725)] == ["4 s", "1 min 05 s", "1 h 02 min"]


def test_sweep_line_estimates_time_left_from_the_cells_run_here():
    # 10 of 48 cached, 2 more run in 60 s: 36 left at 30 s each
    assert sweep_line({"done": 12, "total": 48, "cached": 10, "elapsed_s": 60}) == \
        "sweep 12/48 simulations, ~18 min 00 s left"
    assert sweep_line({"done": 10, "total": 48, "cached": 10, "elapsed_s": 0}) == "sweep 10/48 simulations (10 cached)"
    assert sweep_line({"label": "calibration polish, round 2", "done": 0, "total": 14, "cached": 0,
                       "elapsed_s": 0}) == "calibration polish, round 2 0/14 simulations"
    assert sweep_line({"done": 48, "total": 48, "cached": 0, "elapsed_s": 125}) == \
        "sweep 48/48 simulations, finished in 2 min 05 s"


def test_throttle_lets_through_every_5_s_each_10_percent_and_the_end():
    now = [0.0]
    throttle = SweepThrottle(interval_s=5.0, clock=lambda: now[0])
    shown = []
    for done in range(0, 201):
        now[0] += 0.1
        if throttle({"done": done, "total": 200}):
            shown.append(done)
    # the first event, each 10% step (every 20 cells), and the 5 s marks between them (every 50 events)
    assert shown[0] == 0 and shown[-1] == 200
    assert {20, 40, 100, 180}.issubset(shown)
    assert len(shown) < 30
    # the next phase of a calibration starts at once, under its own label: its first event is shown
    assert throttle({"label": "calibration polish, round 1", "done": 0, "total": 20})
    assert not throttle({"label": "calibration polish, round 1", "done": 1, "total": 20})
    assert throttle({"label": "calibration polish, round 1", "done": 20, "total": 20})
    assert throttle({"label": "calibration polish, round 2", "done": 0, "total": 18})


def test_emit_is_silent_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    emit({"event": "sweep", "done": 1, "total": 2})
    assert list(tmp_path.iterdir()) == []


def test_sweep_reports_each_cell_and_its_results_do_not_depend_on_it(tmp_path, monkeypatch):
    cells = expand_grid({"a": [1, 2, 3]})
    quiet = run_sweep(cells, squared, tmp_path / "quiet", code_modules=[__name__], n_jobs=1, progress=False)
    events_file = tmp_path / "progress.jsonl"
    monkeypatch.setenv(PROGRESS_ENV, str(events_file))
    run_sweep(cells[:1], squared, tmp_path / "told", code_modules=[__name__], n_jobs=1, progress=False)
    told = run_sweep(cells, squared, tmp_path / "told", code_modules=[__name__], n_jobs=1, progress=False)
    pd.testing.assert_frame_equal(quiet, told)
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [(e["done"], e["total"], e["cached"]) for e in events] == [
        (0, 1, 0), (1, 1, 0),                 # the first sweep: one cell
        (1, 3, 1), (2, 3, 1), (3, 3, 1)]      # the second: one cell cached, two run
    assert all(e["event"] == "sweep" and e["elapsed_s"] >= 0 for e in events)


def test_tail_prints_events_written_while_it_runs_and_ignores_partial_lines(tmp_path):
    path = tmp_path / "progress.jsonl"
    shown = []
    with ProgressTail(path, shown.append, poll_s=0.05):
        with open(path, "a") as fh:
            fh.write(json.dumps({"event": "sweep", "done": 0, "total": 4, "cached": 0, "elapsed_s": 0}) + "\n")
            fh.write('{"event": "sweep", "done": 4, "total": 4, "cached": 0, "elapsed_s": 8}\n{"event": "sw')
    assert shown == ["sweep 0/4 simulations", "sweep 4/4 simulations, finished in 8 s"]
