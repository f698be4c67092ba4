"""What the replay is called: "validated" only when every held-out target is met, the count read from the results.

Notebook 05 holds the calibrated replay against its held-out targets
(:func:`dlcluster.validation.scorecard.scorecard`). Every notebook that draws on the replay names it with
:func:`replay_name`, from those same held-out figures (the cached calibration's ``held_out``, or notebook 05's
``results.json`` keys ``validation.heldout.<figure>``), never with a typed word or count.
"""

from __future__ import annotations

import pandas as pd

HELD_OUT_PREFIX = "validation.heldout."


def held_out_card(figures: dict) -> pd.DataFrame:
    """The held-out scorecard (one row per target, with ``met``) from the held-out figures, given either as the
    calibration's ``held_out`` mapping or as results.json keys ``validation.heldout.<figure>``."""
    from ..validation.scorecard import scorecard

    held = {key.removeprefix(HELD_OUT_PREFIX): value for key, value in figures.items()
            if not key.startswith("validation.") or key.startswith(HELD_OUT_PREFIX)}
    return scorecard(held)


def targets_met(figures: dict) -> tuple[int, int]:
    """(held-out targets met, targets) of the replay."""
    card = held_out_card(figures)
    return int(card["met"].sum()), len(card)


def replay_name(figures: dict) -> str:
    """'validated replay' when every held-out target is met, else 'calibrated replay (k of n held-out targets
    met)'."""
    met, total = targets_met(figures)
    return "validated replay" if met == total else f"calibrated replay ({met} of {total} held-out targets met)"


def replay_data_label(figures: dict, jobs: int, what: str = "") -> str:
    """The line under every simulated figure: 'SIMULATED calibrated replay (1 of 6 held-out targets met) of 111,549
    real Philly jobs (RFold, every status, at the real arrival rate)' + ``what``; the parameters go in a table."""
    return (f"SIMULATED {replay_name(figures)} of {jobs:,} real Philly jobs (RFold, every status, at the real "
            f"arrival rate; notebook 05)" + (f"; {what}" if what else ""))
