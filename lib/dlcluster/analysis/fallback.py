"""A learned fallback for failure texts that no rule of ``failure_rules.yaml`` matches.

Four blind measurements (data/failure_messages/README.md) show the rules settle near 80% on
failures as users post them, most misses being wording families no rule knows, left as "no
signature". The fallback guesses those from the hand-labelled real messages: each text becomes a
TF-IDF vector of its character n-grams (robust to paths, numbers and typos), and the guess is the
reason of the **nearest labelled message** by cosine similarity. Below ``threshold`` the text stays
"no signature": a confident guess beats no signature, a wild one does not. Nearest neighbours keep
every decision explainable (it names the message it resembles) and train in well under a second.
Rules always take precedence; this module only answers where they are silent
(``dlcluster.analysis.classify``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

FALLBACK_RULE_ID = "fallback:char-ngram"


@dataclass(frozen=True)
class FallbackSettings:
    """The fallback's model settings; the defaults were chosen by leave-one-split-out cross-validation
    over the five labelled splits (data/failure_messages/README.md, "A learned fallback (round 5)")."""

    ngram_range: tuple[int, int] = (3, 5)
    threshold: float = 0.2  # least cosine similarity to the nearest labelled text for a guess
    with_corpus: bool = False  # also train on the project's failure-log corpus (data/failure_logs/)


@dataclass(frozen=True)
class Guess:
    """The fallback's answer for one text: a reason, or None below the threshold, with its evidence."""

    reason: str | None
    similarity: float  # cosine similarity to the nearest labelled text, 0..1
    neighbour: str  # id of that text (a message id, or a corpus log's file name)


class NearestMessageFallback:
    """Reason of the most similar labelled text (character n-gram TF-IDF, cosine), if similar enough."""

    def __init__(self, texts: list[str], reasons: list[str], ids: list[str],
                 settings: FallbackSettings = FallbackSettings()):
        if not texts:
            raise ValueError("the fallback needs at least one labelled text to train on")
        if not len(texts) == len(reasons) == len(ids):
            raise ValueError(f"texts, reasons and ids differ in length ({len(texts)}, {len(reasons)}, {len(ids)})")
        self.settings = settings
        self.reasons = np.asarray(reasons, dtype=object)
        self.ids = np.asarray(ids, dtype=object)
        self._vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=settings.ngram_range,
                                           sublinear_tf=True, lowercase=True)
        self._train = self._vectorizer.fit_transform(texts)  # rows are L2-normalised: dot product = cosine

    @property
    def classes(self) -> set[str]:
        return set(self.reasons)

    def similarities(self, texts: list[str]) -> np.ndarray:
        """Cosine similarity of each text (rows) to each training text (columns)."""
        return (self._vectorizer.transform(texts) @ self._train.T).toarray()

    def guess_many(self, texts: list[str]) -> list[Guess]:
        if not texts:
            return []
        sims = self.similarities(texts)
        nearest = sims.argmax(axis=1)  # ties: the first training text, so the answer is deterministic
        out = []
        for row, j in enumerate(nearest):
            similarity = float(sims[row, j])
            reason = self.reasons[j] if similarity >= self.settings.threshold else None
            out.append(Guess(reason, similarity, str(self.ids[j])))
        return out

    def guess(self, text: str) -> Guess:
        return self.guess_many([text])[0]
