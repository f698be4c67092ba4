from dlcluster.trace import QualityReport


def test_accounting_and_roundtrip():
    q = QualityReport()
    q.read("f", 5)
    q.loaded("f", 3)
    q.quarantine("f", "bad time", where="line 4")
    q.quarantine("f", "bad value", where="line 6")
    q.flag("f", "ambiguous", 2)
    q.check()
    again = QualityReport.from_tables(*q.to_tables())
    assert again.counts("f") == q.counts("f") == {"read": 5, "loaded": 3,
                                                  "quarantined": {"bad time": 1, "bad value": 1},
                                                  "flags": {"ambiguous": 2}}
    assert "line 4" in q.to_frame().set_index("reason").loc["bad time", "examples"]


def test_check_catches_lost_rows():
    q = QualityReport()
    q.read("f", 2)
    q.loaded("f", 1)
    import pytest
    with pytest.raises(AssertionError, match="read 2 != loaded 1"):
        q.check()
