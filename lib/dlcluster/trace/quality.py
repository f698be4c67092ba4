"""Data-quality accounting: every input row is either loaded or quarantined with a reason.

For each input file the report keeps ``rows_read``, ``rows_loaded`` and a count
per quarantine reason, and enforces ``rows_read == rows_loaded + rows_quarantined``.
Loaded rows that needed a repair or carry a caveat (a missing attempt end, an
ambiguous daylight-saving time, an empty cell) are counted as *flags* with a
reason, so nothing is changed silently either.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import islice
from typing import Iterable

import pandas as pd

MAX_EXAMPLES = 5
UTF8_BOM = b"\xef\xbb\xbf"   # written first by some Windows tools; accepted and skipped


class TraceFormatError(ValueError):
    """Input that cannot be read at all (wrong header, not JSON, ...). Names file and place."""


def not_utf8(file: str, data: bytes, exc: UnicodeDecodeError, offset: int = 0, first_line: int = 1,
             context: str = "") -> TraceFormatError:
    """The error for bytes that are not UTF-8: ``data`` starts at byte ``offset`` (line ``first_line``) of ``file``."""
    line = first_line + data.count(b"\n", 0, exc.start)
    return TraceFormatError(f"{file}: line {line}, byte offset {offset + exc.start}: byte "
                            f"0x{data[exc.start]:02x} is not valid UTF-8{context} (save the file as UTF-8)")


@dataclass
class _FileAccount:
    unit: str = "rows"
    read: int = 0
    loaded: int = 0
    quarantined: Counter = field(default_factory=Counter)
    flags: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=lambda: defaultdict(list))


class QualityReport:
    """Per-file counts of rows read, loaded, quarantined (by reason) and flagged (by reason)."""

    def __init__(self):
        self._files: dict[str, _FileAccount] = {}

    def _file(self, file: str, unit: str = "rows") -> _FileAccount:
        if file not in self._files:
            self._files[file] = _FileAccount(unit=unit)
        return self._files[file]

    def read(self, file: str, n: int = 1, unit: str = "rows") -> None:
        self._file(file, unit).read += int(n)

    def loaded(self, file: str, n: int = 1) -> None:
        self._file(file).loaded += int(n)

    def quarantine(self, file: str, reason: str, n: int = 1, where: str | None = None) -> None:
        """Count ``n`` rows as quarantined; ``n=0`` with ``where`` only records an example."""
        acc = self._file(file)
        if n:
            acc.quarantined[reason] += int(n)
        if where is not None and len(acc.examples[reason]) < MAX_EXAMPLES:
            acc.examples[reason].append(where)

    def flag(self, file: str, reason: str, n: int = 1, where: str | None = None) -> None:
        if n == 0:
            return
        acc = self._file(file)
        acc.flags[reason] += int(n)
        if where is not None and len(acc.examples[reason]) < MAX_EXAMPLES:
            acc.examples[reason].append(where)

    def flag_many(self, file: str, reason: str, n: int, examples: Iterable[str]) -> None:
        """Flag ``n`` rows, keeping the first few of ``examples`` (read lazily) as where they are."""
        if n == 0:
            return
        acc = self._file(file)
        acc.flags[reason] += int(n)
        acc.examples[reason].extend(islice(examples, max(0, MAX_EXAMPLES - len(acc.examples[reason]))))

    def merge(self, other: "QualityReport") -> None:
        for name, acc in other._files.items():
            mine = self._file(name, acc.unit)
            mine.read += acc.read
            mine.loaded += acc.loaded
            mine.quarantined.update(acc.quarantined)
            mine.flags.update(acc.flags)
            for reason, ex in acc.examples.items():
                mine.examples[reason].extend(ex[: MAX_EXAMPLES - len(mine.examples[reason])])

    def check(self) -> None:
        """Raise if any file's rows do not add up (a loader bug, never the user's)."""
        for name, acc in self._files.items():
            total = acc.loaded + sum(acc.quarantined.values())
            if acc.read != total:
                raise AssertionError(
                    f"data-quality accounting broken for {name}: read {acc.read} != "
                    f"loaded {acc.loaded} + quarantined {sum(acc.quarantined.values())}"
                )

    def summary(self) -> pd.DataFrame:
        """One row per file: rows read, loaded, quarantined, flagged."""
        rows = [{"file": n, "unit": a.unit, "rows_read": a.read, "rows_loaded": a.loaded,
                 "rows_quarantined": sum(a.quarantined.values()), "rows_flagged": sum(a.flags.values())}
                for n, a in self._files.items()]
        return pd.DataFrame(rows, columns=["file", "unit", "rows_read", "rows_loaded",
                                           "rows_quarantined", "rows_flagged"])

    def to_frame(self) -> pd.DataFrame:
        """Long form: one row per (file, kind, reason) with a count and examples of where."""
        rows = []
        for name, acc in self._files.items():
            for kind, counter in (("quarantined", acc.quarantined), ("flagged", acc.flags)):
                for reason, count in sorted(counter.items()):
                    if count == 0:
                        continue
                    rows.append({"file": name, "kind": kind, "reason": reason, "count": count,
                                 "examples": "; ".join(acc.examples.get(reason, []))})
        return pd.DataFrame(rows, columns=["file", "kind", "reason", "count", "examples"])

    def counts(self, file: str) -> dict:
        acc = self._files[file]
        return {"read": acc.read, "loaded": acc.loaded, "quarantined": dict(acc.quarantined),
                "flags": dict(acc.flags)}

    @property
    def files(self) -> list[str]:
        return list(self._files)

    # Persistence: the public tables carry their report as two small tables.
    def to_tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return self.summary(), self.to_frame()

    @classmethod
    def from_tables(cls, summary: pd.DataFrame, reasons: pd.DataFrame) -> "QualityReport":
        rep = cls()
        for row in summary.itertuples(index=False):
            acc = rep._file(row.file, row.unit)
            acc.read, acc.loaded = int(row.rows_read), int(row.rows_loaded)
        for row in reasons.itertuples(index=False):
            acc = rep._file(row.file)
            target = acc.quarantined if row.kind == "quarantined" else acc.flags
            target[row.reason] += int(row[3])  # the "count" column
            if row.examples:
                acc.examples[row.reason] = row.examples.split("; ")
        return rep

    def __repr__(self) -> str:
        return f"QualityReport({len(self._files)} files)\n{self.summary().to_string(index=False)}"
