"""One number per quantity (issue 40): the library functions that compute the figures several notebooks print, on
hand-made tables with known answers, and a scan of every notebook's results.json at CI parameters that fails when
two notebooks publish different values under one name (:mod:`dlcluster.report.quantities`)."""

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dlcluster.analysis import placement_cost as pc
from dlcluster.analysis.classify import annotator_agreement
from dlcluster.report.quantities import ALIASES, DISTINCT
from dlcluster.validation import quantities as vq
from dlcluster.validation.ingredients import fit_attempt_split
from dlcluster.validation.jobsets import Alignment
from dlcluster.validation.workload import retried_mask

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))
EPOCH = pd.Timestamp("2017-10-01", tz="UTC")


# ----------------------------------------------------------------------------- the library, on known answers

def _first_waits():
    """Four DRE records: recorded wait - reconstructed first wait = 0, 61, 60 and 300 s; two passed."""
    return pd.DataFrame({"jobid": ["a", "b", "c", "d"], "recorded_wait_s": [10.0, 161.0, 70.0, 400.0],
                         "first_wait_s": [10.0, 100.0, 10.0, 100.0], "run_time_s": [100.0] * 4})


def test_retried_shares_by_selection_side_by_side():
    waits = _first_waits()
    assert retried_mask(waits).tolist() == [False, True, False, True]      # more than 60 s, not 60 itself
    dre = pd.DataFrame({"jobid": ["d", "c", "b", "a"], "status": ["Failed", "Failed", "Pass", "Pass"]})
    table = vq.retried_shares(waits, dre)
    assert list(table.index) == ["reconstructed", "reconstructed_passed", "extract"]
    assert table[["jobs", "retried"]].values.tolist() == [[4, 2], [2, 1], [2521, 593]]
    assert table["share"].tolist() == pytest.approx([0.5, 0.5, 593 / 2521])
    # each row names its own selection: none is "the" share
    assert table["selection"].is_unique and "quoted" in table.loc["extract", "selection"]
    # the replay's attempt split reads the same retried records, its share rounded for the cached parameters
    assert fit_attempt_split(waits)[0] == 0.5


def test_first_wait_by_span_gives_one_labelled_row_per_span_and_bucket():
    submitted = EPOCH + pd.to_timedelta([0, 1, 2, 10, 11], unit="D")
    pairs = pd.DataFrame({"submitted": submitted, "bucket": ["2-4", "2-4", "5-8", "2-4", "2-4"],
                          "real_s": [10.0, 30.0, 7.0, 100.0, 300.0], "simulated_s": [1.0] * 5})
    early = (EPOCH, EPOCH + pd.Timedelta(days=5))
    table = vq.first_wait_by_span(pairs, {"every record": None, "early": early})
    assert table[["span", "bucket", "records", "median_s"]].values.tolist() == [
        ["every record", "2-4", 4, 65.0], ["every record", "5-8", 1, 7.0],
        ["early", "2-4", 2, 20.0], ["early", "5-8", 1, 7.0]]
    assert table.loc[table["span"] == "early", "dates"].iloc[0] == "2017-10-01..2017-10-06"
    assert table.loc[table["span"] == "every record", "dates"].iloc[0] == "every record"


def test_occupancy_is_measured_in_the_records_units():
    # the replay: 2 servers in service; one busy the first hour, both the second; half its 8 GPUs, then all
    ts = pd.DataFrame({"time_s": [0.0, 3600.0], "idle_servers": [1, 0], "allocated_gpus": [4, 8]})
    result = SimpleNamespace(timeseries=ts, epoch=EPOCH, topology=SimpleNamespace(num_servers=2, total_gpus=8))
    # the record: 1 then 4 of its 420 servers active, and a monitoring gap (active 0) left out
    times = pd.date_range(EPOCH, periods=120, freq="min")
    occ = pd.DataFrame({"time": times, "active": [1] * 60 + [4] * 59 + [0], "total": 420})
    out = vq.occupancy_in_record_units(result, occ, (EPOCH, EPOCH + pd.Timedelta(hours=2)))
    # the replay's 1 and 2 busy servers are shares of the record's 420, not of its own 2 servers (50%, 100%)
    assert out["replay_busy_share"] == pytest.approx((1 / 420 + 2 / 420) / 2)
    assert out["real_busy_share"] == pytest.approx((1 / 420 + 4 / 420) / 2)
    assert out["busy_mae_pp"] == pytest.approx(100 * (0 + 2 / 420) / 2)
    assert out["gpu_allocated_share"] == pytest.approx(0.75)   # its samples in the span: 4 of 8 GPUs, then 8 of 8
    assert out["hours"] == 2 and out["dates"] == "2017-10-01..2017-10-01"
    with pytest.raises(ValueError, match="share no hour"):
        vq.occupancy_in_record_units(result, occ, (EPOCH + pd.Timedelta(days=3), EPOCH + pd.Timedelta(days=4)))


def test_unsuccessful_shares_by_selection():
    def jobs(status, gpu_time, submitted):
        return pd.DataFrame({"jobid": [str(i) for i in range(len(status))], "status": status, "num_gpus": 2,
                             "gpu_time_s": gpu_time, "vc": "v", "submitted": submitted})

    day = pd.Timestamp("2017-10-02 12:00", tz="UTC")
    # DRE: 1 of 4 records failed, holding 300 of 1,000 GPU-seconds
    dre = jobs(["Pass", "Pass", "Pass", "Failed"], [100.0, 200.0, 400.0, 300.0], day)
    # Pollux: 3 passed jobs, 50 GPU-seconds; RFold: 5 jobs in Pollux's span (one more outside it), 2 x 100 s each
    pollux = jobs([None] * 3, [10.0, 20.0, 20.0], [day, day + pd.Timedelta(hours=1), day + pd.Timedelta(hours=2)])
    rfold = pd.DataFrame({"arrival_offset_s": [0.0, 1800.0, 3600.0, 5400.0, 7200.0, 86400.0 * 30],
                          "num_gpus": 2, "duration_s": 100.0})
    trace = SimpleNamespace(jobs_of={"dre": dre, "pollux": pollux}.get, rfold_jobs=rfold)
    origin = day.tz_convert("US/Pacific").tz_localize(None)
    alignment = Alignment(origin, 0, 1.0, 0, 0, 0.0, 0.0)
    table = vq.unsuccessful_by_selection(trace, alignment)
    assert table.loc["dre_records", ["jobs", "jobs_pct", "gpu_time_pct"]].tolist() == pytest.approx([4, 25.0, 30.0])
    assert table.loc["rfold_not_in_pollux", ["jobs", "jobs_pct", "gpu_time_pct"]].tolist() == pytest.approx(
        [5, 100 * (1 - 3 / 5), 100 * (1 - 50 / 1000)])
    assert table["selection"].is_unique and table["definition"].is_unique


def test_the_spread_factor_measured_is_the_models_definition():
    # six models: the median of the speeds averages the middle two speeds, not the inverse of the middle slowdowns
    by_model = pd.DataFrame({"model": ["a", "b", "c", "d", "e", "f", "all (median of models)"],
                             "median": [1.0, 1.25, 2.0, 4.0, 5.0, 10.0, 3.0]})
    assert pc.spread_speed_factor(by_model) == pytest.approx((1 / 2 + 1 / 4) / 2)
    assert 1 / by_model["median"].iloc[-1] != pytest.approx(pc.spread_speed_factor(by_model))
    with pytest.raises(ValueError, match="no model"):
        pc.spread_speed_factor(by_model.iloc[-1:])


def test_agreement_counts_print_as_integers_also_where_a_split_lacks_the_classifier():
    messages = pd.DataFrame({"id": ["a", "b", "c", "d", "e"], "split": ["s", "s", "s", "t", "t"],
                             "reason": ["x", "y", "x", "x", "y"]})
    second = pd.DataFrame({"id": ["a", "b", "c", "d", "e"], "reason": ["x", "z", "x", "x", "y"], "sure": True})
    table = annotator_agreement(messages, second, pd.Series({"a": "x", "b": "y", "c": "y"}))   # split t: no answer
    assert [f"{r.agree} of {r.messages}" for _, r in table.iterrows()] == ["2 of 3", "2 of 2"]
    assert pd.isna(table.loc["t", "classifier_vs_first"]) and table.loc["s", "classifier_vs_first"] == 2


# ----------------------------------------------------------------------------- every notebook at CI parameters

def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-12)
    return a == b


@pytest.fixture(scope="module")
def published(ci_notebook):
    """Every notebook's results.json at CI parameters (each run once per session)."""
    return {stem: ci_notebook(stem) for stem in NOTEBOOKS}


@pytest.mark.notebook
def test_one_value_per_name_across_notebooks(published):
    by_key: dict = {}
    for stem, doc in published.items():
        for key, value in doc["results"].items():
            by_key.setdefault(key, {})[stem] = value
    conflicts = {key: values for key, values in by_key.items()
                 if any(not _same(v, next(iter(values.values()))) for v in values.values())}
    assert not conflicts, f"one name, several values: {conflicts}"
    # the names shared on purpose are there, in each notebook that prints them
    shared = {"dre.retried_share.reconstructed": {"01-locality-queueing", "04-failures-rtf", "05-simulator-validation"},
              "validation.heldout.busy_servers_mae_pp_complete": {"01-locality-queueing", "05-simulator-validation",
                                                                  "06-design-implications"},
              "heldout.delay.2-4.real_median_s": {"01-locality-queueing", "05-simulator-validation"},
              "jobsets.rfold_not_in_pollux_jobs_pct": {"04-failures-rtf", "05-simulator-validation"}}
    for key, stems in shared.items():
        assert set(by_key.get(key, {})) >= stems, key


@pytest.mark.notebook
def test_one_quantity_under_two_names_holds_one_value(published):
    for quantity, names in ALIASES.items():
        values = [published[stem]["results"][key] for stem, key in names]
        assert all(_same(v, values[0]) for v in values), f"{quantity}: {dict(zip(names, values, strict=True))}"


@pytest.mark.notebook
def test_two_quantities_once_printed_as_one_carry_their_own_labels(published):
    for quantity, by_notebook in DISTINCT.items():
        for stem, keys in by_notebook.items():
            doc = published[stem]
            missing = [k for k in keys if k not in doc["results"]]
            assert not missing, f"{quantity}: {stem} lacks {missing}"
            labels = [doc.get("descriptions", {}).get(k, "") for k in keys]
            shown = dict(zip(keys, labels, strict=True))
            assert all(labels) and len(set(labels)) == len(labels), f"{quantity}: {stem}: {shown}"


@pytest.mark.notebook
def test_no_comparison_is_recorded_twice(published):
    for stem, doc in published.items():
        rows = [(c.get("key"), c.get("what")) for c in doc.get("comparisons", [])]
        twice = {row for row in rows if rows.count(row) > 1}
        assert not twice, f"{stem} records these comparisons twice: {twice}"


@pytest.mark.notebook
def test_counts_print_as_integers(published, ci_notebook):
    """No executed notebook prints a count as '96.0 of 100.0'."""
    import json
    import re

    pattern = re.compile(r"\b\d+\.0 of \d+\.0\b")
    for stem in published:
        cells = json.loads((Path(ci_notebook.out_dir) / f"{stem}.ipynb").read_text())["cells"]
        text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", ""))
                       for c in cells if c["cell_type"] == "code" for o in c.get("outputs", []))
        assert not pattern.findall(text), f"{stem}: {sorted(set(pattern.findall(text)))[:5]}"


def test_the_registry_names_notebooks_that_exist():
    stems = set(NOTEBOOKS)
    assert {stem for names in ALIASES.values() for stem, _ in names} <= stems
    assert {stem for by in DISTINCT.values() for stem in by} <= stems
    assert all(len(names) >= 2 for names in ALIASES.values())
    assert all(len(keys) >= 2 for by in DISTINCT.values() for keys in by.values())
    assert np.all([len(set(keys)) == len(keys) for by in DISTINCT.values() for keys in by.values()])
