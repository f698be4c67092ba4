"""A learned fallback for failure texts that no rule of ``failure_rules.yaml`` matches.

Five blind measurements (data/failure_messages/README.md) show the rules settle near 80% on
failures as users post them, most misses being wording families no rule knows, left as "no
signature". The fallback guesses those from the hand-labelled real messages with a logistic
regression (one per reason) over TF-IDF features of each text's **words** (pairs included: ``loss nan``,
``heap space``) and **character n-grams** (robust to paths, numbers, typos and framework prefixes).
A regression weighs every labelled message of a reason at once, where the nearest-neighbour
fallback it replaced (round 5) followed the one most similar message. Trained on the other splits,
it names the reason of 89.4% of a split's messages on average against 82.9% (README, "Round 6").
Below ``threshold`` (the model's probability of its best reason) the text stays "no signature":
a confident guess beats no signature, a wild one does not. Each guess names, as evidence, the
labelled message of the guessed reason that the text most resembles.
Rules take precedence; this module answers where they are silent and, since round 7, may refine a
*generic* rule's answer (a native abort, a CUDA error: how a job died, not why) where it is confident
(``FallbackSettings.refine``) of a more specific reason (``dlcluster.analysis.classify``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import FeatureUnion

FALLBACK_RULE_ID = "fallback:learned"


@dataclass(frozen=True)
class FallbackSettings:
    """The fallback's model settings; the defaults were chosen by leave-one-split-out cross-validation
    over the labelled splits, among the settings that keep every corpus log right (data/failure_messages/README.md,
    "Round 6: a regression fallback", "Round 7", "Round 8", "Round 9": re-chosen over the ten splits once heldout9
    was measured, since round 8's, trained on all 1,110 messages, guess a reason for a corpus log no reader can
    attribute)."""

    C: float = 100.0  # inverse strength of the regressions' L2 penalty
    threshold: float = 0.5  # least probability of the best reason for a guess where no rule fires
    with_corpus: bool = True  # also train on the project's failure-log corpus (data/failure_logs/)
    refine: float = 0.7  # least probability of another reason to replace a generic rule's (inf: never)


@dataclass(frozen=True)
class Guess:
    """The fallback's answer for one text: a reason, or None below the threshold, with its evidence."""

    reason: str | None
    confidence: float  # the model's probability of its best reason, 0..1
    neighbour: str  # id of the labelled text of that reason most similar to this one (character n-grams)
    best: str  # the most probable reason, whatever its probability


def _features() -> FeatureUnion:
    words = TfidfVectorizer(analyzer="word", token_pattern=r"[A-Za-z_][A-Za-z_]+", ngram_range=(1, 2),
                            sublinear_tf=True, lowercase=True)
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True, lowercase=True)
    return FeatureUnion([("words", words), ("chars", chars)])


def fit_features(texts: list[str]) -> tuple:
    """The TF-IDF vectorizers fitted to ``texts`` and the texts' feature matrix."""
    union = _features()
    return union, union.fit_transform(texts)


class LearnedFallback:
    """A logistic regression over word and character n-gram TF-IDF of labelled texts."""

    def __init__(self, texts: list[str], reasons: list[str], ids: list[str],
                 settings: FallbackSettings = FallbackSettings(), features: tuple | None = None):
        """``features``: :func:`fit_features` of these ``texts``, for fallbacks that differ only in their settings
        (the TF-IDF does not depend on them: the cross-validation fits it once per training set)."""
        if not len(texts) == len(reasons) == len(ids):
            raise ValueError(f"texts, reasons and ids differ in length ({len(texts)}, {len(reasons)}, {len(ids)})")
        if len(set(reasons)) < 2:
            raise ValueError(f"the fallback needs labelled texts of at least two reasons to train on, "
                             f"got {sorted(set(reasons))}")
        self.settings = settings
        self.reasons = np.asarray(reasons, dtype=object)
        self.ids = np.asarray(ids, dtype=object)
        self._features, train = fit_features(texts) if features is None else features
        # one binary regression per reason (liblinear): as accurate out of fold as a multinomial one, 5x faster;
        # solved in its dual (coordinate descent), as scikit-learn advises where features (~75,000 n-grams)
        # outnumber texts (~1,000): the same optimum, 3-4x faster (max_iter: C=100 needs more than 100 passes)
        self._model = OneVsRestClassifier(LogisticRegression(C=settings.C, solver="liblinear", dual=True,
                                                             max_iter=1000, random_state=0)
                                          ).fit(train, self.reasons)
        self._n_word_features = len(self._features.transformer_list[0][1].vocabulary_)
        self._train_chars = self._chars(train)

    def _chars(self, features):
        """The character n-gram block of the joined features.

        Its rows are L2-normalised, so a dot product is a cosine."""
        return features[:, self._n_word_features:]

    @property
    def classes(self) -> set[str]:
        return set(self.reasons)

    def guess_many(self, texts: list[str]) -> list[Guess]:
        if not texts:
            return []
        features = self._features.transform(texts)
        classes, probs = self._model.classes_, self._model.predict_proba(features)
        best = probs.argmax(axis=1)  # ties: the first reason in sorted order, so the answer is deterministic
        similar = (self._chars(features) @ self._train_chars.T).toarray()
        out = []
        for row, k in enumerate(best):
            reason = str(classes[k])
            of_reason = np.flatnonzero(self.reasons == reason)
            neighbour = of_reason[similar[row, of_reason].argmax()]  # ties: the first in training order
            confidence = float(probs[row, k])
            out.append(Guess(reason if confidence >= self.settings.threshold else None, confidence,
                             str(self.ids[neighbour]), reason))
        return out

    def guess(self, text: str) -> Guess:
        return self.guess_many([text])[0]
