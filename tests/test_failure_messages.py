"""The real user-posted failure messages (data/failure_messages/) and the classifier's accuracy on them.

Unlike the project's own corpus, these texts were written by others. Rounds 1 and 2 tuned the rules on the
tuning half only and measured the held-out sets once each (heldout: 82.0%, then 86.9%; heldout2: 67.4%);
round 3 tuned on the first three splits and heldout3 measured it once (79.4%); round 4 tuned on all four splits,
so every rules-only count below is in-sample: a regression count, no estimate of accuracy on unseen messages (see
data/failure_messages/README.md, "Round 4"). Round 5 added a learned fallback where no rule fires, trained on all
five splits: the default classifier's counts are in-sample too; its out-of-fold figures are the leave-one-split-out
counts asserted at the end (README, "A learned fallback (round 5)").
"""

import hashlib
import json
import re
import textwrap

import pandas as pd
import pytest

from dlcluster.analysis.classify import (MESSAGE_FIELDS, NO_SIGNATURE, SPLITS, choose_fallback_settings,
                                         cross_validate_fallback, evaluate_classifier, fallback_keeps_corpus,
                                         load_messages, load_rules, train_fallback)
from dlcluster.analysis.fallback import FALLBACK_RULE_ID, FallbackSettings

# History: messages classified right by the rules alone after tuning round 4, which tuned on all four splits
# (in-sample). The held-out numbers measured once before they were tuned on (heldout: 50 then 53 of 61; heldout2:
# 64 of 95; heldout3: 81 of 102) are kept in the README. The misses left: heldout m074, heldout2 m214 and m221.
TUNING_CORRECT_AFTER_ROUND4 = 145
HELDOUT_CORRECT_AFTER_ROUND4 = 60
HELDOUT2_CORRECT_AFTER_ROUND4 = 93
HELDOUT3_CORRECT_AFTER_ROUND4 = 102

# The default classifier since round 5: rules + the learned fallback, trained on all five splits, so these counts
# are in-sample regression counts (a message no rule matches finds itself as nearest neighbour). Against the
# rules alone: heldout m114 (the one message labelled no signature) is now guessed CPU OOM (-1), heldout2 m214 and
# the 12 heldout4 messages no rule matched are now right (+1, +12) (README, "A learned fallback (round 5)").
TUNING_CORRECT_WITH_FALLBACK = 145
HELDOUT_CORRECT_WITH_FALLBACK = 59
HELDOUT2_CORRECT_WITH_FALLBACK = 94
HELDOUT3_CORRECT_WITH_FALLBACK = 102
HELDOUT4_CORRECT_WITH_FALLBACK = 90

# Leave-one-split-out cross-validation of the fallback (round 5): for each split, the fallback trained on the
# other four, rules + fallback with the chosen settings classify it. Exact counts (rules alone, hybrid).
CV_CORRECT = {"tuning": (145, 145), "heldout": (60, 59), "heldout2": (93, 94), "heldout3": (102, 102),
              "heldout4": (78, 86)}
CHOSEN_FALLBACK = FallbackSettings(ngram_range=(3, 5), threshold=0.2, with_corpus=False)


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
# heldout4 measured once (merge commit 590ae53: the set committed, the round-4 rules of 1de5dfa untouched), the
# blind estimate of the current rules. Asserted exactly: a rule change that moves it must be noticed, and then the
# set has been seen (README, "heldout4").
HELDOUT4_CORRECT_MEASURED = 78

# The fifth held-out set (branch heldout5): messages from threads none of the other splits used, collected and
# hand-labelled blind; committed before the classifier first sees it (README, "heldout5").
HELDOUT5_SIZE = 100
HELDOUT5_SHA256 = "b03f34799b33b7b3f1771465425b0f4bf9f50a233ee697c7be399808f7303a44"
# heldout5 measured once (merge commit 0704dce: the set committed, the rules and the fallback of the fallback branch
# untouched): the rules alone 80 of 100, the classifier as shipped (rules + the fallback with the chosen settings,
# trained on the five earlier splits, as it was before heldout5 existed) 83 of 100; the fallback decided 7, 3 right.
# Asserted exactly; since then the default fallback also learns from heldout5, so these counts use one trained without it.
HELDOUT5_RULES_CORRECT_MEASURED = 80
HELDOUT5_HYBRID_CORRECT_MEASURED = 83

# The sixth held-out set (branch heldout6): messages from threads none of the other splits used, collected and
# hand-labelled blind while the classifier (rules + learned fallback) was improved on the first 600 messages;
# committed before the classifier first sees it, to be measured once after the model is final (README, "heldout6").
HELDOUT6_SIZE = 100
HELDOUT6_SHA256 = "d80bb68edb2f820fa1403f4d793df5365e3a41a8eb2dc2a1f094073a4a9e0f7b"
HELDOUT_TARGET = 0.90


@pytest.fixture(scope="module")
def messages():
    return load_messages()


def _digest(entries: pd.DataFrame) -> str:
    records = entries[list(MESSAGE_FIELDS)].to_dict("records")
    return hashlib.sha256(json.dumps(records, ensure_ascii=False).encode()).hexdigest()


@pytest.mark.parametrize("split, size, sha256", [("heldout", HELDOUT_SIZE, HELDOUT_SHA256),
                                                  ("heldout2", HELDOUT2_SIZE, HELDOUT2_SHA256),
                                                  ("heldout3", HELDOUT3_SIZE, HELDOUT3_SHA256),
                                                  ("heldout4", HELDOUT4_SIZE, HELDOUT4_SHA256),
                                                  ("heldout5", HELDOUT5_SIZE, HELDOUT5_SHA256),
                                                  ("heldout6", HELDOUT6_SIZE, HELDOUT6_SHA256)])
def test_frozen_held_out_sets_are_unchanged(messages, split, size, sha256):
    frozen = messages[messages["split"] == split]
    assert len(frozen) == size
    assert _digest(frozen) == sha256
    # the digest sees every field: changing one character of one entry changes it
    touched = frozen.copy()
    touched.iloc[0, touched.columns.get_loc("note")] += "."
    assert _digest(touched) != sha256


def test_every_message_has_its_source_a_valid_label_and_one_split_per_source(messages):
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
    # heldout2 to heldout6 are separate sets from new threads
    assert (sizes["tuning"], sizes["heldout"], sizes["heldout2"], sizes["heldout3"], sizes["heldout4"],
            sizes["heldout5"], sizes["heldout6"]) == (145, HELDOUT_SIZE, HELDOUT2_SIZE, HELDOUT3_SIZE, HELDOUT4_SIZE,
                                                      HELDOUT5_SIZE, HELDOUT6_SIZE)
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
    (("reason: gpu_out_of_memory", "reason: gpu_oom"), r"messages\.yaml:1: message 'a1': field 'reason' 'gpu_oom' is no reason"),
    (("category: user", "category: infrastructure"), r"message 'a1': field 'category' is 'infrastructure', but reason 'gpu_out_of_memory' has category 'user'"),
    (("split: tuning", "split: test"),
     r"message 'a1': field 'split' must be one of \['tuning', 'heldout', 'heldout2', 'heldout3', 'heldout4', 'heldout5', "
     r"'heldout6'\]"),
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
    # similarity to its nearest labelled message; a guess is marked as the fallback's
    hybrid = evaluate_classifier(messages).results
    assert list(hybrid["rule_id"][:2]) == ["torch-cuda-oom", "torch-cuda-oom"]
    assert hybrid["fallback_similarity"][:2].isna().all() and hybrid["fallback_similarity"][2:].notna().all()
    guessed = hybrid["rule_id"] == FALLBACK_RULE_ID
    assert (hybrid.loc[guessed, "fallback_similarity"] >= CHOSEN_FALLBACK.threshold).all()
    assert (hybrid.loc[~guessed & hybrid["fallback_similarity"].notna(), "predicted"] == NO_SIGNATURE).all()


def test_tuning_half_is_classified_right(messages):
    ev = evaluate_classifier(messages[messages["split"] == "tuning"])
    wrong = ev.results[~ev.results["correct"]]
    assert wrong.empty, wrong.to_string()
    assert len(ev.results) == TUNING_CORRECT_WITH_FALLBACK
    assert int(evaluate_classifier(messages[messages["split"] == "tuning"], fallback=False).results["correct"].sum()) == (
        TUNING_CORRECT_AFTER_ROUND4)


@pytest.mark.parametrize("split, size, rules_correct, correct", [
    ("heldout", HELDOUT_SIZE, HELDOUT_CORRECT_AFTER_ROUND4, HELDOUT_CORRECT_WITH_FALLBACK),
    ("heldout2", HELDOUT2_SIZE, HELDOUT2_CORRECT_AFTER_ROUND4, HELDOUT2_CORRECT_WITH_FALLBACK),
    ("heldout3", HELDOUT3_SIZE, HELDOUT3_CORRECT_AFTER_ROUND4, HELDOUT3_CORRECT_WITH_FALLBACK),
    ("heldout4", HELDOUT4_SIZE, HELDOUT4_CORRECT_MEASURED, HELDOUT4_CORRECT_WITH_FALLBACK)])
def test_former_held_out_sets_in_sample_counts_and_confusion_tables(messages, capsys, split, size, rules_correct,
                                                                     correct):
    ev = evaluate_classifier(messages[messages["split"] == split])
    n, right = len(ev.results), int(ev.results["correct"].sum())
    blind = (f"; measured once blind after round 3: {HELDOUT3_CORRECT_MEASURED_AFTER_ROUND3} of {n}"
             if split == "heldout3" else "")
    with capsys.disabled():
        print(f"\nreal user-posted failure messages, {split} (rules + fallback, both tuned on it, so in-sample{blind}): "
              f"{right} of {n} ({ev.accuracy:.1%}) classified to their hand label; confusion table (non-zero columns):")
        print(ev.confusion.loc[:, ev.confusion.sum() > 0].to_string())
        print(ev.results.loc[~ev.results["correct"], ["id", "reason", "predicted", "rule_id"]].to_string())
    assert n == size
    assert ev.confusion.to_numpy().sum() == n and ev.confusion.to_numpy().trace() == right
    assert ev.accuracy == pytest.approx(right / n)
    assert right == correct
    rules_alone = evaluate_classifier(messages[messages["split"] == split], fallback=False)
    assert int(rules_alone.results["correct"].sum()) == rules_correct
    assert not (rules_alone.results["rule_id"] == FALLBACK_RULE_ID).any()



def test_heldout4_measured_once_confusion_table(messages, capsys):
    # the one blind measurement was of the rules alone (before round 5 added the fallback)
    ev = evaluate_classifier(messages[messages["split"] == "heldout4"], fallback=False)
    n, right = len(ev.results), int(ev.results["correct"].sum())
    with capsys.disabled():
        print(f"\nreal user-posted failure messages, heldout4 (new threads, labelled blind, evaluated once after round 4): "
              f"{right} of {n} ({ev.accuracy:.1%}) classified to their hand label; confusion table (non-zero columns):")
        print(ev.confusion.loc[:, ev.confusion.sum() > 0].to_string())
    assert n == HELDOUT4_SIZE
    assert ev.confusion.to_numpy().sum() == n and ev.confusion.to_numpy().trace() == right
    assert right == HELDOUT4_CORRECT_MEASURED


@pytest.mark.xfail(strict=True, reason="heldout4 accuracy measured once after tuning round 4 is 80.4% (78/97), below "
                                       "the 0.90 target (data/failure_messages/README.md, 'heldout4')")
def test_heldout4_accuracy_meets_target(messages):
    assert evaluate_classifier(messages[messages["split"] == "heldout4"], fallback=False).accuracy >= HELDOUT_TARGET


def test_fallback_leave_one_split_out_counts_and_the_chosen_settings(messages, capsys):
    # the settings were chosen on the five splits that existed then (heldout5 came after, to measure the choice)
    messages = messages[messages["split"] != "heldout5"]
    cv = cross_validate_fallback(messages)
    keeps_corpus = fallback_keeps_corpus(messages)
    # the settings are chosen by the cross-validation alone, among those that keep every corpus log right
    assert choose_fallback_settings(cv, keeps_corpus) == CHOSEN_FALLBACK == FallbackSettings()
    chosen = cv[(cv["ngram_range"] == CHOSEN_FALLBACK.ngram_range) & (cv["with_corpus"] == CHOSEN_FALLBACK.with_corpus)
                & (cv["threshold"] == CHOSEN_FALLBACK.threshold)].set_index("split")
    with capsys.disabled():
        print("\nleave-one-split-out, rules alone vs rules + fallback trained on the other four splits "
              f"({CHOSEN_FALLBACK}):")
        print(chosen[["messages", "rules_correct", "hybrid_correct", "fallback_decisions", "fallback_correct"]].to_string())
    assert {split: (row.rules_correct, row.hybrid_correct) for split, row in chosen.iterrows()} == CV_CORRECT
    assert chosen.loc["heldout4", ["fallback_decisions", "fallback_correct"]].tolist() == [11, 8]
    # the cross-validation alone would pick a lower threshold; it guesses on the corpus's unattributable logs
    assert choose_fallback_settings(cv).threshold < CHOSEN_FALLBACK.threshold
    assert not keeps_corpus[(CHOSEN_FALLBACK.ngram_range, False, 0.1)]
    assert keeps_corpus[(CHOSEN_FALLBACK.ngram_range, False, CHOSEN_FALLBACK.threshold)]


def _heldout5_blind(messages):
    """heldout5 classified as it was measured: rules alone, and rules + a fallback that never saw heldout5."""
    part = messages[messages["split"] == "heldout5"]
    before = train_fallback(messages[messages["split"] != "heldout5"], CHOSEN_FALLBACK)
    return evaluate_classifier(part, fallback=False), evaluate_classifier(part, fallback=before)


def test_heldout5_measured_once_rules_and_fallback(messages, capsys):
    rules_alone, hybrid = _heldout5_blind(messages)
    with capsys.disabled():
        print(f"\nreal user-posted failure messages, heldout5 (new threads, labelled blind, evaluated once after round 5): "
              f"rules alone {rules_alone.results['correct'].sum()} of {len(rules_alone.results)}, rules + fallback "
              f"{hybrid.results['correct'].sum()} ({hybrid.accuracy:.1%}); confusion table of the hybrid (non-zero columns):")
        print(hybrid.confusion.loc[:, hybrid.confusion.sum() > 0].to_string())
    assert len(hybrid.results) == HELDOUT5_SIZE
    assert int(rules_alone.results["correct"].sum()) == HELDOUT5_RULES_CORRECT_MEASURED
    assert int(hybrid.results["correct"].sum()) == HELDOUT5_HYBRID_CORRECT_MEASURED
    guessed = hybrid.results[hybrid.results["rule_id"] == FALLBACK_RULE_ID]
    assert (len(guessed), int(guessed["correct"].sum())) == (7, 3)
    # the leave-one-split-out row of heldout5 is the same measurement: the fallback trained on the other splits
    cv = cross_validate_fallback(messages, grid={"ngram_range": [CHOSEN_FALLBACK.ngram_range],
                                                 "with_corpus": [CHOSEN_FALLBACK.with_corpus],
                                                 "threshold": [CHOSEN_FALLBACK.threshold]}).set_index("split")
    assert cv.loc["heldout5", ["rules_correct", "hybrid_correct"]].tolist() == [80, 83]


@pytest.mark.xfail(strict=True, reason="heldout5 accuracy of the classifier as shipped (rules + fallback), measured once, "
                                       "is 83.0% (83/100), below the 0.90 target (data/failure_messages/README.md, 'heldout5')")
def test_heldout5_accuracy_meets_target(messages):
    assert _heldout5_blind(messages)[1].accuracy >= HELDOUT_TARGET
