"""Published numbers enter only with provenance, and are rendered beside ours."""

import pytest

from dlcluster.report.reference import NOT_PUBLISHED, load_reference, published, published_vs_ours


def test_every_entry_has_provenance():
    ref = load_reference()
    assert set(ref["provenance"]) <= {"quoted", "summary", "trace"}
    assert published("util.table3.all")["value"] == 52.32
    assert published("failures.unsuccessful_jobs_pct")["provenance"] == "summary"


def test_table_marks_missing_values_and_keeps_ours():
    t = published_vs_ours([
        {"what": "mean GPU util", "ours": 47.123456, "key": "util.table3.all", "data": "real"},
        {"what": "something new", "ours": 3, "key": None, "data": "real"},
    ])
    assert t.loc[0, "this reproduction"] == "47.12" and t.loc[0, "published"] == "52.32 %"
    assert t.loc[0, "provenance"] == "summary"
    assert t.loc[1, "published"] == NOT_PUBLISHED


def test_bad_provenance_is_rejected(tmp_path):
    bad = tmp_path / "ref.yaml"
    bad.write_text("x: {item: a, value: 1, provenance: guessed}\n")
    with pytest.raises(ValueError, match="provenance 'guessed'"):
        load_reference(bad)


def test_compare_rejects_a_key_missing_from_the_reference_file(tmp_path):
    from dlcluster.report import Report
    from dlcluster.report.reference import UnknownReferenceKey, reference_path

    rep = Report(tmp_path, "09-x")
    rows = [{"what": "Table 3 mean GPU utilization, 8 GPU jobs", "ours": 44.0, "key": "util.table3.8gpu",
             "data": "real"}]
    with pytest.raises(UnknownReferenceKey, match=r"'Table 3 mean GPU utilization, 8 GPU jobs' names key "
                                                  r"'util.table3.8gpu', which is not in .*atc19.yaml") as caught:
        rep.compare(rows)
    assert str(reference_path()) in str(caught.value) and "util.table3.1gpu" in str(caught.value)  # a close key
    assert rep.comparisons == []  # nothing of the bad table is kept for results.json
    rep.compare([{**rows[0], "key": None}, {"what": "all jobs", "ours": 50.0, "key": "util.table3.all"}])
    assert [c["key"] for c in rep.comparisons] == [None, "util.table3.all"]


def test_every_key_the_notebooks_name_is_in_the_reference_file():
    """Literal keys are checked here; computed ones (f-strings) by Report.compare when the notebook runs."""
    import json
    import re
    from pathlib import Path

    listed = set(load_reference()["key"])
    named = {}
    for nb in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] == "code":
                for key in re.findall(r'"key":\s*"([^"{}]+)"', "".join(cell["source"])):
                    named.setdefault(key, nb.stem)
    assert len(named) > 20  # the pattern finds the notebooks' keys
    assert {k: nb for k, nb in named.items() if k not in listed} == {}


def test_no_published_value_is_an_input_of_the_library():
    """No constant in lib/ (Python or YAML) is a published number of the paper, nor a ratio of Table 4's.

    Published values are shown beside our results, never used to make them. Checked: every published number that
    is not a round count (a whole number like 80 or 14 also occurs for other reasons), and the ratios of Table 4's
    images/s that a slowdown model would take (the slower over the faster). Values about the released trace
    (provenance "trace") are facts the loaders need, not the paper's results.
    """
    import ast
    import itertools

    import yaml

    from dlcluster.paths import repo_root
    from dlcluster.report.reference import load_reference

    ref = load_reference()
    numbers = ref[(ref["provenance"] != "trace") & ref["value"].map(lambda v: isinstance(v, (int, float)))]
    published = {row.key: float(row.value) for row in numbers.itertuples()
                 if float(row.value) != int(row.value) or float(row.value) > 1000}
    ips = {k.rsplit(".", 1)[1]: float(v) for k, v in zip(numbers["key"], numbers["value"], strict=True)
           if k.startswith("util.table4.ips.")}
    assert len(ips) == 4 and len(published) >= 12
    for (a, x), (b, y) in itertools.permutations(ips.items(), 2):
        if x < y:   # a speed factor: the slower placement over the faster one
            published[f"Table 4 {a}/{b}"] = x / y
    constants = []
    lib = repo_root() / "lib" / "dlcluster"
    for path in lib.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
                    and not isinstance(node.value, bool)):
                constants.append((path.relative_to(lib), float(node.value)))

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                yield from walk(v)
        elif isinstance(value, list):
            for v in value:
                yield from walk(v)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield float(value)

    for path in lib.rglob("*.yaml"):
        constants += [(path.relative_to(lib), v) for v in walk(yaml.safe_load(path.read_text()))]
    hits = [(str(where), value, key) for where, value in constants for key, target in published.items()
            if value != 0 and abs(value - target) <= 1e-3 * abs(target)]
    assert not hits, f"published values used as constants in lib/: {hits}"
