"""Orders that do not depend on the CPU: how the library breaks ties.

numpy's default sort (``kind="quicksort"``) runs SIMD kernels on AVX2 and AVX-512 machines whose order of equal
keys differs from the scalar path, and pandas' ``sort_values`` and ``value_counts`` go through it. So every sort
in the library is ``kind="stable"`` with an explicit secondary key where ties can occur (``tests/
test_sort_stability.py`` checks the source), and a float that decides a discrete outcome is rounded to a stated
precision first (:func:`decision_value`).
"""

from __future__ import annotations

import pandas as pd

#: Significant digits a float keeps before it decides a discrete outcome (a best trial, a best arm, a tie, a
#: threshold): far more than any difference the study reports, fewer than the ~16 digits in which SIMD paths differ.
DECISION_DIGITS = 12


def decision_value(value: float) -> float:
    """``value`` rounded to :data:`DECISION_DIGITS` significant digits (NaN and infinities unchanged)."""
    return float(f"{float(value):.{DECISION_DIGITS}g}")


def counts_desc(values: pd.Series) -> pd.Series:
    """``values.value_counts()`` with equal counts in the order of their value: most frequent first."""
    counts = values.value_counts(sort=False)
    frame = pd.DataFrame({"value": counts.index, "count": counts.to_numpy()})
    frame = frame.sort_values(["count", "value"], ascending=[False, True], kind="stable")
    return pd.Series(frame["count"].to_numpy(), index=pd.Index(frame["value"].to_numpy(), name=counts.index.name),
                     name=counts.name)
