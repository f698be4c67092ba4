"""The colocation benchmark end to end on CPU with the tiny model (needs the [torch] extra).

PyTorch is imported inside the fixtures, not at module level, so that without it the `torch`
marker (tests/conftest.py) skips these tests with its reason instead of failing the collection.
"""

import pytest

from dlcluster.sources.colocation import benchmark as co

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def torch():
    import torch
    return torch


@pytest.fixture(scope="module")
def resnet():
    from dlcluster.sources.colocation import resnet
    return resnet


def test_resnet50_has_the_standard_parameter_count_and_output(torch, resnet):
    model = resnet.build_model("resnet50")
    assert sum(p.numel() for p in model.parameters()) == 25_557_032  # torchvision's resnet50
    model.eval()
    with torch.no_grad():
        assert model(torch.zeros(1, 3, 64, 64)).shape == (1, 1000)


def test_tiny_model_trains_on_its_input_size(torch, resnet):
    spec = resnet.MODELS["tiny"]
    model = resnet.build_model("tiny")
    out = model(torch.randn(2, 3, spec.image_size, spec.image_size))
    assert out.shape == (2, spec.num_classes)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_cli_runs_alone_colocated_and_dataparallel_on_cpu(tmp_path, resnet):
    out = tmp_path / "bench.csv"
    rc = co.main(["--device", "cpu", "--model", "tiny", "--configs", "alone,colocated2,dataparallel,colocated_server",
                  "--steps", "2", "--warmup", "1", "--out", str(out)])
    assert rc == 0
    bench = co.read_results(out).set_index("config")
    assert bench["status"].to_dict() == {"alone": "ok", "colocated2": "ok", "dataparallel": "ok",
                                         "colocated_server": "skipped"}
    ran = bench.loc[["alone", "colocated2", "dataparallel"]]
    assert (ran["images_per_s_per_job"] > 0).all()
    assert ran["processes"].tolist() == [1, 2, 2]
    assert ran["processes_per_job"].tolist() == [1, 1, 2]
    # two independent jobs: the total is the sum of two per-job rates, their mean times two
    assert bench.loc["colocated2", "images_per_s_total"] == pytest.approx(
        2 * bench.loc["colocated2", "images_per_s_per_job"])
    assert (ran["gpu_util_source"] == "NA: CPU run").all()
    assert bench.loc["alone", "batch_size"] == resnet.MODELS["tiny"].default_batch_size
    assert (bench["repeat"] == 0).all() and (bench["load_avg_1min"] >= 0).all()


def test_a_failing_worker_gives_a_failed_row_with_its_error():
    # batch of 1 with 1x1 feature maps: BatchNorm cannot train on a single value
    # (with two processes the other one sees a broken barrier; the reason is the root cause)
    frame = co.run_benchmark(["alone", "colocated2"], "cpu", "tiny", steps=1, warmup=0, batch_size=1, timeout_s=120)
    assert frame["status"].tolist() == ["failed", "failed"]
    assert frame["reason"].str.contains("Expected more than 1 value per channel").all()
