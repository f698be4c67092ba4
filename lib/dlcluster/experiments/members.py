"""The replays the data allow (issue 48): the ensemble each of Section 5's implications is answered on.

An answer is a finding only if it holds on every replay the public data cannot tell apart from the calibrated one
(:mod:`.ensemble` says *supported*, *contradicted* or *depends on X*). The members, each named ``choice value`` so
that :func:`.ensemble.member_choice` reads the choice that flips an answer:

* ``calibrated``: notebook 05's calibrated replay (the main sweep);
* ``slowdown <x>``: the replay with the spread slowdown at each end of its measured range: the smallest and largest of
  the six models' median one-server / multi-server step-time ratios (``learning_curves/*/placements.csv``; the
  replay's own is their median), within and across racks alike as the default model takes it;
* ``VC and latency draw <k>``: the calibrated parameters on another draw of the VCs that no data name for a job and
  of the scheduler latency (seed ``k`` for both; the calibration drew seed 0);
* ``placement: <placement>``: the best trial of the calibration's search with another placement (placement rule and
  GPU-type pools) that came as close to the placement constraint as the calibration allows in one step
  (:data:`dlcluster.validation.search.VIOLATION_STEP` of the servers-spanned KS and one-server share gaps on the fit
  span): the placements the data allow as well as the calibrated one, up to ``placements`` of them, by objective.

Each member is a :class:`.common.CalibratedReplay` with ``member`` set; :func:`.common.replay_block_inputs` builds its
inputs (:func:`apply_member`). In notebook 06, after the main sweep ``table``::

    members = E.ensemble_members(calibration)
    cells = E.ensemble_cells(spec, trace, fingerprint, replicates, default_relax_s, str(cache), scenarios, members)
    member_rows = E.with_arms(run_sweep(cells, E.run_cell, same_as=E.shared_simulations(cells), **sweep))
    answers, per_member = E.ensemble_implications(table, member_rows, members, main_load, philly_arm, REPLICATES,
                                                  fitted_earliest_rtf_s, RETRY_PRESETS["prerun"].prerun_s)
    E.forest_plot(answers)   # one panel per implication; E.member_table(calibration, members): what each changes
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

CALIBRATED = "calibrated"
_SLOWDOWN = re.compile(r"^slowdown (?P<x>[0-9.]+)$")
_DRAW = re.compile(r"^VC and latency draw (?P<k>\d+)$")
_PLACEMENT = "placement: "
#: the placement axes a placement member differs in (the calibration's search space names them)
PLACEMENT_AXES = ("placement", "gpu_pools")
#: how a placement member that uses GPU-type pools ends its name (such a member runs no migrating arm)
POOLED_SUFFIX = " + GPU-type pools"
PLACEMENT_WORDS = {"best_fit": "best fit", "most_free": "spreading (most free)", "packed": "Philly's packing"}


def is_draw(name: str) -> bool:
    """Whether member ``name`` is another VC and latency draw ('VC and latency draw <k>'): a whole run of the same
    replay under other draws, which the main answers' intervals combine (:func:`.ensemble.draw_runs`)."""
    return _DRAW.match(str(name)) is not None


def slowdown_ends() -> tuple[float, float]:
    """The smallest and largest per-model spread factor of the measured step times (the default model's inputs)."""
    from ..sim.slowdown import spread_factor_from_placements

    _, per_model = spread_factor_from_placements()
    values = sorted(per_model.values())
    return round(values[0], 2), round(values[-1], 2)


def placement_name(fields: dict) -> str:
    """'placement: best fit + GPU-type pools' from a trial's placement axes."""
    words = PLACEMENT_WORDS.get(str(fields["placement"]), str(fields["placement"]))
    return _PLACEMENT + words + (POOLED_SUFFIX if bool(fields.get("gpu_pools")) else ", one pool")


def placement_variants(calibration, limit: int = 1) -> dict[str, dict]:
    """Trials of the calibration's search whose placement differs from the calibrated one and whose placement
    violation steps to the smallest step of any trial (:func:`dlcluster.validation.search.stepped_violation`, at
    most one :data:`~dlcluster.validation.search.VIOLATION_STEP`): the best by objective of each placement, up to
    ``limit`` of them. ``{member name: the trial's search-space fields}``."""
    from ..validation.search import VIOLATION_STEP, stepped_violation

    trials = calibration.trials
    if trials is None or not len(trials) or "violation" not in trials.columns:
        return {}
    own = tuple(getattr(calibration.params, a) for a in PLACEMENT_AXES)
    steps = trials["violation"].map(stepped_violation)
    allowed = trials[steps <= max(float(steps.min()), VIOLATION_STEP)].copy()
    allowed["_combo"] = [tuple(r[a] for a in PLACEMENT_AXES) for _, r in allowed.iterrows()]
    allowed = allowed[[c != own for c in allowed["_combo"]]]
    allowed = allowed.sort_values(["objective", "trial"], kind="stable").drop_duplicates("_combo")
    space = [c for c in trials.columns if hasattr(calibration.params, c)]
    out = {}
    for _, row in allowed.head(limit).iterrows():
        fields = {c: _plain(row[c]) for c in space}
        out[placement_name(fields)] = fields
    return out


def _plain(value):
    if isinstance(value, float) and np.isnan(value):
        return None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


def member_names(calibration, draws: tuple[int, ...] = (1,), placements: int = 1) -> list[str]:
    """The ensemble, calibrated first (module docstring)."""
    low, high = slowdown_ends()
    names = [CALIBRATED, f"slowdown {low:.2f}", f"slowdown {high:.2f}"]
    names += [f"VC and latency draw {int(k)}" for k in draws]
    names += list(placement_variants(calibration, placements))
    return names


def apply_member(member: str, trace: str, calibration, replay_days, warmup_days):
    """``(replay, params, seed, slowdown model or None)`` of ``member`` on ``calibration`` (module docstring)."""
    replay, params = calibration.replay, calibration.params
    if member in (None, "", CALIBRATED):
        return replay, params, 0, None
    if (m := _SLOWDOWN.match(member)) is not None:
        from ..sim.slowdown import SlowdownModel
        x = float(m.group("x"))
        return replay, params, 0, SlowdownModel(
            cross_server=x, cross_rack=x, provenance={"spread": f"ensemble member: one end of the six models' measured "
                                                                f"range ({x:g})"})
    if (m := _DRAW.match(member)) is not None:
        from ..validation.calibration import replay_workloads
        k = int(m.group("k"))
        return replay_workloads(str(trace), k, replay_days, warmup_days).replay, params, k, None
    if member.startswith(_PLACEMENT):
        variants = placement_variants(calibration, limit=len(PLACEMENT_WORDS) * 2)
        if member not in variants:
            raise ValueError(f"ensemble member {member!r}: no such placement variant among the calibration's trials "
                             f"({sorted(variants)})")
        fields = {k: v for k, v in variants[member].items() if k != "trial"}
        return replay, replace(params, **fields), 0, None
    raise ValueError(f"unknown ensemble member {member!r}: 'calibrated', 'slowdown <x>', 'VC and latency draw <k>' or "
                     "'placement: <placement>'")


def member_table(calibration, names: list[str]) -> pd.DataFrame:
    """What each member changes, in words (notebook 06's table under the forest plot)."""
    rows = []
    for name in names:
        if name == CALIBRATED:
            what = "notebook 05's calibrated replay: " + calibration.params.label()
        elif _SLOWDOWN.match(name):
            what = ("the spread slowdown at one end of the six models' measured one-server / multi-server step-time "
                    "ratios (the replay takes their median)")
        elif _DRAW.match(name):
            what = ("the calibrated parameters on another draw of the VCs no data name for a job and of the "
                    "scheduler latency")
        else:
            what = ("a trial of the calibration's search with another placement that met the placement constraint "
                    "on the fit span as closely as the calibrated one, within one step")
        rows.append({"member": name, "what it changes": what})
    return pd.DataFrame(rows).set_index("member")


def member_of(table: pd.DataFrame) -> pd.Series:
    """Each sweep row's member, from its cell's ``replay`` parameter (JSON text in the table)."""
    import json

    if "replay" not in table.columns:
        return pd.Series(CALIBRATED, index=table.index)
    return table["replay"].map(lambda r: json.loads(r).get("member", CALIBRATED) if isinstance(r, str) else CALIBRATED)
