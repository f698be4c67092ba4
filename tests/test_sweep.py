"""The sweep runner: grid expansion, cache keys and reruns, parallel/Dask equality, failure reports."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlcluster.experiments.sweep import (SweepError, cell_key, code_version, describe_cells, expand_grid, run_sweep,
                                         run_sweeps)
from dlcluster.paths import CACHE_DIR_ENV, cache_dir, repo_root

CALLS: list[dict] = []


def noisy_cell(params: dict) -> pd.DataFrame:
    """Two rows per cell from a seeded generator; records each call (in this process)."""
    CALLS.append(params)
    rng = np.random.default_rng([params["seed"], params["a"]])
    return pd.DataFrame({"row": [0, 1], "value": rng.normal(size=2), "a_squared": params["a"] ** 2})


def slow_first_cell(params: dict) -> dict:
    """Earlier cells sleep longer, so cells finish in reverse order."""
    time.sleep(0.3 * (3 - params["a"]))
    return {"a_squared": params["a"] ** 2}


def failing_cell(params: dict) -> dict:
    CALLS.append(params)
    if params["a"] == 2:
        raise ValueError("a == 2 is not allowed")
    return {"a_squared": params["a"] ** 2}


def fixed_cell(params: dict) -> dict:
    CALLS.append(params)
    return {"a_squared": params["a"] ** 2}


def clashing_cell(params: dict) -> dict:
    return {"a": 0}


THIS = [__name__]


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.clear()


def test_expand_grid_known_answer():
    cells = expand_grid({"a": [1, 2], "b": ["x", "y", "z"]}, {"c": None})
    assert len(cells) == 6
    assert cells[:4] == [{"c": None, "a": 1, "b": "x"}, {"c": None, "a": 1, "b": "y"},
                         {"c": None, "a": 1, "b": "z"}, {"c": None, "a": 2, "b": "x"}]
    assert cells[-1] == {"c": None, "a": 2, "b": "z"}


@pytest.mark.parametrize("axes, fixed, message", [
    ({"a": [1]}, {"a": 2}, "both as an axis and as a fixed"),
    ({"a": []}, None, "has no values"),
    ({"a": "abc"}, None, "must be a list"),
    ({"a": [object()]}, None, "JSON-serialisable"),
    ({"a": [float("nan")]}, None, "JSON-serialisable"),
])
def test_expand_grid_rejects_bad_axes(axes, fixed, message):
    with pytest.raises(ValueError, match=message):
        expand_grid(axes, fixed)


def test_cell_key_depends_on_values_and_version_not_order():
    assert cell_key({"a": 1, "b": 2}, "v1") == cell_key({"b": 2, "a": 1}, "v1")
    assert cell_key({"a": 1, "b": 2}, "v1") != cell_key({"a": 1, "b": 3}, "v1")
    assert cell_key({"a": 1, "b": 2}, "v1") != cell_key({"a": 1, "b": 2}, "v2")
    assert cell_key({"a": 1}, "v1") != cell_key({"a": 1.5}, "v1")


def test_code_version_follows_the_source(tmp_path, monkeypatch):
    module = tmp_path / "sweep_probe_module.py"
    module.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = code_version(["sweep_probe_module"])
    assert before == code_version(["sweep_probe_module"])
    module.write_text("X = 2\n")
    assert code_version(["sweep_probe_module"]) != before


def test_code_version_of_a_package_covers_every_file_but_bytecode(tmp_path, monkeypatch):
    package = tmp_path / "sweep_probe_package"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("X = 1\n")
    rules = package / "data" / "rules.yaml"
    rules.write_text("- a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = code_version(["sweep_probe_package"])
    rules.write_text("- b\n")  # a data file the package reads is its code too
    edited = code_version(["sweep_probe_package"])
    assert edited != before
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0bytecode")
    (package / "data" / "stray.pyc").write_bytes(b"\0bytecode")
    assert code_version(["sweep_probe_package"]) == edited  # Python rewrites bytecode on its own
    (package / "README.md").write_text("notes\n")
    assert code_version(["sweep_probe_package"]) != edited


def test_table_has_params_then_rows_in_cell_order(tmp_path):
    cells = expand_grid({"a": [3, 1, 2]}, {"seed": 7, "tags": ["x", "y"]})
    table = run_sweep(cells, noisy_cell, tmp_path, code_modules=THIS, n_jobs=1, progress=False)
    assert list(table.columns[:5]) == ["cell", "cell_key", "seed", "tags", "a"]
    assert table["a"].tolist() == [3, 3, 1, 1, 2, 2]
    assert table["cell"].tolist() == [0, 0, 1, 1, 2, 2]
    assert table["a_squared"].tolist() == [9, 9, 1, 1, 4, 4]
    assert table["row"].tolist() == [0, 1] * 3
    assert table["tags"].iloc[0] == json.dumps(["x", "y"])


def test_rerun_skips_cached_cells(tmp_path):
    cells = expand_grid({"a": [1, 2, 3, 4]}, {"seed": 0})
    first = run_sweep(cells, noisy_cell, tmp_path, code_modules=THIS, n_jobs=1, progress=False)
    assert len(CALLS) == 4
    again = run_sweep(cells, noisy_cell, tmp_path, code_modules=THIS, n_jobs=1, progress=False)
    assert len(CALLS) == 4  # nothing recomputed
    pd.testing.assert_frame_equal(first, again)
    more = run_sweep(cells + [{"seed": 0, "a": 5}], noisy_cell, tmp_path, code_modules=THIS, n_jobs=1,
                     progress=False)
    assert len(CALLS) == 5 and CALLS[-1] == {"seed": 0, "a": 5}
    pd.testing.assert_frame_equal(more.iloc[:8], first)


def label_free(params: dict) -> dict:
    """``a``'s label does not enter ``fixed_cell``'s result: every label runs as the unlabelled cell."""
    return {k: v for k, v in params.items() if k != "label"}


def test_cells_with_the_same_simulation_run_once_and_keep_their_own_parameters(tmp_path):
    cells = expand_grid({"a": [1, 2], "label": ["x", "y", "z"]}, {})
    table = run_sweep(cells, fixed_cell, tmp_path, code_modules=THIS, n_jobs=1, progress=False, same_as=label_free)
    assert CALLS == [{"a": 1}, {"a": 2}]                 # one call per simulation, given the simulated cell
    assert table["label"].tolist() == ["x", "y", "z"] * 2 and table["a"].tolist() == [1, 1, 1, 2, 2, 2]
    assert table["a_squared"].tolist() == [1, 1, 1, 4, 4, 4]
    assert table["cell"].tolist() == list(range(6)) and table["cell_key"].nunique() == 2
    again = run_sweep(cells[:3] + [{"a": 3, "label": "x"}], fixed_cell, tmp_path, code_modules=THIS, n_jobs=1,
                      progress=False, same_as=label_free)
    assert CALLS[2:] == [{"a": 3}]                       # a = 1 was cached under its simulation
    assert again["a_squared"].tolist() == [1, 1, 1, 9]


def test_two_grids_as_one_sweep_run_in_one_pool_and_keep_their_own_tables(tmp_path):
    first = expand_grid({"a": [1, 2], "label": ["x", "y"]}, {})
    second = [{"a": 2, "label": "z"}, {"a": 3, "label": "x"}]
    main, other = run_sweeps([(first, label_free, tmp_path / "first.parquet"), (second, label_free, None)],
                             fixed_cell, tmp_path / "cache", code_modules=THIS, n_jobs=1, progress=False)
    assert CALLS == [{"a": 1}, {"a": 2}, {"a": 3}]     # a = 2, named by both grids, ran once
    assert main["a_squared"].tolist() == [1, 1, 4, 4] and main["cell"].tolist() == [0, 1, 2, 3]
    assert other["a_squared"].tolist() == [4, 9] and other["cell"].tolist() == [0, 1]
    assert other["label"].tolist() == ["z", "x"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "first.parquet"), main)
    # each table is the one run_sweep gives its grid alone (from the cache now)
    pd.testing.assert_frame_equal(run_sweep(second, fixed_cell, tmp_path / "cache", code_modules=THIS, n_jobs=1,
                                            progress=False, same_as=label_free), other)
    assert len(CALLS) == 3


def test_a_failed_cell_of_the_second_grid_is_named_with_its_own_parameters(tmp_path):
    with pytest.raises(SweepError) as caught:
        run_sweeps([(expand_grid({"a": [1]}), None, None), (expand_grid({"a": [2, 3]}), None, None)], failing_cell,
                   tmp_path, code_modules=THIS, n_jobs=1, progress=False)
    assert [params for params, _ in caught.value.failures] == [{"a": 2}]
    assert "1 of 3 sweep cells failed" in str(caught.value)


def test_changed_code_recomputes(tmp_path, monkeypatch):
    module = tmp_path / "sweep_probe_code.py"
    module.write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cells = expand_grid({"a": [1, 2]}, {"seed": 0})
    run_sweep(cells, noisy_cell, tmp_path / "cache", code_modules=THIS + ["sweep_probe_code"], n_jobs=1,
              progress=False)
    module.write_text("VERSION = 2\n")
    run_sweep(cells, noisy_cell, tmp_path / "cache", code_modules=THIS + ["sweep_probe_code"], n_jobs=1,
              progress=False)
    assert len(CALLS) == 4


def test_same_seed_same_results_across_caches(tmp_path):
    cells = expand_grid({"a": [1, 2]}, {"seed": 11})
    one = run_sweep(cells, noisy_cell, tmp_path / "one", code_modules=THIS, n_jobs=1, progress=False)
    two = run_sweep(cells, noisy_cell, tmp_path / "two", code_modules=THIS, n_jobs=1, progress=False)
    pd.testing.assert_frame_equal(one, two)
    other_seed = run_sweep(expand_grid({"a": [1, 2]}, {"seed": 12}), noisy_cell, tmp_path / "three",
                           code_modules=THIS, n_jobs=1, progress=False)
    assert not np.allclose(one["value"], other_seed["value"])


def test_parallel_equals_serial_whatever_the_finishing_order(tmp_path):
    cells = expand_grid({"a": [0, 1, 2]})
    parallel = run_sweep(cells, slow_first_cell, tmp_path / "p", code_modules=THIS, n_jobs=3, progress=False)
    serial = run_sweep(cells, slow_first_cell, tmp_path / "s", code_modules=THIS, n_jobs=1, progress=False)
    pd.testing.assert_frame_equal(parallel, serial)
    assert parallel["a_squared"].tolist() == [0, 1, 4]


def test_parallel_noisy_cells_equal_serial(tmp_path):
    cells = expand_grid({"a": [1, 2, 3]}, {"seed": 5})
    parallel = run_sweep(cells, noisy_cell, tmp_path / "p", code_modules=THIS, n_jobs=2, progress=False)
    serial = run_sweep(cells, noisy_cell, tmp_path / "s", code_modules=THIS, n_jobs=1, progress=False)
    pd.testing.assert_frame_equal(parallel, serial)


def test_failed_cell_is_named_and_others_are_kept(tmp_path):
    cells = expand_grid({"a": [1, 2, 3]})
    with pytest.raises(SweepError) as caught:
        run_sweep(cells, failing_cell, tmp_path, code_modules=THIS, n_jobs=1, progress=False)
    error = caught.value
    assert [params for params, _ in error.failures] == [{"a": 2}]
    assert '1 of 3 sweep cells failed' in str(error)
    assert 'cell {"a": 2}: ValueError: a == 2 is not allowed' in str(error)
    assert "Traceback" in error.failures[0][1]
    CALLS.clear()
    table = run_sweep(cells, fixed_cell, tmp_path, code_modules=THIS, n_jobs=1, progress=False)
    assert CALLS == [{"a": 2}]  # the two good cells came from the cache
    assert table["a_squared"].tolist() == [1, 4, 9]


def test_out_parquet_and_clashing_columns(tmp_path):
    cells = expand_grid({"a": [1, 2]}, {"seed": 0})
    table = run_sweep(cells, noisy_cell, tmp_path / "c", code_modules=THIS, n_jobs=1, progress=False,
                      out=tmp_path / "table.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "table.parquet"), table)
    with pytest.raises(ValueError, match=r"clash with its parameters"):
        run_sweep(expand_grid({"a": [1]}), clashing_cell, tmp_path / "d", code_modules=THIS, n_jobs=1,
                  progress=False)


def test_rejects_duplicate_cells_and_bad_n_jobs(tmp_path):
    with pytest.raises(ValueError, match="more than once"):
        run_sweep([{"a": 1}, {"a": 1}], fixed_cell, tmp_path, code_modules=THIS, progress=False)
    with pytest.raises(ValueError, match="n_jobs"):
        run_sweep([{"a": 1}], fixed_cell, tmp_path, code_modules=THIS, n_jobs=0, progress=False)
    with pytest.raises(ValueError, match="no cells"):
        run_sweep([], fixed_cell, tmp_path, progress=False)


def test_dask_distributed_equals_serial(tmp_path):
    import distributed  # the [sweep] dependency: dask[distributed]
    cells = expand_grid({"a": [1, 2, 3]}, {"seed": 3})
    serial = run_sweep(cells, noisy_cell, tmp_path / "s", code_modules=THIS, n_jobs=1, progress=False)
    CALLS.clear()
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as cluster:
        on_dask = run_sweep(cells, noisy_cell, tmp_path / "d", code_modules=THIS,
                            scheduler_address=cluster.scheduler_address, progress=False)
        assert len(CALLS) == 3
        again = run_sweep(cells, noisy_cell, tmp_path / "d", code_modules=THIS,
                          scheduler_address=cluster.scheduler_address, progress=False)
    assert len(CALLS) == 3  # the rerun came from the cache
    pd.testing.assert_frame_equal(on_dask, serial)
    pd.testing.assert_frame_equal(again, serial)


def test_describe_cells():
    cells = expand_grid({"policy": ["fifo", "srtf"], "seed": [0, 1, 2]}, {"load": 1.0})
    assert describe_cells(cells) == "6 cells over policy (2), seed (3)"


def test_progress_bar_counts_cached_cells(tmp_path, capsys):
    cells = expand_grid({"a": [1, 2]}, {"seed": 0})
    run_sweep(cells[:1], noisy_cell, tmp_path, code_modules=THIS, n_jobs=1, progress=False)
    run_sweep(cells, noisy_cell, tmp_path, code_modules=THIS, n_jobs=1, progress=True)
    err = capsys.readouterr().err
    assert "sweep" in err and "2/2" in err


def test_default_cache_folder_is_reports_sweep_cache_unless_the_environment_names_one(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_DIR_ENV)
    assert cache_dir() == repo_root() / "reports" / ".sweep-cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache"
    cells = expand_grid({"a": [1, 2]}, {"seed": 7})
    run_sweep(cells, noisy_cell, code_modules=THIS, n_jobs=1, progress=False)  # no cache_dir: the default
    assert len(list((tmp_path / "cache").glob("*.parquet"))) == 2


def test_the_tests_cache_their_results_apart_from_make_reports(own_cache_dir):
    """conftest gives the session its own cache folder, in the environment that notebook kernels inherit."""
    assert Path(os.environ[CACHE_DIR_ENV]) == own_cache_dir and own_cache_dir.is_dir()
    assert not own_cache_dir.resolve().is_relative_to(repo_root())
    child = subprocess.run([sys.executable, "-c", "from dlcluster.paths import cache_dir; print(cache_dir())"],
                           capture_output=True, text=True, check=True)
    assert Path(child.stdout.strip()) == own_cache_dir.resolve()
