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
