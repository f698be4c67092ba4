"""The real user-posted failure messages (data/failure_messages/) and the classifier's accuracy on them.

Unlike the project's own corpus, these texts were written by others. Rounds 1 and 2 tuned the rules on the
tuning half only and measured the held-out sets once each (heldout: 82.0%, then 86.9%; heldout2: 67.4%);
round 3 tuned on the first three splits and heldout3 measured it once (79.4%); round 4 tuned on all four splits,
so every rules-only count below is in-sample: a regression count, no estimate of accuracy on unseen messages (see
data/failure_messages/README.md, "Round 4"). Round 5 added a learned fallback where no rule fires; round 6 made it
a regression, trained on every labelled message: the default classifier's counts are in-sample too; round 7 let it
refine generic rules and added two rule families, looking at all 700 messages, round 8 added three more, looking
at all 780, and round 9 wrote the labelling guide (data/failure_messages/LABELLING.md) and the rules that follow it,
looking at all 945; its out-of-fold figures are the leave-one-split-out counts, asserted at the end (README, "Round 7",
"Round 8", "Round 9").
"""

import hashlib
import math
import json
import re
import textwrap

import pandas as pd
import pytest

from dlcluster.analysis.classify import (LAST_BLIND_SETTINGS, LAST_BLIND_SPLIT, MESSAGE_FIELDS, NO_SIGNATURE, SPLITS,
                                         annotator_agreement,
                                         choose_fallback_settings,
                                         evaluate_classifier, fallback_keeps_corpus, load_messages, load_rules,
                                         load_second_labels, measured_messages, train_fallback)
from dlcluster.analysis.fallback import FALLBACK_RULE_ID, FallbackSettings

# Messages classified right by the round-9 rules alone, and by the default classifier (the round-9 rules + the
# regression fallback refining generic rules, trained on every labelled message and the corpus logs). The rules were
# written looking at every split but heldout9, and the fallback learns from every split: in-sample regression counts,
# no estimate (README, "Round 9"); heldout9's blind measurement is asserted at the end. The misses of the rules are
# mostly wordings no rule knows, which the fallback guesses, and the labels the labelling guide would give otherwise
# (LABELLING.md, "The disputes this guide settles").
# History, the rules' blind figures before they were tuned on: heldout 50 then 53 of 61, heldout2 64 of 95, heldout3
# 81 of 102, heldout4 78 of 97, heldout5 80 of 100, heldout6 79 of 100, heldout7 66 of 80, heldout8 121 of 165 (README).
RULES_CORRECT = {"tuning": 145, "heldout": 61, "heldout2": 93, "heldout3": 102, "heldout4": 81, "heldout5": 84,
                 "heldout6": 83, "heldout7": 72, "heldout8": 136, "heldout9": 134}
CORRECT_WITH_FALLBACK = {"tuning": 145, "heldout": 61, "heldout2": 94, "heldout3": 102, "heldout4": 95,
                         "heldout5": 97, "heldout6": 98, "heldout7": 79, "heldout8": 161, "heldout9": 159}

# Leave-one-split-out cross-validation of the fallback over the ten splits, after heldout9's measurement: for each
# split, the fallback trained on the other nine (and the corpus), the round-9 rules + fallback with the chosen
# settings classify it. Exact counts (rules alone, hybrid). Earlier rounds chose their settings the same way over the
# splits of their time: C 100, with the corpus, threshold 0.5 and no refining (round 6); C 100, threshold 0.4, refine
# 0.9 (round 7); C 30, threshold 0.3, refine 0.5 (round 8, by one message; kept by round 9 over nine splits, since
# no setting beat them by INCUMBENT_MARGIN messages: 920 vs 918 of 945). Trained on all 1,110, round 8's settings
# guess a reason for the corpus's unattributable silent-exit log, so they are no longer allowed and the best allowed
# setting is chosen (README, "Round 9").
CV_CORRECT = {"tuning": (145, 145), "heldout": (61, 61), "heldout2": (93, 94), "heldout3": (102, 102),
              "heldout4": (81, 91), "heldout5": (84, 93), "heldout6": (83, 94), "heldout7": (72, 77),
              "heldout8": (136, 160), "heldout9": (134, 148)}
CHOSEN_FALLBACK = FallbackSettings(C=100.0, threshold=0.5, with_corpus=True, refine=0.7)


# The held-out half is frozen: sha256 of its 61 entries (all fields, file order) as split in round 1
# (branch failwild). Round 2 added messages to the tuning half only; this digest proves it left these alone.
HELDOUT_SIZE = 61
HELDOUT_SHA256 = "65acecea61970b1a0ba6beb1601eca63bd166788d013da4f5282812b384b6cda"

# The second held-out set (issue 12, branch heldout2): 95 messages from 95 threads none of the other splits used,
# hand-labelled and committed before the classifier first saw them. sha256 of its entries as committed then.
HELDOUT2_SIZE = 95
HELDOUT2_SHA256 = "bad7c2fd4f2e1e8d0bf5501d05a101dbb76dabcb2b25f038b711ebcdfae5f934"

# The third held-out set (branch heldout3): messages from threads none of the other splits used, collected and
# hand-labelled blind while tuning round 3 used all earlier splits; committed before the classifier first sees it.
HELDOUT3_SIZE = 102
HELDOUT3_SHA256 = "9dd00b6a6380d7db0e2835963e34c506805b324feac5b9d67a64fe7131f3455a"
# History: heldout3 measured once, blind (merge commit b7513a8: the set committed, the round-3 rules of 1b5d757
# untouched), 81 of 102 (79.4%), below the 0.90 target (README, "heldout3"). Round 4 has since tuned on it, so its
# count is asserted in-sample above; the blind figure of the round-4 rules is the next held-out set's.
HELDOUT3_CORRECT_MEASURED_AFTER_ROUND3 = 81

# The fourth held-out set (branch heldout4): messages from threads none of the other splits used, collected and
# hand-labelled blind while tuning round 4 used all earlier splits; committed before the classifier first sees it.
HELDOUT4_SIZE = 97
HELDOUT4_SHA256 = "cf43dba04d5f867ce4aa5faade78f9d6d34e1fbc9122174ccab312dd4a5d3ab1"
# History: heldout4 measured the round-4 rules once (merge commit 590ae53), 78 of 97; round 9's rules were written
# looking at it (README, "heldout4").

# The fifth held-out set (branch heldout5): messages from threads none of the other splits used, collected and
# hand-labelled blind; committed before the classifier first sees it (README, "heldout5").
HELDOUT5_SIZE = 100
HELDOUT5_SHA256 = "b03f34799b33b7b3f1771465425b0f4bf9f50a233ee697c7be399808f7303a44"
# heldout5 measured once (merge commit 0704dce: the set committed, the rules and the fallback of the fallback branch
# untouched): the rules alone 80 of 100, the classifier as shipped
# then (rules + the round-5 nearest-neighbour fallback) 83 of 100. Round 6 replaced that fallback while looking at
# heldout5's results, so heldout5 no longer measures the fallback blind: its hybrid count (87, the regression trained
# without heldout5) is the cross-validation row below, not an estimate.
# Round 7's rules, written looking at all 700 messages, got 82 (m513 exit code 137, m560 a glog FATAL line).

# The sixth held-out set (branch heldout6): messages from threads none of the other splits used, collected and
# hand-labelled blind while the classifier (rules + learned fallback) was improved on the first 600 messages;
# committed before the classifier first sees it, to be measured once after the model is final (README, "heldout6").
HELDOUT6_SIZE = 100
HELDOUT6_SHA256 = "d80bb68edb2f820fa1403f4d793df5365e3a41a8eb2dc2a1f094073a4a9e0f7b"
# heldout6 measured once (after commit 425b6ae fixed the round-6 model, merge commit 09f5ce3 brought the set): the
# rules alone 79 of 100; the classifier as shipped (rules + the regression fallback with the chosen settings, trained
# on the 600 earlier messages and the corpus, as it was before heldout6 existed) 89 of 100; the fallback decided 11,
# 10 right (history: round 7 then changed the rules and the settings looking at all 700 messages, heldout6's
# misses among them). The round-7 rules get 81 (m649 exit code 137, m693 a TensorFlow FATAL line), and the
# round-7 classifier with a fallback that never saw heldout6 got 94.
HELDOUT_TARGET = 0.90

# The seventh held-out set (branch heldout7): messages from threads none of the other splits used, collected and
# hand-labelled blind while the classifier was improved on the first 700 messages; committed before the classifier
# first sees it, and left out of the default fallback's training and of every evaluation (NOT_YET_MEASURED) until
# its one measurement (README, "heldout7").
HELDOUT7_SIZE = 80
HELDOUT7_SHA256 = "461c2bd7d9616ecd52c8d6b408629cb475f885cad146b5ac97001f638e73abce"
# heldout7 measured once (after commit 98b2778 fixed the round-7 rules, model and settings, merge commit fb89c25
# brought the set): the rules alone 66 of 80; the classifier as shipped (rules + the fallback with the chosen
# settings, trained on the 700 earlier messages and the corpus) 71 of 80 (88.75%); the fallback guessed 10, 5 right,
# and refined no generic rule (history: round 8 then added rules and re-chose the settings looking at all 780; the
# round-8 rules got 69: m750, m753, m755; the round-8 classifier with a fallback that never saw heldout7 got 75).

# The eighth held-out set: 165 messages from threads none of the other splits used, collected and hand-labelled blind
# in two halves by reason (m781-m861, m901-m984) while round 8 was built on the first 780 (README, "heldout8").
HELDOUT8_SIZE = 165
HELDOUT8_SHA256 = "76a99ea1e6512207b8ab2429edea60de16d8a14e10196a712b462a96ef95034c"
# heldout8 measured once (after commit ecfb240 fixed the round-8 rules, model and settings, commit 77d067c brought the
# set with heldout8 in NOT_YET_MEASURED): the rules alone 121 of 165; the classifier as shipped (rules + the fallback
# trained on the 780 earlier messages and the corpus) 146 of 165 (88.5%); the fallback guessed 34, 27 right, and
# refined 2 generic-rule answers, both wrongly. Round 9 then wrote the labelling guide and its rules looking at all
# 945 messages, heldout8's misses among them (README, "Round 9"), so heldout8 is seen now.

# The ninth held-out set: 165 messages from threads none of the other splits used, collected and hand-labelled blind
# with the labelling guide (LABELLING.md), in two halves by reason (m1001-m1080, m1101-m1185), while round 9 was
# built on the first 945; committed after the round-9 model (commit a2ad0dc), held out of every model and evaluation
# by NOT_YET_MEASURED until its one measurement (README, "heldout9").
HELDOUT9_SIZE = 165
HELDOUT9_SHA256 = "9d68a1d43888a5716b0b8618cc75d4cfe16116be351400db1db3a40eb61ac77d"
# heldout9 measured once (after commit a2ad0dc fixed the round-9 rules, model and settings, commit a32bc7a brought the
# set): the rules alone 134 of 165; the classifier as shipped (rules + the fallback trained on the 945 earlier
# messages and the corpus) 150 of 165 (90.9%); the fallback guessed 19, 15 right, and refined 1 generic-rule answer,
# rightly. For comparison, not chosen: the round-8 rules with the same fallback get 149. Asserted exactly, with the
# settings it was measured with (LAST_BLIND_SETTINGS); since then the default fallback also learns from heldout9 and
# its settings were re-chosen (CHOSEN_FALLBACK), which would have got 148 on heldout9 out of fold.
HELDOUT9_RULES_CORRECT_MEASURED = 134
HELDOUT9_HYBRID_CORRECT_MEASURED = 150


@pytest.fixture(scope="module")
def all_messages():
    return load_messages()


@pytest.fixture(scope="module")
def messages():
    # every evaluation below leaves out the sets not yet measured, until their one blind measurement
    # (README, "heldout7")
    return measured_messages()


def _digest(entries: pd.DataFrame) -> str:
    records = entries[list(MESSAGE_FIELDS)].to_dict("records")
    return hashlib.sha256(json.dumps(records, ensure_ascii=False).encode()).hexdigest()


@pytest.mark.parametrize("split, size, sha256", [("heldout", HELDOUT_SIZE, HELDOUT_SHA256),
                                                  ("heldout2", HELDOUT2_SIZE, HELDOUT2_SHA256),
                                                  ("heldout3", HELDOUT3_SIZE, HELDOUT3_SHA256),
                                                  ("heldout4", HELDOUT4_SIZE, HELDOUT4_SHA256),
                                                  ("heldout5", HELDOUT5_SIZE, HELDOUT5_SHA256),
                                                  ("heldout6", HELDOUT6_SIZE, HELDOUT6_SHA256),
                                                  ("heldout7", HELDOUT7_SIZE, HELDOUT7_SHA256),
                                                  ("heldout8", HELDOUT8_SIZE, HELDOUT8_SHA256),
                                                  ("heldout9", HELDOUT9_SIZE, HELDOUT9_SHA256)])
def test_frozen_held_out_sets_are_unchanged(all_messages, split, size, sha256):
    frozen = all_messages[all_messages["split"] == split]
    assert len(frozen) == size
    assert _digest(frozen) == sha256
    # the digest sees every field: changing one character of one entry changes it
    touched = frozen.copy()
    touched.iloc[0, touched.columns.get_loc("note")] += "."
    assert _digest(touched) != sha256


def test_every_message_has_its_source_a_valid_label_and_one_split_per_source(all_messages):
    messages = all_messages
    rules = load_rules()
    assert len(messages) >= 80
    assert messages["id"].is_unique
    for row in messages.itertuples():
        assert re.fullmatch(rf"https://github\.com/{re.escape(row.repo)}/(issues|pull)/\d+", row.source_url), row.id
        assert row.reason == NO_SIGNATURE or row.reason in rules.reasons, row.id
        assert row.category == rules.reason(row.reason).category, row.id
        assert row.split in SPLITS, row.id
        assert 1 <= len(row.text.splitlines()) <= 5, f"{row.id}: quote only the error lines"
    assert (messages.groupby("source_url")["split"].nunique() == 1).all()
    sizes = messages["split"].value_counts()
    # round 1 split 123 messages in halves (62 tuning, 61 held-out); round 2 added 83 to the tuning half only;
    # heldout2 to heldout9 are separate sets from new threads
    assert (sizes["tuning"], sizes["heldout"], sizes["heldout2"], sizes["heldout3"], sizes["heldout4"],
            sizes["heldout5"], sizes["heldout6"], sizes["heldout7"], sizes["heldout8"], sizes["heldout9"]) == (
        145, HELDOUT_SIZE, HELDOUT2_SIZE, HELDOUT3_SIZE, HELDOUT4_SIZE, HELDOUT5_SIZE, HELDOUT6_SIZE, HELDOUT7_SIZE,
        HELDOUT8_SIZE, HELDOUT9_SIZE)
    # every reason with two or more messages is in both halves of the round-1 split
    halves = messages[messages["split"].isin(["tuning", "heldout"])]
    per_reason = halves.groupby("reason")["split"].agg(["size", "nunique"])
    assert (per_reason.loc[per_reason["size"] >= 2, "nunique"] == 2).all()
    # the paper's failure reasons as they occur in the wild: all of them are represented
    assert set(rules.reasons) <= set(messages["reason"])


def _write(tmp_path, entries: str):
    path = tmp_path / "messages.yaml"
    path.write_text(textwrap.dedent(entries))
    return path


GOOD = """\
    - id: a1
      source_url: https://github.com/o/r/issues/1
      repo: o/r
      reason: gpu_out_of_memory
      category: user
      split: tuning
      text: "RuntimeError: CUDA out of memory."
      note: n
"""


@pytest.mark.parametrize("change, message", [
    (("reason: gpu_out_of_memory", "reason: gpu_oom"),
     r"messages\.yaml:1: message 'a1': field 'reason' 'gpu_oom' is no reason"),
    (("category: user", "category: infrastructure"),
     (r"message 'a1': field 'category' is 'infrastructure', "
      r"but reason 'gpu_out_of_memory' has category 'user'")),
    (("split: tuning", "split: test"),
     (r"message 'a1': field 'split' must be one of \['tuning', 'heldout', 'heldout2', 'heldout3', 'heldout4', "
      r"'heldout5', 'heldout6', 'heldout7', 'heldout8', 'heldout9'\]")),
    (("source_url: https://", "source_url: http://"), r"message 'a1': field 'source_url' must be the https address"),
    (("      note: n\n", ""), r"messages\.yaml:1: message 'a1' lacks the text field 'note'"),
])
def test_loader_names_file_line_message_and_field(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        load_messages(_write(tmp_path, GOOD.replace(*change)))


def test_loader_refuses_a_source_in_both_halves_and_duplicate_ids(tmp_path):
    second = GOOD.replace("id: a1", "id: a2").replace("split: tuning", "split: heldout")
    with pytest.raises(ValueError, match=r"message 'a2': source https://github.com/o/r/issues/1 is in both splits"):
        load_messages(_write(tmp_path, GOOD + second))
    with pytest.raises(ValueError, match=r"message 'a1': duplicate id"):
        load_messages(_write(tmp_path, GOOD + GOOD))
    assert len(load_messages(_write(tmp_path, GOOD + GOOD.replace("id: a1", "id: a2")))) == 2


def test_evaluation_on_known_answers():
    messages = pd.DataFrame({
        "id": ["x", "y", "z", "w"], "source_url": ["u1", "u2", "u3", "u4"],
        "reason": ["gpu_out_of_memory", "permission_error", "syntax_error", NO_SIGNATURE],
        "text": ["RuntimeError: CUDA out of memory. Tried to allocate 2 MiB",
                 "RuntimeError: CUDA out of memory.",          # labelled otherwise: a miss
                 "nothing recognisable here",                  # a miss to no signature
                 "ValueError: shapes (3,) and (4,) not aligned"]})
    ev = evaluate_classifier(messages, fallback=False)  # the rules alone: no learned guess
    assert ev.accuracy == 0.5
    assert list(ev.results["predicted"]) == ["gpu_out_of_memory", "gpu_out_of_memory", NO_SIGNATURE, NO_SIGNATURE]
    assert list(ev.results["rule_id"][:2]) == ["torch-cuda-oom", "torch-cuda-oom"]
    c = ev.confusion
    assert c.loc["gpu_out_of_memory", "gpu_out_of_memory"] == 1
    assert c.loc["permission_error", "gpu_out_of_memory"] == 1
    assert c.loc["syntax_error", NO_SIGNATURE] == 1
    assert c.loc[NO_SIGNATURE, NO_SIGNATURE] == 1
    assert c.to_numpy().sum() == 4 and list(c.index) == list(c.columns)
    assert ev.by_reason().loc["permission_error", "recall"] == 0.0
    with pytest.raises(ValueError, match="no messages"):
        evaluate_classifier(messages.iloc[:0])
    # with the default fallback, the rules' answers stand, and each text the rules leave silent carries the
    # fallback's probability of its best reason; a guess is marked as the fallback's
    hybrid = evaluate_classifier(messages).results
    assert list(hybrid["rule_id"][:2]) == ["torch-cuda-oom", "torch-cuda-oom"]
    assert hybrid["fallback_confidence"][:2].isna().all() and hybrid["fallback_confidence"][2:].notna().all()
    guessed = hybrid["rule_id"] == FALLBACK_RULE_ID
    assert (hybrid.loc[guessed, "fallback_confidence"] >= CHOSEN_FALLBACK.threshold).all()
    assert (hybrid.loc[~guessed & hybrid["fallback_confidence"].notna(), "predicted"] == NO_SIGNATURE).all()


def test_tuning_half_is_classified_right(messages):
    ev = evaluate_classifier(messages[messages["split"] == "tuning"])
    wrong = ev.results[~ev.results["correct"]]
    assert wrong.empty, wrong.to_string()
    assert len(ev.results) == CORRECT_WITH_FALLBACK["tuning"]
    rules_alone = evaluate_classifier(messages[messages["split"] == "tuning"], fallback=False)
    assert int(rules_alone.results["correct"].sum()) == RULES_CORRECT["tuning"]


@pytest.mark.parametrize("split, size", [
    ("heldout", HELDOUT_SIZE), ("heldout2", HELDOUT2_SIZE), ("heldout3", HELDOUT3_SIZE), ("heldout4", HELDOUT4_SIZE),
    ("heldout5", HELDOUT5_SIZE), ("heldout6", HELDOUT6_SIZE), ("heldout7", HELDOUT7_SIZE), ("heldout8", HELDOUT8_SIZE),
    ("heldout9", HELDOUT9_SIZE)])
def test_former_held_out_sets_in_sample_counts_and_confusion_tables(messages, split, size):
    rules_correct, correct = RULES_CORRECT[split], CORRECT_WITH_FALLBACK[split]
    ev = evaluate_classifier(messages[messages["split"] == split])
    n, right = len(ev.results), int(ev.results["correct"].sum())
    blind = (f"; measured once blind after round 3: {HELDOUT3_CORRECT_MEASURED_AFTER_ROUND3} of {n}"
             if split == "heldout3" else "")
    # shown only when a check fails (a test prints nothing on success)
    shown = (f"\nreal user-posted failure messages, {split} (rules + fallback, the fallback trained on it, so "
             f"in-sample{blind}): {right} of {n} ({ev.accuracy:.1%}) classified to their hand label; confusion table "
             f"(non-zero columns):\n{ev.confusion.loc[:, ev.confusion.sum() > 0].to_string()}\n"
             f"{ev.results.loc[~ev.results['correct'], ['id', 'reason', 'predicted', 'rule_id']].to_string()}")
    assert n == size, shown
    assert ev.confusion.to_numpy().sum() == n and ev.confusion.to_numpy().trace() == right, shown
    assert ev.accuracy == pytest.approx(right / n), shown
    assert right == correct, shown
    rules_alone = evaluate_classifier(messages[messages["split"] == split], fallback=False)
    assert int(rules_alone.results["correct"].sum()) == rules_correct
    assert not (rules_alone.results["rule_id"] == FALLBACK_RULE_ID).any()



def test_fallback_leave_one_split_out_counts_and_the_chosen_settings(messages, fallback_cross_validation):
    cv = fallback_cross_validation
    assert len(cv) == 10 * 3 * 2 * 6 * 4   # splits x C x with/without the corpus x thresholds x refine probabilities
    keeps_corpus = fallback_keeps_corpus(messages)
    # the settings are chosen by the cross-validation alone, among those that keep every corpus log right: round 8's
    # (the incumbent, with which heldout9 was measured) no longer keep the corpus, so the best allowed setting is chosen
    incumbent = LAST_BLIND_SETTINGS
    assert not keeps_corpus[(incumbent.C, incumbent.with_corpus, incumbent.threshold, incumbent.refine)]
    assert choose_fallback_settings(cv, keeps_corpus, incumbent=incumbent) == CHOSEN_FALLBACK == FallbackSettings()
    chosen = cv[(cv["C"] == CHOSEN_FALLBACK.C) & (cv["with_corpus"] == CHOSEN_FALLBACK.with_corpus)
                & (cv["threshold"] == CHOSEN_FALLBACK.threshold)
                & (cv["refine"] == CHOSEN_FALLBACK.refine)].set_index("split")
    shown = ("\nleave-one-split-out, rules alone vs rules + fallback trained on the other nine splits "
             f"({CHOSEN_FALLBACK}):\n" + chosen[["messages", "rules_correct", "hybrid_correct", "fallback_decisions",
                                                "fallback_correct", "refined", "refined_correct",
                                                "model_correct"]].to_string())
    assert {split: (row.rules_correct, row.hybrid_correct) for split, row in chosen.iterrows()} == CV_CORRECT, shown
    assert chosen["hybrid_correct"].sum() == 1065
    assert chosen.loc["heldout4", ["fallback_decisions", "fallback_correct"]].tolist() == [11, 9]
    # refining the generic rules: five refinements over the ten splits, all right
    assert chosen[["refined", "refined_correct"]].sum().tolist() == [5, 5]
    never = cv[(cv["C"] == CHOSEN_FALLBACK.C) & cv["with_corpus"] & (cv["threshold"] == CHOSEN_FALLBACK.threshold)
               & (cv["refine"] == math.inf)].set_index("split")
    assert (chosen["hybrid_correct"] - never["hybrid_correct"]).sum() == 5
    # the model alone, rules ignored, names the reason of 91.0% of a split's messages on average
    assert (chosen["model_correct"] / chosen["messages"]).mean() == pytest.approx(0.9095, abs=5e-5)
    # a lower threshold would guess on the corpus's unattributable logs
    assert not keeps_corpus[(CHOSEN_FALLBACK.C, True, 0.4, CHOSEN_FALLBACK.refine)]
    assert keeps_corpus[(CHOSEN_FALLBACK.C, True, CHOSEN_FALLBACK.threshold, CHOSEN_FALLBACK.refine)]


@pytest.fixture(scope="module")
def heldout9_fallback(messages):
    """The fallback heldout9 was measured with: trained on every other split, with the settings of then."""
    return train_fallback(messages[messages["split"] != "heldout9"], LAST_BLIND_SETTINGS)


@pytest.fixture(scope="module")
def heldout9_blind(messages, heldout9_fallback):
    """heldout9 classified as it was measured: rules alone, and rules + a fallback that never saw heldout9."""
    part = messages[messages["split"] == "heldout9"]
    return evaluate_classifier(part, fallback=False), evaluate_classifier(part, fallback=heldout9_fallback)


def test_heldout9_measured_once_rules_and_fallback(heldout9_blind):
    rules_alone, hybrid = heldout9_blind
    shown = (f"\nreal user-posted failure messages, heldout9 (new threads, labelled blind with the labelling guide, "
             f"evaluated once after round 9): rules alone {rules_alone.results['correct'].sum()} of "
             f"{len(rules_alone.results)}, rules + fallback {hybrid.results['correct'].sum()} ({hybrid.accuracy:.1%}); "
             f"confusion table of the hybrid (non-zero columns):\n"
             f"{hybrid.confusion.loc[:, hybrid.confusion.sum() > 0].to_string()}\n"
             f"{hybrid.results.loc[~hybrid.results['correct'], ['id', 'reason', 'predicted', 'rule_id']].to_string()}")
    assert len(hybrid.results) == HELDOUT9_SIZE, shown
    assert int(rules_alone.results["correct"].sum()) == HELDOUT9_RULES_CORRECT_MEASURED, shown
    assert int(hybrid.results["correct"].sum()) == HELDOUT9_HYBRID_CORRECT_MEASURED, shown
    results = hybrid.results
    guessed = results[(results["rule_id"] == FALLBACK_RULE_ID) & results["refined_rule"].isna()]
    refined = results[results["refined_rule"].notna()]
    assert (len(guessed), int(guessed["correct"].sum())) == (19, 15)
    assert (len(refined), int(refined["correct"].sum())) == (1, 1)
    # "no signature" where a reader could tell the reason: 5 of 165 (two Bad substitution launcher scripts, a script
    # with Windows line endings, a CUDA device-side assert on a label, a Ray actor lost)
    assert int((results["predicted"] == NO_SIGNATURE).sum()) == 5


def test_heldout9_accuracy_meets_target(heldout9_blind):
    # the one blind measurement of round 9: 150 of 165 (90.9%); 149 would be 90.3%, 148 below the target
    assert heldout9_blind[1].accuracy >= HELDOUT_TARGET


def test_a_second_annotator_agrees_with_the_first_on_the_blind_sets(messages, heldout9_fallback):
    # heldout5 to heldout9 were labelled again by a second annotator who saw neither the first labels nor the
    # classifier (README, "A second annotator"; heldout9 by both with the labelling guide): the 90% target sits below
    # how often two humans agree
    second = load_second_labels(messages=messages)
    doubly = ["heldout5", "heldout6", "heldout7", "heldout8", "heldout9"]
    assert len(second) == 610 and set(second["id"]) == set(messages.loc[messages["split"].isin(doubly), "id"])
    # the classifier on each set with a fallback that never saw it: on heldout9 its blind measurement (the round-9
    # rules were written looking at the others)
    predicted = []
    for split in doubly:
        part = messages[messages["split"] == split]
        fallback = heldout9_fallback if split == LAST_BLIND_SPLIT else train_fallback(
            messages[messages["split"] != split], FallbackSettings())
        results = evaluate_classifier(part, fallback=fallback).results
        predicted.append(pd.Series(list(results["predicted"]), index=results["id"]))
    table = annotator_agreement(messages, second, pd.concat(predicted))
    shown = "\nsecond annotator on heldout5-9 (classifier: the fallback out of fold; heldout9 blind):\n" + \
        table.round(3).to_string()
    assert table[["messages", "agree", "second_unsure"]].to_dict("index") == {
        "heldout5": {"messages": 100, "agree": 96, "second_unsure": 8},
        "heldout6": {"messages": 100, "agree": 99, "second_unsure": 10},
        "heldout7": {"messages": 80, "agree": 78, "second_unsure": 13},
        "heldout8": {"messages": 165, "agree": 161, "second_unsure": 32},
        "heldout9": {"messages": 165, "agree": 164, "second_unsure": 19}}, shown
    assert table["kappa"].round(3).tolist() == [0.957, 0.989, 0.973, 0.974, 0.994], shown
    # vs the first labels, vs the second's, on the messages both agree on; heldout9's row is its blind measurement
    versus = ["classifier_vs_first", "classifier_vs_second", "classifier_on_agreed"]
    assert table[versus].astype(int).values.tolist() == [
        [93, 94, 92], [94, 94, 94], [77, 77, 76], [160, 156, 156], [150, 149, 149]]


def test_agreement_and_second_labels_on_known_answers(tmp_path):
    messages = pd.DataFrame({"id": ["a", "b", "c", "d"], "split": ["s", "s", "s", "t"],
                             "reason": ["syntax_error", "import_error", "syntax_error", "gpu_ecc_error"]})
    second = pd.DataFrame({"id": ["a", "b", "c"], "reason": ["syntax_error", "semantic_error", "syntax_error"],
                           "sure": [True, False, True]})
    predicted = pd.Series({"a": "syntax_error", "b": "semantic_error", "c": "import_error", "d": "gpu_ecc_error"})
    table = annotator_agreement(messages, second, predicted)
    assert list(table.index) == ["s"]  # d has one label only
    assert table.loc["s", ["messages", "agree", "second_unsure", "classifier_vs_first", "classifier_vs_second",
                           "classifier_on_agreed"]].tolist() == [3, 2, 1, 1, 2, 1]
    path = tmp_path / "second.yaml"
    path.write_text("- {id: m001, reason: gpu_out_of_memory, sure: true, note: n}\n")
    real = load_messages()
    assert load_second_labels(path, real)["reason"].tolist() == ["gpu_out_of_memory"]
    for text, message in [("- {id: zz, reason: gpu_out_of_memory, sure: true, note: n}",
                           r"second\.yaml:1: label 'zz': field 'id' names no message"),
                          ("- {id: m001, reason: oom, sure: true, note: n}",
                           r"label 'm001': field 'reason' 'oom' is no reason"),
                          ("- {id: m001, reason: gpu_out_of_memory, sure: maybe, note: n}",
                           r"field 'sure' must be true or false"),
                          ("- {id: m001, reason: gpu_out_of_memory, note: n}",
                           r"second\.yaml:1: expected a mapping with the fields"),
                          (("- {id: m001, reason: gpu_out_of_memory, sure: true, note: n}\n"
                            "- {id: m001, reason: gpu_out_of_memory, sure: true, note: n}"),
                           r"second\.yaml:2: label 'm001': duplicate id")]:
        path.write_text(text + "\n")
        with pytest.raises(ValueError, match=message):
            load_second_labels(path, real)
