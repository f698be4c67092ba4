"""The replay is called what it is: "validated" only when every held-out target is met, the count read from the
results, never typed (dlcluster.experiments.naming)."""

import json
import re
from pathlib import Path

import pytest

from dlcluster.experiments.naming import replay_data_label, replay_name, targets_met
from dlcluster.validation.scorecard import TARGETS

REPO = Path(__file__).resolve().parents[1]
#: every figure at its target ("at most") or just above it ("more than"): met
ALL_MET = {key: target + 0.01 if at_least else target for key, (_, target, at_least) in TARGETS.items()}
#: Words that call the replay validated (case-insensitive). "how far the replay is validated" introduces the
#: scorecard of its targets and claims nothing.
CALLED_VALIDATED = re.compile(r"\bvalidated\s+(calibrated\s+)?(rfold\s+)?(replay|workload)\b"
                              r"|\breplay\b[^.\n]{0,40}?\b(is|was|as)\s+validated\b"
                              r"|\b(calibrated|fitted)\b[^.\n]{0,60}?\bvalidated on\b", re.IGNORECASE)
NOT_A_CLAIM = ("how far the replay is validated",)


def called_validated(text: str) -> list[str]:
    found = []
    for match in CALLED_VALIDATED.finditer(text):
        start = max(0, match.start() - 20)
        if not any(phrase in text[start:match.end()].lower() for phrase in NOT_A_CLAIM):
            found.append(text[max(0, match.start() - 40):match.end() + 10])
    return found


def test_validated_only_when_every_target_is_met():
    assert replay_name(ALL_MET) == "validated replay"
    one_missed = {**ALL_MET, "max_p90_ratio": 2 * TARGETS["max_p90_ratio"][1]}
    assert replay_name(one_missed) == f"calibrated replay ({len(TARGETS) - 1} of {len(TARGETS)} held-out targets met)"
    # a replay that meets only the latency target: 1 of 9
    today = {"busy_servers_mae_pp_complete": 12.0, "gpu_allocation_shortfall_pp": 5.0, "max_median_ratio": 4.8,
             "max_p90_ratio": 172.0, "fig3_median_ks": 0.4, "fig3_max_ks": 0.6, "fig3_share_3min_within": 0.2,
             "servers_spanned_max_ks": 0.3, "latency_only_wait_share": 0.001}
    assert targets_met(today) == (1, len(TARGETS))
    assert replay_name(today) == f"calibrated replay (1 of {len(TARGETS)} held-out targets met)"
    assert replay_data_label(today, 111549).startswith(
        f"SIMULATED calibrated replay (1 of {len(TARGETS)} held-out targets met) of 111,549 real Philly jobs")


def test_the_name_reads_notebook_05s_results_json_keys():
    results = {f"validation.heldout.{key}": value for key, value in ALL_MET.items()}
    results["validation.heldout.verdict"] = "any text"
    results["validation.other"] = 1.0
    assert replay_name(results) == "validated replay"
    results["validation.heldout.fig3_max_ks"] = 0.5   # a missed target, and a missing one
    del results["validation.heldout.max_p90_ratio"]
    assert replay_name(results) == f"calibrated replay ({len(TARGETS) - 2} of {len(TARGETS)} held-out targets met)"


def _texts():
    """Every text a reader sees that is written by hand: notebook cells (markdown, and code whose strings become
    sentences), the README, ARCHITECTURE and docs, and the experiments' and reports' code."""
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        for k, cell in enumerate(json.loads(nb.read_text())["cells"]):
            yield f"{nb.name} cell {k}", "".join(cell["source"])
    for path in [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("**/*.md"))]:
        yield path.name, path.read_text()
    for folder in ("experiments", "report"):
        for path in sorted((REPO / "lib" / "dlcluster" / folder).rglob("*.py")):
            if path.name != "naming.py":
                yield str(path.relative_to(REPO)), path.read_text()


def test_no_hand_written_text_calls_the_replay_validated():
    offenders = {where: found for where, text in _texts() if (found := called_validated(text))}
    assert not offenders, ("'validated' for the replay comes only from dlcluster.experiments.naming.replay_name "
                           f"(every held-out target met); written by hand here: {offenders}")


@pytest.mark.parametrize("text, claims", [
    ("a simulated replay of the validated RFold workload", True), ("On the Validated replay at", True),
    ("others replay the durations as validated", True), ("How far the replay is validated", False),
    ("the overhead calibrated on the fit span, validated on the rest", True),
    ("validated rules and reasons", False), ("the calibrated replay (1 of 6 held-out targets met)", False)])
def test_the_check_finds_the_words(text, claims):
    assert bool(called_validated(text)) == claims


@pytest.mark.notebook
@pytest.mark.parametrize("stem", ["01-locality-queueing", "06-design-implications"])
def test_executed_notebooks_name_the_replay_by_notebook_05s_count(stem, ci_notebook):
    """At CI parameters, every count of held-out targets a notebook prints is notebook 05's, and 'validated'
    appears for the replay only when notebook 05 met every target."""
    met = ci_notebook("05-simulator-validation")["results"]["validation.heldout.targets_met"]
    ci_notebook(stem)
    executed = json.loads((ci_notebook.out_dir / f"{stem}.ipynb").read_text())
    shown = "\n".join(str(value) for cell in executed["cells"] for out in cell.get("outputs", [])
                      for value in [*out.get("data", {}).values(), out.get("text", "")])
    counts = {(int(k), int(n)) for k, n in re.findall(r"(\d+) of (\d+) held-out targets met", shown)}
    assert counts == {(met, len(TARGETS))}, f"{stem} prints target counts {counts}, notebook 05 met {met}"
    if met < len(TARGETS):
        assert not called_validated(shown), f"{stem} calls the replay validated: {called_validated(shown)[:3]}"
