"""The project's own corpus of real training runs (``data/corpus``, made by ``make corpus``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...paths import data_dir
from .csvlog import load_csv_curves
from .tidy import LoadedCurves


def corpus_path() -> Path:
    return data_dir() / "corpus" / "training_runs.csv.gz"


def corpus_runs_path() -> Path:
    return data_dir() / "corpus" / "training_runs_jobs.csv"


def load_corpus(path: str | Path | None = None) -> LoadedCurves:
    """The project's corpus of real CPU training runs (tidy CSV, see data/corpus/README.md)."""
    return load_csv_curves(Path(path) if path is not None else corpus_path())


def load_corpus_runs(path: str | Path | None = None) -> pd.DataFrame:
    """One row per corpus run: its configuration, planned vs run epochs and outcome."""
    return pd.read_csv(Path(path) if path is not None else corpus_runs_path())
