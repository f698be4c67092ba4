"""Known-answer tests of the colocation benchmark's planning, arithmetic and CSV handling (no torch)."""

import pandas as pd
import pytest

from dlcluster.sources.colocation import benchmark as co


def test_parse_config_names_and_counts():
    assert co.parse_config("alone") == co.Config("alone", "alone", None)
    assert co.parse_config("colocated2") == co.Config("colocated2", "colocated_gpu", 2)
    assert co.parse_config("colocated_gpu3") == co.Config("colocated_gpu3", "colocated_gpu", 3)
    assert co.parse_config("dataparallel_colocated4") == co.Config("dataparallel_colocated4",
                                                                   "dataparallel_colocated", 4)
    for bad in ("alone2", "sameserver", "colocated0", "dataparallel1", ""):
        with pytest.raises(ValueError):
            co.parse_config(bad)


def devices(plan):
    return [(p.device, p.job, p.rank, p.world_size, p.measured) for p in plan.processes]


def test_plan_on_one_gpu_skips_what_needs_more():
    one = {c: co.plan_config(co.parse_config(c), "cuda", 1)
           for c in ("alone", "dataparallel", "colocated_server", "colocated_gpu", "dataparallel_colocated")}
    assert devices(one["alone"]) == [("cuda:0", 0, 0, 1, True)]
    assert devices(one["colocated_gpu"]) == [("cuda:0", 0, 0, 1, True), ("cuda:0", 1, 0, 1, True)]
    assert one["dataparallel"].skipped == "needs 2 GPUs on one server, 1 visible"
    assert one["colocated_server"].skipped == "needs 2 GPUs on one server, 1 visible"
    assert one["dataparallel_colocated"].skipped == "needs 4 GPUs on one server, 1 visible"
    assert co.plan_config(co.parse_config("dataparallel_colocated"), "cuda", 3).skipped == \
        "needs 4 GPUs on one server, 3 visible"
    assert co.plan_config(co.parse_config("alone"), "cuda", 0).skipped == "no CUDA GPU visible"


def test_plan_on_eight_gpus():
    dp = co.plan_config(co.parse_config("dataparallel"), "cuda", 8)
    assert devices(dp) == [(f"cuda:{r}", 0, r, 8, True) for r in range(8)]
    mixed = co.plan_config(co.parse_config("dataparallel_colocated"), "cuda", 8)
    assert devices(mixed) == ([(f"cuda:{r}", 0, r, 4, True) for r in range(4)]
                              + [(f"cuda:{4 + j}", 1 + j, 0, 1, False) for j in range(4)])
    assert co.plan_config(co.parse_config("dataparallel_colocated8"), "cuda", 8).skipped == \
        "needs 16 GPUs on one server, 8 visible"
    server = co.plan_config(co.parse_config("colocated_server3"), "cuda", 8)
    assert devices(server) == [("cuda:0", 0, 0, 1, True), ("cuda:1", 1, 0, 1, True), ("cuda:2", 2, 0, 1, True)]


def test_plan_on_cpu_shares_the_one_device():
    assert devices(co.plan_config(co.parse_config("dataparallel"), "cpu", 0)) == [
        ("cpu", 0, 0, 2, True), ("cpu", 0, 1, 2, True)]
    assert co.plan_config(co.parse_config("colocated_server"), "cpu", 0).skipped.startswith("on a CPU")
    assert len(co.plan_config(co.parse_config("dataparallel_colocated"), "cpu", 0).processes) == 4


def test_throughput_of_a_job_is_its_images_over_its_slowest_rank():
    procs = [co.Process("cpu", 0, 0, 2), co.Process("cpu", 0, 1, 2), co.Process("cpu", 1, measured=False)]
    finished = {0: {"elapsed_s": 1.0}, 1: {"elapsed_s": 2.0}, 2: {"elapsed_s": 0.5}}
    settings = co.RunSettings(model="tiny", batch_size=4, image_size=32, steps=10, warmup=0, threads=1,
                              seed=0, timeout_s=1)
    out = co._throughput(procs, finished, settings)
    assert out["images_per_s_per_job"] == pytest.approx(2 * 40 / 2.0)   # measured DDP job only
    assert out["images_per_s_total"] == pytest.approx(40 + 80)           # plus the neighbour
    assert out["step_time_s"] == pytest.approx(0.2)


def test_results_csv_round_trip_and_validation(tmp_path):
    row = {c: "" for c in co.CSV_COLUMNS}
    row.update(config="alone", status="ok", images_per_s_per_job=10.0)
    frame = pd.DataFrame([row, {**row, "config": "colocated2", "status": "skipped"}])
    path = co.write_results(frame, tmp_path / "bench.csv")
    back = co.read_results(path)
    assert back["config"].tolist() == ["alone", "colocated2"]
    assert back["images_per_s_per_job"].iloc[0] == 10.0
    path.write_text(path.read_text().replace("skipped", "maybe"))
    with pytest.raises(ValueError, match="line 3: field 'status'"):
        co.read_results(path)
    (tmp_path / "other.csv").write_text("config,status\nalone,ok\n")
    with pytest.raises(ValueError, match="missing columns"):
        co.read_results(tmp_path / "other.csv")


def test_committed_cpu_benchmark_is_readable_and_labelled():
    from dlcluster.paths import data_dir

    bench = co.read_results(data_dir() / "benchmarks" / "colocation_cpu_tiny.csv")
    assert set(bench["status"]) <= {"ok", "skipped"}
    assert (bench["input"] == co.SYNTHETIC_INPUT).all()
    assert (bench.loc[bench["status"] == "ok", "images_per_s_per_job"] > 0).all()
