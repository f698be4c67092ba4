"""The report runner: parameter selection, atomic outputs, and failures that name notebook and cell."""

import json

import nbformat
import pytest

from dlcluster.report.runner import NotebookFailed, execute_notebook, notebook_params, read_params


def _notebook(path, cells):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('output_dir = "x"\nvalue = 1')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params] + [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_notebook_params_merge_and_filter(tmp_path):
    params = {"trace": "public", "seed": 3, "notebooks": {"01-x": {"seed": 5, "grid": "small"}}}
    got = notebook_params(params, "01-x", {"trace", "seed", "output_dir"}, tmp_path / "01-x")
    assert got == {"trace": "public", "seed": 5, "output_dir": str(tmp_path / "01-x")}
    assert notebook_params(params, "02-y", {"seed"}, tmp_path) == {"seed": 3}


def test_read_params_rejects_non_mapping(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="p.yaml: expected a mapping"):
        read_params(bad)


@pytest.mark.notebook
def test_success_writes_notebook_html_and_results(tmp_path):
    nb = _notebook(tmp_path / "07-ok.ipynb", [
        "import json, pathlib\np = pathlib.Path(output_dir); p.mkdir(parents=True, exist_ok=True)\n"
        "(p / 'results.json').write_text(json.dumps({'results': {'v': value}}))"])
    out = tmp_path / "out"
    execute_notebook(nb, out, {"value": 42}, progress=False)
    assert (out / "07-ok.ipynb").exists() and (out / "07-ok.html").exists()
    assert json.loads((out / "07-ok" / "results.json").read_text())["results"] == {"v": 42}


@pytest.mark.notebook
def test_failure_names_notebook_and_cell_and_leaves_no_complete_copy(tmp_path):
    nb = _notebook(tmp_path / "08-bad.ipynb", ["a = 1", "raise ValueError('broken input')"])
    out = tmp_path / "out"
    with pytest.raises(NotebookFailed, match=r"08-bad.ipynb failed in cell 3 \(.raise ValueError\(.broken input.\).\): ValueError: broken input"):
        execute_notebook(nb, out, {}, progress=False)
    assert not (out / "08-bad.ipynb").exists() and not (out / "08-bad.html").exists()
    assert (out / "08-bad.FAILED.ipynb").exists()
