"""Known-answer tests of dlcluster.analysis.placement_cost on hand-made placement tables."""

import numpy as np
import pandas as pd
import pytest

from dlcluster.analysis import placement_cost as pc

M1 = """placement,local_bsz,step_time,sync_time
1,4,1.0,0.0
2,4,2.0,0.0
11,4,3.0,0.5
11,8,5.0,0.5
4,4,4.0,0.0
22,4,6.0,0.1
22,4,8.0,0.1
44,4,9.0,0.1
"""
M2 = """placement,local_bsz,step_time,sync_time
2,4,1.0,0.0
11,4,4.0,0.2
"""


@pytest.fixture
def curves(tmp_path):
    for model, text in (("m1", M1), ("m2", M2)):
        (tmp_path / model).mkdir()
        (tmp_path / model / "placements.csv").write_text(text)
    return tmp_path


def test_placement_strings():
    assert pc.parse_placement("1123") == [1, 1, 2, 3]
    for bad in ("", "10", "2a", "-1"):
        with pytest.raises(ValueError):
            pc.parse_placement(bad)


def test_load_counts_gpus_and_servers(curves):
    table = pc.load_placements(curves)
    row = table[(table["model"] == "m1") & (table["placement"] == "44")].iloc[0]
    assert (row["num_gpus"], row["num_servers"]) == (8, 2)
    assert sorted(table["model"].unique()) == ["m1", "m2"]
    assert len(pc.load_placements(curves, models=["m2"])) == 2


def test_slowdown_vs_one_server_same_gpus_and_batch(curves):
    slow, dropped = pc.placement_slowdowns(pc.load_placements(curves))
    got = {(r.model, r.placement, r.local_bsz): r.slowdown for r in slow.itertuples()}
    assert got == pytest.approx({("m1", "11", 4): 1.5, ("m1", "22", 4): 1.75, ("m2", "11", 4): 4.0})
    assert dropped.set_index("reason")["rows"].tolist() == [1, 1, 1]  # repeat, 8 GPUs, batch 8


def test_summaries_by_model(curves):
    slow, _ = pc.placement_slowdowns(pc.load_placements(curves))
    by_model = pc.spread_slowdown_by_model(slow).set_index("model")
    assert by_model.loc["m1", "geomean"] == pytest.approx(np.sqrt(1.5 * 1.75))
    assert by_model.loc["m1", "median"] == pytest.approx(1.625)
    assert by_model.loc["all (median of models)", "median"] == pytest.approx((1.625 + 4) / 2)
    assert by_model.loc["all (median of models)", "measurements"] == 3
    by_servers = pc.slowdown_summary(slow, ["model", "num_servers"])
    assert by_servers[["model", "num_servers", "measurements"]].values.tolist() == [["m1", 2, 2], ["m2", 2, 1]]


def test_bad_files_name_line_and_field(tmp_path):
    (tmp_path / "x").mkdir()
    path = tmp_path / "x" / "placements.csv"
    path.write_text("placement,local_bsz,step_time,sync_time\n1,4,1.0,0\n10,4,1.0,0\n")
    with pytest.raises(ValueError, match="line 3: field 'placement'"):
        pc.load_placements(tmp_path)
    path.write_text("placement,local_bsz,step_time,sync_time\n1,4,1.0,0\n2,4,oops,0\n")
    with pytest.raises(ValueError, match="line 3: field 'step_time'"):
        pc.load_placements(tmp_path)
    with pytest.raises(FileNotFoundError):
        pc.load_placements(tmp_path / "nothing")


def test_real_learning_curves_every_small_spread_placement_has_a_baseline():
    slow, dropped = pc.placement_slowdowns(pc.load_placements())
    assert sorted(slow["model"].unique()) == ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"]
    reasons = dropped.set_index("reason")["rows"]
    assert reasons["one-server placement not measured at that per-GPU batch size"] == 0
    assert set(slow["num_gpus"]) == {2, 3, 4}
    bert = pc.read_placements(pc.learning_curves_dir() / "bert" / "placements.csv", "bert")
    base = bert[(bert["placement"] == "2") & (bert["local_bsz"] == 4)]["step_time"].iloc[0]
    spread = bert[(bert["placement"] == "11") & (bert["local_bsz"] == 4)]["step_time"].iloc[0]
    row = slow[(slow["model"] == "bert") & (slow["placement"] == "11") & (slow["local_bsz"] == 4)]
    assert row["slowdown"].iloc[0] == pytest.approx(spread / base)


def test_benchmark_slowdowns_per_process_vs_alone_median_over_repeats():
    bench = pd.DataFrame({
        "config": ["alone", "dataparallel", "colocated2", "colocated_server", "alone", "dataparallel", "colocated2"],
        "repeat": [0, 0, 0, 0, 1, 1, 1],
        "status": ["ok", "failed", "ok", "skipped", "ok", "ok", "ok"],
        "reason": ["", "boom", "", "needs 2 GPUs", "", "", ""],
        "processes": [1, 2, 2, 0, 1, 2, 2], "processes_per_job": [1, 2, 1, np.nan, 1, 2, 1],
        "jobs": [1, 1, 2, np.nan, 1, 1, 2],
        "images_per_s_per_job": [80.0, np.nan, 30.0, np.nan, 120.0, 150.0, 50.0],
        "images_per_s_total": np.nan, "step_time_s": np.nan, "gpu_util_pct": np.nan})
    per_config = pc.benchmark_by_config(bench).set_index("config")
    assert per_config.index.tolist() == ["alone", "dataparallel", "colocated2", "colocated_server"]
    assert per_config["status"].tolist() == ["ok", "ok", "ok", "skipped"]
    assert per_config.loc["colocated_server", "reason"] == "needs 2 GPUs"
    assert per_config["repeats_ok"].tolist() == [2, 1, 2, 0]
    out = pc.benchmark_slowdowns(bench).set_index("config")
    assert out["images_per_s_per_job"].to_dict() == {"alone": 100.0, "dataparallel": 150.0, "colocated2": 40.0}
    # each round against its own 'alone' (80 in round 0, 120 in round 1), then the median over rounds
    assert out["slowdown_vs_alone"].to_dict() == pytest.approx({"alone": 1.0, "dataparallel": 120 / 75,
                                                                "colocated2": (80 / 30 + 120 / 50) / 2})
    with pytest.raises(ValueError, match="alone"):
        pc.benchmark_slowdowns(bench[bench["config"] != "alone"])
