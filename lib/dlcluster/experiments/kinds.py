"""What a result rests on, written into its sentence.

Every result of notebook 06 is one of three kinds: **mechanism** (it emerged from the simulation), **by construction**
(the setup guarantees it) or **assumption** (it rests on an assumed input, such as interference scaled beyond the
measured). Only a mechanism result is worded as a finding; the others carry their tag and why, so that a sentence
lifted out of its section still says what it rests on.
"""

from __future__ import annotations

MECHANISM, BY_CONSTRUCTION, ASSUMPTION = "mechanism", "by construction", "assumption"
#: The tag vocabulary of every result sentence and of the implications table (:mod:`.implications`).
KINDS = (MECHANISM, BY_CONSTRUCTION, ASSUMPTION)


def kind_tag(kind: str, because: str = "") -> str:
    """'[mechanism]', or '[by construction, not a finding: <because>]' / '[assumption, not a finding: <because>]'.

    A kind other than mechanism needs its reason: the tag must say what the setup or the assumption did."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == MECHANISM:
        return f"[{MECHANISM}]"
    if not because.strip():
        raise ValueError(f"a result tagged {kind!r} needs its reason (what the setup or the assumed input did)")
    return f"[{kind}, not a finding: {because.strip()}]"


def tagged(kind: str, sentence: str, because: str = "") -> str:
    """``sentence`` with its :func:`kind_tag` in front."""
    return f"{kind_tag(kind, because)} {sentence}"


def load_kind(load_setting: str) -> tuple[str, str]:
    """What a result at a load setting rests on: the real arrivals ('real') are the replay's own, any other
    load (a scaled or a calibrated one) compresses them, an input the record does not show."""
    if load_setting == "real":
        return MECHANISM, ""
    return ASSUMPTION, "the arrivals are scaled to a load the record does not show (a sensitivity)"
