"""Per-epoch training curves in one tidy schema, and loaders that produce it.

The epoch-effectiveness analysis (section 4.1 of the paper) needs, per job, the
sequence of a metric over its epochs and, where known, the time each epoch
cost. Four sources are supported:

- the real measured validation curves of the Pollux artifact
  (``data/external/learning_curves/<model>/validation-<batch size>.csv``),
- the project's own corpus of real training runs (``data/corpus/``, made by
  ``scripts/make_training_corpus.py``),
- CSV logs (tidy, or wide like Keras' ``CSVLogger``: one column per metric),
- TensorBoard event files, read by a small self-contained TFRecord/protobuf
  reader (no TensorFlow or tensorboard package needed).

Every loader returns :class:`LoadedCurves`: the tidy table plus a table of
the rows it dropped and why (nothing is dropped silently).

Tidy schema (one row per curve point; a curve is one (source, job, metric)):
see :data:`CURVE_COLUMNS`.

Modules: :mod:`.tidy` (schema, checks), one per source (:mod:`.pollux`,
:mod:`.corpus`, :mod:`.csvlog`, :mod:`.tensorboard`). A new source gets a
module of its own returning :class:`LoadedCurves` (copy :mod:`.csvlog`) and a
spec in :func:`load_curve_source`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .corpus import corpus_path, corpus_runs_path, load_corpus, load_corpus_runs  # noqa: F401
from .csvlog import TIDY_NUMERIC, TIDY_REQUIRED, load_csv_curves  # noqa: F401
from .pollux import (  # noqa: F401
    POLLUX_COLUMNS,
    POLLUX_METRICS,
    load_pollux_curves,
    pollux_curves_dir,
)
from .tensorboard import (  # noqa: F401
    crc32c,
    load_tensorboard_curves,
    masked_crc32c,
    read_tensorboard_scalars,
    read_tfrecords,
)
from .tidy import (  # noqa: F401
    CURVE_COLUMNS,
    CURVE_KEY,
    DIRECTIONS,
    DROPPED_COLUMNS,
    OUTCOMES,
    SECONDS_KINDS,
    LoadedCurves,
    concat_curves,
    direction_for,
    drop_short_curves,
    drop_table,
    empty_curves,
    finite_or_nan,
    guess_direction,
    keep_metric,
    read_checked_csv,
    sample_jobs,
    typed_curves,
    validate_curves,
    without_curves,
)


def load_curve_source(spec: str, curves_dir: str | Path | None = None) -> LoadedCurves:
    """Load one source named by a short spec, as the notebook's ``curve_sources`` lists them.

    ``"pollux"`` (the real Pollux curves, from ``curves_dir`` if given),
    ``"corpus"`` (this project's training runs), ``"corpus:<path>"``,
    ``"csv:<path>"`` or ``"tensorboard:<logdir>"``. CSV and TensorBoard
    sources infer metric directions from metric names.
    """
    kind, _, arg = spec.partition(":")
    if kind == "pollux":
        return load_pollux_curves(arg or curves_dir)
    if kind == "corpus":
        return load_corpus(arg or None)
    if kind == "csv" and arg:
        return load_csv_curves(os.path.expanduser(arg))
    if kind == "tensorboard" and arg:
        return load_tensorboard_curves(os.path.expanduser(arg))
    raise ValueError(f"curve source {spec!r}: expected 'pollux', 'corpus[:path]', 'csv:<path>' "
                     f"or 'tensorboard:<logdir>'")
