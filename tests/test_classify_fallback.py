"""The learned fallback (dlcluster.analysis.fallback) behind the rules, on known answers."""

import math
import subprocess
import sys

import pandas as pd
import pytest

from dlcluster.analysis.classify import (NO_SIGNATURE, RuleSet, choose_fallback_settings, classify, classify_dir,
                                         classify_many, cross_validate_fallback, evaluate_classifier, train_fallback)
from dlcluster.analysis.fallback import FALLBACK_RULE_ID, FallbackSettings, LearnedFallback

# Texts no rule of failure_rules.yaml matches, each of a made-up family, with a reason to learn.
TINY = pd.DataFrame({
    "id": ["p1", "p2", "e1", "e2", "k1", "k2", "u1"],
    "text": ["PreemptionWarning: spot node reclaimed by the provider, job stopped",
             "PreemptionWarning: spot node reclaimed, workers stopped",
             "flux capacitor memory parity fault on board 3",
             "flux capacitor memory parity fault on board 7",
             "vault gate refused the badge of user 12",
             "vault gate refused the badge of user 40",
             "operator says: 1 replica(s) failed"],
    "reason": ["job_preempted", "job_preempted", "gpu_ecc_error", "gpu_ecc_error", "permission_error",
               "permission_error", NO_SIGNATURE],
    "split": ["a", "b", "a", "b", "a", "b", "a"],
    "source_url": ["u1", "u2", "u3", "u4", "u5", "u6", "u7"],
})
TINY_SETTINGS = FallbackSettings(C=100.0, threshold=0.6, with_corpus=False)


@pytest.fixture(scope="module")
def tiny():
    return train_fallback(TINY, TINY_SETTINGS)


def test_fallback_guesses_the_reason_of_similar_labelled_texts(tiny):
    assert tiny.classes == {"job_preempted", "gpu_ecc_error", "permission_error"}  # no_signature is not learned
    m = classify("[w3] PreemptionWarning: spot node reclaimed by the cloud", fallback=tiny)
    assert (m.reason, m.category, m.rule_id) == ("job_preempted", "infrastructure", FALLBACK_RULE_ID)
    assert m.fallback_neighbour in {"p1", "p2"} and 0.6 <= m.fallback_confidence <= 1
    assert (m.matched_line, m.line_number) == (None, None)  # a guess points to no line of the log
    m = classify("flux capacitor parity fault, board 5", fallback=tiny)
    assert (m.reason, m.rule_id, m.fallback_neighbour[0]) == ("gpu_ecc_error", FALLBACK_RULE_ID, "e")
    # a training text is its own most similar text of its reason
    guess = tiny.guess(TINY["text"][4])
    assert (guess.reason, guess.neighbour) == ("permission_error", "k1") and guess.confidence > 0.6


def test_below_the_threshold_the_text_stays_no_signature(tiny):
    text = "zzzz qqqq"  # shares nothing with any labelled text: the model cannot tell three reasons apart
    confidence = tiny.guess(text).confidence
    assert 1 / 3 <= confidence < 0.6
    m = classify(text, fallback=tiny)
    assert (m.reason, m.rule_id, m.fallback_confidence) == (NO_SIGNATURE, None, pytest.approx(confidence))
    assert m.fallback_neighbour is not None  # the evidence is kept even where the guess is declined
    lenient = train_fallback(TINY, FallbackSettings(C=100.0, threshold=confidence, with_corpus=False))
    assert classify(text, fallback=lenient).rule_id == FALLBACK_RULE_ID


def test_a_fallback_needs_two_reasons_to_learn():
    with pytest.raises(ValueError, match=r"at least two reasons to train on, got \['syntax_error'\]"):
        LearnedFallback(["a", "b"], ["syntax_error", "syntax_error"], ["x", "y"])
    with pytest.raises(ValueError, match=r"differ in length \(2, 1, 2\)"):
        LearnedFallback(["a", "b"], ["syntax_error"], ["x", "y"])


def test_rules_take_precedence_over_the_fallback():
    # a fallback that calls this exact text a syntax error: the rule still decides
    text = "RuntimeError: CUDA out of memory. Tried to allocate 2 MiB"
    fooled = LearnedFallback([text, "vault gate refused"], ["syntax_error", "permission_error"], ["x", "y"],
                             FallbackSettings(threshold=0.0, with_corpus=False))
    assert fooled.guess(text).reason == "syntax_error"
    m = classify(text, fallback=fooled)
    assert (m.reason, m.rule_id, m.fallback_confidence) == ("gpu_out_of_memory", "torch-cuda-oom", None)


def test_fallback_off_gives_the_rules_alone(tiny):
    m = classify("PreemptionWarning: spot node reclaimed", fallback=False)
    assert (m.reason, m.rule_id, m.fallback_confidence, m.fallback_neighbour) == (NO_SIGNATURE, None, None, None)


def test_same_inputs_same_output():
    texts = ["PreemptionWarning: node reclaimed", "flux parity fault", "nothing alike",
             "ModuleNotFoundError: No module named 'x'"]
    first = classify_many(texts, fallback=train_fallback(TINY, TINY_SETTINGS))
    second = classify_many(texts, fallback=train_fallback(TINY.iloc[::-1].iloc[::-1], TINY_SETTINGS))
    assert first == second
    assert classify_many(texts) == classify_many(texts)  # the default fallback, cached per process


def test_a_fallback_that_guesses_unknown_reasons_is_refused(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("""\
categories: {user: "u", infrastructure: "i", ai_engine: "a"}
no_signature: {label: none, category: unknown, retryable: true, definition: d}
reasons:
  syntax_error: {label: syntax error, category: user, retryable: false, definition: d}
  permission_error: {label: permission error, category: user, retryable: false, definition: d}
rules:
  - {id: syntax, reason: syntax_error, pattern: 'SyntaxError', source: s}
  - {id: permission, reason: permission_error, pattern: 'Permission denied', source: s}
""")
    rules = RuleSet(path)
    with pytest.raises(ValueError, match=r"the fallback guesses reasons that rules\.yaml does not define: "
                                         r"\['gpu_ecc_error', 'job_preempted'\]"):
        classify("anything", rules, fallback=train_fallback(TINY, TINY_SETTINGS))
    assert classify("anything", rules, fallback=False).reason == NO_SIGNATURE


def test_classify_dir_and_evaluation_mark_the_fallback_decisions(tmp_path, tiny):
    (tmp_path / "a.log").write_text("epoch 2\nPreemptionWarning: spot node reclaimed by the provider\n")
    (tmp_path / "b.log").write_text("SyntaxError: invalid syntax\n")
    got = classify_dir(tmp_path, fallback=tiny)
    assert list(got["reason"]) == ["job_preempted", "syntax_error"]
    assert list(got["rule_id"]) == [FALLBACK_RULE_ID, "python-syntax-error"]
    assert got["fallback_confidence"].notna().tolist() == [True, False]
    ev = evaluate_classifier(TINY.iloc[:2], fallback=tiny)
    assert ev.results["correct"].all() and (ev.results["rule_id"] == FALLBACK_RULE_ID).all()
    assert list(ev.results["fallback_neighbour"]) == ["p1", "p2"]


def test_leave_one_split_out_on_known_answers():
    # split a holds p1, e1, k1 and u1, split b p2, e2 and k2: each is classified by a fallback trained on the other
    cv = cross_validate_fallback(TINY, grid={"C": [100.0], "with_corpus": [False], "threshold": [0.0, 1.5]})
    cv = cv.set_index(["threshold", "split"])
    columns = ["messages", "rules_correct", "hybrid_correct", "fallback_decisions", "fallback_correct", "model_correct"]
    # u1 is rightly no signature to the rules; at threshold 0 the fallback guesses it too, wrongly
    assert list(cv.loc[(0.0, "a"), columns]) == [4, 1, 3, 4, 3, 3]
    assert list(cv.loc[(0.0, "b"), columns]) == [3, 0, 3, 3, 3, 3]
    # a threshold above any probability: the fallback never answers: the rules alone
    assert list(cv.loc[(1.5, "a"), ["hybrid_correct", "fallback_decisions", "model_correct"]]) == [1, 0, 3]
    assert list(cv.loc[(1.5, "b"), ["hybrid_correct", "fallback_decisions", "model_correct"]]) == [0, 0, 3]


def test_choosing_settings_takes_the_best_mean_then_the_model_then_the_higher_threshold_and_refine():
    def rows(C, corpus, threshold, right, model=(5, 5), refine=math.inf):
        return [{"C": C, "with_corpus": corpus, "threshold": threshold, "refine": refine, "split": s, "messages": 10,
                 "hybrid_correct": r, "model_correct": mr} for s, r, mr in zip("ab", right, model, strict=True)]
    cv = pd.DataFrame(rows(10.0, False, 0.1, [9, 9]) + rows(30.0, False, 0.1, [10, 8])
                      + rows(30.0, False, 0.3, [8, 10]) + rows(30.0, True, 0.5, [7, 7]))
    assert choose_fallback_settings(cv) == FallbackSettings(30.0, 0.3, False, math.inf)
    allowed = pd.Series({(10.0, False, 0.1, math.inf): True, (30.0, False, 0.1, math.inf): True,
                         (30.0, False, 0.3, math.inf): False, (30.0, True, 0.5, math.inf): True})
    assert choose_fallback_settings(cv, allowed) == FallbackSettings(10.0, 0.1, False, math.inf)  # grid order
    better_model = pd.DataFrame(rows(10.0, False, 0.1, [9, 9]) + rows(30.0, False, 0.1, [9, 9], model=(6, 6)))
    assert choose_fallback_settings(better_model) == FallbackSettings(30.0, 0.1, False, math.inf)
    with pytest.raises(ValueError, match="no allowed fallback setting"):
        choose_fallback_settings(cv, allowed & False)
    # refining a generic rule is taken only where it is right more often; on a tie, never refining wins
    refining = pd.DataFrame(rows(10.0, False, 0.1, [9, 9]) + rows(10.0, False, 0.1, [9, 10], refine=0.5)
                            + rows(10.0, False, 0.1, [9, 10], refine=0.9))
    assert choose_fallback_settings(refining) == FallbackSettings(10.0, 0.1, False, 0.9)
    tie = pd.DataFrame(rows(10.0, False, 0.1, [9, 9], refine=0.5) + rows(10.0, False, 0.1, [9, 9]))
    assert choose_fallback_settings(tie) == FallbackSettings(10.0, 0.1, False, math.inf)


def test_the_incumbent_settings_are_kept_unless_a_challenger_wins_by_the_margin():
    def rows(C, threshold, right):
        return [{"C": C, "with_corpus": True, "threshold": threshold, "refine": math.inf, "split": s, "messages": 10,
                 "hybrid_correct": r, "model_correct": 5} for s, r in zip("ab", right, strict=True)]
    incumbent = FallbackSettings(10.0, 0.1, True, math.inf)
    challenger = FallbackSettings(30.0, 0.3, True, math.inf)
    close = pd.DataFrame(rows(10.0, 0.1, [8, 8]) + rows(30.0, 0.3, [9, 9]))  # two messages ahead
    assert choose_fallback_settings(close) == challenger
    assert choose_fallback_settings(close, incumbent=incumbent, margin=3) == incumbent
    assert choose_fallback_settings(close, incumbent=incumbent, margin=2) == challenger
    clear = pd.DataFrame(rows(10.0, 0.1, [7, 8]) + rows(30.0, 0.3, [9, 9]))  # three ahead
    assert choose_fallback_settings(clear, incumbent=incumbent, margin=3) == challenger
    # an incumbent that is not allowed (or not in the grid) is no reason to keep it
    allowed = pd.Series({(10.0, True, 0.1, math.inf): False, (30.0, True, 0.3, math.inf): True})
    assert choose_fallback_settings(close, allowed, incumbent=incumbent, margin=3) == challenger
    assert choose_fallback_settings(close, incumbent=FallbackSettings(100.0, 0.1, True, math.inf)) == challenger


# A rule file with a generic rule ("Aborted" says how a job died, not why) behind a specific one, and labelled
# texts from which a fallback learns that "zeta kernel launch broke" before an abort is a CUDA failure.
GENERIC_RULES = """\
categories: {user: "u", infrastructure: "i", ai_engine: "a"}
no_signature: {label: none, category: unknown, retryable: true, definition: d}
reasons:
  gpu_out_of_memory: {label: gpu oom, category: user, retryable: false, definition: d}
  cuda_failure: {label: cuda failure, category: ai_engine, retryable: true, definition: d}
  core_dump: {label: core dump, category: ai_engine, retryable: false, definition: d}
rules:
  - {id: oom, reason: gpu_out_of_memory, pattern: 'out of memory', source: s}
  - {id: launch, reason: cuda_failure, pattern: 'unspecified launch failure', source: s}
  - {id: abort, reason: core_dump, pattern: 'Aborted', source: s, generic: true}
"""
REFINABLE = pd.DataFrame({
    "id": ["z1", "z2", "a1", "a2"],
    "text": ["zeta kernel launch broke on stream 1\nAborted", "zeta kernel launch broke on stream 2\nAborted",
             "assertion in reader\nAborted", "assertion in writer\nAborted"],
    "reason": ["cuda_failure", "cuda_failure", "core_dump", "core_dump"],
    "split": ["a", "b", "a", "b"], "source_url": ["u1", "u2", "u3", "u4"]})


def test_a_confident_guess_refines_a_generic_rule_and_names_it(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(GENERIC_RULES)
    rules = RuleSet(path)
    assert rules.generic_rules == {"abort"}
    model = train_fallback(REFINABLE, FallbackSettings(C=100.0, threshold=0.0, with_corpus=False, refine=0.55))
    m = classify("zeta kernel launch broke on stream 9\nAborted", rules, fallback=model)
    assert (m.reason, m.category, m.rule_id, m.refined_rule) == ("cuda_failure", "ai_engine", FALLBACK_RULE_ID, "abort")
    assert (m.matched_line, m.line_number, m.fallback_neighbour[0]) == ("Aborted", 2, "z")  # the rule's line is kept
    assert m.fallback_confidence >= 0.55
    # the model agrees with the generic rule: the rule stands
    m = classify("assertion in loader\nAborted", rules, fallback=model)
    assert (m.reason, m.rule_id, m.refined_rule, m.fallback_confidence) == ("core_dump", "abort", None, None)
    # a specific rule is never refined, and refine=inf never refines; nor do the rules alone
    fooled = train_fallback(REFINABLE.assign(text=[f"out of memory {i}" for i in range(4)]),
                            FallbackSettings(C=100.0, threshold=0.0, with_corpus=False, refine=0.0))
    assert classify("out of memory 0", rules, fallback=fooled).rule_id == "oom"
    never = train_fallback(REFINABLE, FallbackSettings(C=100.0, threshold=0.0, with_corpus=False, refine=math.inf))
    for fallback in (never, False):
        assert classify("zeta kernel launch broke on stream 9\nAborted", rules, fallback=fallback).rule_id == "abort"
    # leave-one-split-out counts the refinements: each zeta text refined rightly, the abort texts left alone
    cv = cross_validate_fallback(REFINABLE, rules, grid={"C": [100.0], "with_corpus": [False], "threshold": [0.0],
                                                         "refine": [0.55, math.inf]}).set_index(["refine", "split"])
    columns = ["rules_correct", "hybrid_correct", "refined", "refined_correct"]
    assert list(cv.loc[(0.55, "a"), columns]) == [1, 2, 1, 1]
    assert list(cv.loc[(math.inf, "a"), columns]) == [1, 1, 0, 0]


def test_a_rule_file_with_a_bad_generic_flag_is_refused(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(GENERIC_RULES.replace("generic: true", "generic: maybe"))
    with pytest.raises(ValueError,
                       match=r"rules\.yaml:\d+: rule 'abort': field 'generic' must be true or false, got 'maybe'"):
        RuleSet(path)


def test_cli_classify_logs_marks_guesses_and_can_turn_the_fallback_off(tmp_path):
    (tmp_path / "a.log").write_text("sky.exceptions.ResourcesUnavailableError: Cluster is preempted\n")
    (tmp_path / "b.log").write_text("SyntaxError: invalid syntax\n")
    # a failed cuDNN call that aborts: the generic native-abort rule fires, the fallback names the CUDA failure
    (tmp_path / "c.log").write_text("F tensorflow/core/kernels/conv_ops.cc:659] Check failed: "
                                    "stream->parent()->GetConvolveAlgorithms(&algorithms)\nAborted (core dumped)\n")
    default = subprocess.run([sys.executable, "-m", "dlcluster.cli", "classify-logs", str(tmp_path)],
                             capture_output=True, text=True)
    assert default.returncode == 0, default.stderr
    line_a = next(line for line in default.stdout.splitlines() if line.lstrip().startswith("a.log"))
    assert FALLBACK_RULE_ID in line_a and "like labelled message m" in line_a and "(probability " in line_a
    line_c = next(line for line in default.stdout.splitlines() if line.lstrip().startswith("c.log"))
    assert "cuda_failure" in line_c and "refines rule native-abort: Aborted (core dumped)" in line_c
    off = subprocess.run([sys.executable, "-m", "dlcluster.cli", "classify-logs", str(tmp_path), "--no-fallback"],
                         capture_output=True, text=True)
    assert off.returncode == 0, off.stderr
    line_a = next(line for line in off.stdout.splitlines() if line.lstrip().startswith("a.log"))
    assert "no_signature" in line_a and FALLBACK_RULE_ID not in off.stdout
    assert "python-syntax-error" in off.stdout and "python-syntax-error" in default.stdout
    assert "native-abort" in next(line for line in off.stdout.splitlines() if line.lstrip().startswith("c.log"))


# The rules' near-misses (tests/test_classify_rules.py): lines a healthy or unrelated job prints, which no rule
# matches on purpose. The fallback sees only their resemblance to labelled failures, and above its threshold it
# guesses: its known weakness, pinned here so that a change is noticed (README, "Round 6: a regression fallback").
# The regression guesses the first six (the nearest-neighbour fallback of round 5 declined the fifth and sixth).
@pytest.mark.parametrize("text, hybrid_reason, neighbour", [
    ("epoch 3 loss 0.41\nKilled the stale worker and retried", "cpu_out_of_memory", "m308"),
    ("OSError: [Errno 5] Input/output error", "model_checkpoint_error", "m431"),
    ("slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***",
     "job_preempted", "m135"),
    ("AttributeError: 'NoneType' object has no attribute 'shape'", "semantic_error", "m1185"),
    ("[[Node: save/RestoreV2 = RestoreV2[dtypes=[DT_FLOAT]]]", "model_checkpoint_error", "m935"),
    ("best_val_loss = inf", "model_diverged", "m358"),
    # healthy progress lines before an error no rule knows: the word "loss" pulls the guess to a diverged model
    # (probability 0.90); the error line alone stays without signature (0.19)
    ("epoch 1 loss 0.3\nepoch 2 loss 0.2\nValueError: shapes (3,) and (4,) not aligned\n", "model_diverged", "m1108"),
    ("ValueError: shapes (3,) and (4,) not aligned", NO_SIGNATURE, "m219"),
])
def test_the_default_fallback_on_the_rules_near_misses(text, hybrid_reason, neighbour):
    assert classify(text, fallback=False).reason == NO_SIGNATURE
    m = classify(text)
    assert (m.reason, m.fallback_neighbour) == (hybrid_reason, neighbour)
    assert (m.rule_id == FALLBACK_RULE_ID) == (hybrid_reason != NO_SIGNATURE)


def _count_trainings(monkeypatch) -> list:
    """Record the fallbacks trained from now on (each call's arguments and the model), each trained as before."""
    from dlcluster.analysis import classify as cl

    trained = []
    real_model = cl.LearnedFallback

    def counted(*args, **kwargs):
        model = real_model(*args, **kwargs)
        trained.append((args, kwargs, model))
        return model

    monkeypatch.setattr(cl, "LearnedFallback", counted)
    return trained


def test_the_default_fallback_is_trained_once_and_read_back_the_same(tmp_path, monkeypatch):
    """Trained once per installation (kept in the cache folder) on the measured messages and the corpus with the
    chosen settings, then read back: the same guesses as the model trained in this process, and no second
    training."""
    from dlcluster.analysis import classify as cl
    from dlcluster.paths import CACHE_DIR_ENV

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    trained = _count_trainings(monkeypatch)
    cl.default_fallback.cache_clear()
    try:
        first = cl.default_fallback()
        cl.default_fallback.cache_clear()   # as in another process
        again = cl.default_fallback()
    finally:
        cl.default_fallback.cache_clear()
    assert len(trained) == 1 and again is not first
    assert len(list((tmp_path / "fallback-cv").glob("default-*.pickle"))) == 1
    (texts, reasons, ids, settings), _, here = trained[0]
    assert [texts, reasons, ids] == list(cl._training_set(cl.measured_messages(), True)) and len(texts) > 1000
    assert settings == FallbackSettings() and settings.with_corpus
    probes = ["CUDA out of memory. Tried to allocate 2.00 GiB", "best_val_loss = inf", "Killed the stale worker"]
    for model in (first, again):   # each read back from the cache folder
        assert [(g.best, g.neighbour) for g in model.guess_many(probes)] == [(g.best, g.neighbour) for g in
                                                                             here.guess_many(probes)]
        assert [g.confidence for g in model.guess_many(probes)] == pytest.approx(
            [g.confidence for g in here.guess_many(probes)], abs=1e-12)


def test_the_cross_validation_reads_its_fits_back_from_the_cache(tmp_path, monkeypatch):
    """Notebook 04 and the tests cross-validate the same fits: a second run trains nothing and gives the same
    table; another training set is another fit."""
    from dlcluster.analysis import classify as cl
    from dlcluster.paths import CACHE_DIR_ENV

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("DLCLUSTER_WORKERS", "1")   # the fits in this process, where they can be counted
    messages = cl.measured_messages()
    messages = messages[messages["split"].isin(["heldout5", "heldout6"])]
    grid = {"C": [10.0], "with_corpus": [False], "threshold": [0.3]}
    trained = _count_trainings(monkeypatch)
    first = cl.cross_validate_fallback(messages, grid=grid)
    assert len(trained) == 2 and len(list((tmp_path / "fallback-cv").glob("*.json"))) == 2   # one fit per split
    again = cl.cross_validate_fallback(messages, grid=grid)
    assert len(trained) == 2
    pd.testing.assert_frame_equal(again, first)
    cl.cross_validate_fallback(messages.iloc[1:], grid=grid)   # one message fewer: both fits are new
    assert len(trained) == 4


def test_the_cross_validation_is_the_same_on_one_core_or_two_and_with_shared_features(tmp_path, monkeypatch):
    """The folds run side by side and the settings that differ only in C share one TF-IDF fit: neither changes a
    guess. Two Cs on two folds, fitted in two processes, against each fallback trained on its own, here."""
    from dlcluster.analysis import classify as cl
    from dlcluster.paths import CACHE_DIR_ENV

    messages = cl.measured_messages()
    messages = messages[messages["split"].isin(["heldout5", "heldout6"])]
    grid = {"C": [1.0, 30.0], "with_corpus": [False], "threshold": [0.0, 0.5], "refine": [0.7]}
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "two"))
    monkeypatch.setenv("DLCLUSTER_WORKERS", "2")
    table = cl.cross_validate_fallback(messages, grid=grid)
    assert len(table) == 2 * 2 * 2
    for split in ("heldout5", "heldout6"):
        held, training = messages[messages["split"] == split], messages[messages["split"] != split]
        cached = cl._out_of_fold_guesses(training, held, grid["C"], False)   # read back: the workers' fits
        for C in grid["C"]:
            alone = cl.train_fallback(training, FallbackSettings(C, 0.0, False)).guess_many(list(held["text"]))
            assert [(g.best, g.neighbour) for g in cached[C]] == [(g.best, g.neighbour) for g in alone]
            assert [g.confidence for g in cached[C]] == pytest.approx([g.confidence for g in alone], abs=1e-9)
            rows = table[(table["C"] == C) & (table["split"] == split)]
            assert (rows["model_correct"] == sum(g.best == t for g, t in zip(alone, held["reason"], strict=True))).all()
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "one"))
    monkeypatch.setenv("DLCLUSTER_WORKERS", "1")
    pd.testing.assert_frame_equal(cl.cross_validate_fallback(messages, grid=grid), table)


def test_out_of_fold_reasons_are_what_classify_many_answers(tmp_path, monkeypatch):
    """Notebook 04's second-annotator comparison reads the cross-validation's fits instead of training again: the
    reasons are those of rules + a fallback trained on the other splits, as :func:`classify_many` gives them
    with the default settings."""
    from dlcluster.analysis import classify as cl
    from dlcluster.paths import CACHE_DIR_ENV

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    messages = cl.measured_messages()
    messages = messages[messages["split"].isin(["heldout5", "heldout6", "heldout7"])]
    part = messages[messages["split"] == "heldout7"]
    answers = classify_many(list(part["text"]), fallback=train_fallback(messages[messages["split"] != "heldout7"]))
    reasons = cl.out_of_fold_reasons(messages, "heldout7")
    assert list(reasons.index) == list(part["id"])
    assert list(reasons) == [m.reason for m in answers]
    assert any(m.rule_id == FALLBACK_RULE_ID for m in answers)   # the fallback decided some: not the rules alone
