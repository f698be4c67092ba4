"""Experiment 2, mitigate interference: pack vs spread vs isolated gangs, migration on or off.

The arms (:data:`INTERFERENCE_ARMS`, named by :func:`interference_arm`, set up by :func:`interference_options`):
packing (best fit) and spreading (Philly's most free GPUs), each with and without migration; isolating the gangs as
the paper proposes (section 5: a multi-GPU job on servers no other job uses, 1-GPU jobs packed on the others,
migration to defragment: :class:`dlcluster.sim.isolation.IsolatePlacement`); and every job on dedicated servers,
kept only as a construction (1-GPU jobs included, migration off: the cluster saturates by construction).

No real data here measure how much jobs sharing a server slow each other down, so the experiment runs under
scenarios of assumed colocation slowdown (``interference`` in each cell: its name and factors, given by the
caller; :func:`.grid.experiment_cells`), and its conclusion is one per scenario: what follows from each
assumption, not which holds.
"""

from __future__ import annotations

import pandas as pd

from ..sim import Migration, make_policy
from ..sim.isolation import IsolatePlacement, IsolatingMigration, idle_servers_choice
from ..sim.slowdown import SlowdownModel, default_slowdown_model
from .common import best_arm, compare_arms, format_seconds, judged_change, mean_where
from .kinds import ASSUMPTION, MECHANISM, tagged


class DedicatedPlacement:
    """Isolation of every job: a job only gets servers no other job uses, and no other job joins them while it runs.

    The rule is :func:`dlcluster.sim.isolation.idle_servers_choice` (tightest level first; the smallest idle server
    that fits, racks needing the fewest servers; the GPUs a job leaves free on its servers stay unused), for every
    job, 1-GPU jobs included: so its arm's JCT is what this construction gives (the cluster saturates), not what
    the paper proposes (:class:`dlcluster.sim.isolation.IsolatePlacement` isolates the gangs only).
    """

    #: the cluster's count of the GPUs it can give: those of servers without a job (the simulator's full pass stops
    #: when none is left, though other GPUs are free)
    capacity = "idle_gpus"

    def __repr__(self) -> str:
        return "DedicatedPlacement()"

    def choose(self, cluster, num_gpus: int, min_level: int, max_level: int):
        return idle_servers_choice(cluster, num_gpus, min_level, max_level)


PACK_ARM, SPREAD_ARM = "pack (best fit)", "spread (Philly)"
ISOLATE_ARM = "isolate gangs"
#: every job, 1-GPU jobs included, on servers no other job uses, migration off: a construction, not the paper's arm
DEDICATED_ARM = "dedicated servers (every job; by construction)"
ARM_NAMES = {"pack": PACK_ARM, "spread": SPREAD_ARM, "isolate": ISOLATE_ARM, "dedicated": DEDICATED_ARM}

#: The interference experiment's arms, each a cell's ``placement`` and ``migration``: pack and spread, with and
#: without migration; the gangs isolated with migration to defragment (the paper's proposal); the everyone-dedicated
#: construction last
INTERFERENCE_ARMS = (
    {"placement": "pack", "migration": False},
    {"placement": "spread", "migration": False},
    {"placement": "pack", "migration": True},
    {"placement": "spread", "migration": True},
    {"placement": "isolate", "migration": True},
    {"placement": "dedicated", "migration": False},
)


def interference_arm(row) -> str:
    return ARM_NAMES[row["placement"]] + (" + migration" if bool(row["migration"]) else "")


def interference_options(cell: dict, workload, philly: dict | None = None,
                         slowdown="default") -> tuple[object, dict, object, dict]:
    """Policy, simulator options, workload and per-job extras of an interference cell (``grid.simulation_options``'s
    interference branch, moved here): Philly's calibrated policy; the replay's own slowdown (``slowdown``: the
    replay's, None for none, or "default": the default model) with the scenario's assumed colocation slowdown added;
    the arm's placement; migration (defragment and consolidate) where the cell asks for it, isolation-keeping under
    ``isolate`` (the arms run ``dedicated`` without it: :data:`INTERFERENCE_ARMS`)."""
    philly = dict(philly or {})
    base = default_slowdown_model() if isinstance(slowdown, str) else \
        SlowdownModel(1.0, 1.0) if slowdown is None else slowdown
    options = {"slowdown": base.with_interference(
        cell.get("colocated_one_server", 1.0), cell.get("colocated_spread", 1.0),
        f"assumed: scenario {cell.get('interference', 'none')!r}")}
    policy = make_policy("philly", **philly)
    placement, migration = cell["placement"], bool(cell.get("migration", False))
    if placement not in ARM_NAMES:
        raise ValueError(f"placement must be one of {sorted(ARM_NAMES)}, got {placement!r}")
    if placement == "isolate":
        options["placement"] = IsolatePlacement(workload.num_gpus > 1)
        if migration:
            options["migration"] = IsolatingMigration()
    else:
        options["placement"] = {"pack": "best_fit", "spread": "most_free"}.get(placement) or DedicatedPlacement()
        if migration:
            options["migration"] = Migration()
    return policy, options, workload, {}


def scenario_kind(scenario: str | None) -> tuple[str, str]:
    """What a result under an interference scenario rests on: with no colocation slowdown ('none') it emerges from
    the simulation; under any other it rests on the assumed slowdown (no public data measure it)."""
    if scenario in (None, "none"):
        return MECHANISM, ""
    return ASSUMPTION, (f"the colocation slowdown of scenario '{scenario}' is assumed (no public data measure it), "
                        "and the result follows from it")


def interference_conclusion(rows: pd.DataFrame, main_load: str, bucket: str, scenario: str | None = None) -> str:
    """One sentence, tagged by what it rests on (:func:`scenario_kind` of ``scenario``): dedicated servers vs packing
    vs spreading (speed, large jobs' fragmentation wait, JCT), migration, and, where the rows hold its arm, isolating
    the gangs against packing (both with migration); each change paired by seed and named as a direction only outside
    its interval. The everyone-dedicated construction is never the best arm."""
    at = rows[rows["load_label"] == main_load]
    everyone, large = at[at["bucket"] == "all"], at[at["bucket"] == bucket]
    # the isolating arm the rows hold: the everyone-dedicated construction where the grid ran it, else the gangs
    # isolated with migration (the paper's proposal)
    isolating = DEDICATED_ARM if DEDICATED_ARM in set(everyone["arm"]) else ISOLATE_ARM + " + migration"
    where, wait = (("on dedicated servers", "with dedicated servers") if isolating == DEDICATED_ARM else
                   ("with the gangs isolated", "with the gangs isolated"))
    arms = [PACK_ARM, SPREAD_ARM, isolating]
    speed = [mean_where(everyone, "speed_mean", arm=a) for a in arms]
    frag = [mean_where(large, "frag_delay_mean_s", arm=a) for a in arms]
    mig = (SPREAD_ARM, SPREAD_ARM + " + migration")
    best, _ = best_arm(everyone, "jct_mean_s", exclude=(DEDICATED_ARM,))
    tail = ""
    isolate, packed = ISOLATE_ARM + " + migration", PACK_ARM + " + migration"
    if {isolate, packed} <= set(everyone["arm"]):
        tail += (f"; isolating the gangs (migration to defragment) against packing with migration gave a mean JCT "
                 f"of all jobs of {judged_change(everyone, packed, isolate, 'jct_mean_s')}")
    if best is not None and best != mig[0]:
        tail += (f", and the lowest mean JCT of all jobs came from '{best}' (against Philly's spreading: "
                f"{judged_change(everyone, mig[0], best, 'jct_mean_s')})")
    elif best is not None:
        tail += ", and the lowest mean JCT of all jobs came from Philly's spreading"
    kind, because = scenario_kind(scenario)
    return tagged(kind,
                  f"At {main_load}, jobs ran at a mean speed of {speed[2]:.2f} {where} vs {speed[0]:.2f} "
                  f"packed and {speed[1]:.2f} spread, while {bucket}-GPU jobs waited on average "
                  f"{format_seconds(frag[2])} for a local placement {wait} vs "
                  f"{format_seconds(frag[0])} packed and {format_seconds(frag[1])} spread; under spreading, migration "
                  f"{compare_arms(large, *mig, 'frag_delay_mean_s', 'that wait')}" + tail + ".", because)


def interference_conclusion_by_scenario(rows: pd.DataFrame, main_load: str, bucket: str) -> str:
    """:func:`interference_conclusion` under each assumed interference, and whether the best arm depends on it."""
    parts, best = [], {}
    for scenario in dict.fromkeys(rows["interference"]):
        part = rows[rows["interference"] == scenario]
        everyone = part[(part["load_label"] == main_load) & (part["bucket"] == "all")]
        best[scenario] = best_arm(everyone, "jct_mean_s")[0]
        parts.append(f"Assuming interference '{scenario}': "
                     + interference_conclusion(part, main_load, bucket, scenario))
    winners = set(best.values())
    assumed = [s for s in best if s != "none"]
    kind, because = (MECHANISM, "") if not assumed else (
        ASSUMPTION, f"which placement wins rests on the assumed colocation slowdown ({', '.join(map(repr, assumed))})")
    tail = tagged(kind,
                  f"The lowest mean JCT comes from '{next(iter(winners))}' under every assumed interference (whether "
                  "it is significantly lower is said scenario by scenario above)."
                  if len(winners) == 1 else
                  "Which placement gives the lowest mean JCT depends on the assumed interference ("
                  + "; ".join(f"{s}: '{b}'" for s, b in best.items()) + ").", because)
    return (" ".join(parts) + " " + tail + " No data here measure colocation interference: each scenario is an "
            "assumption (the paper's Table 4 ratios are one of them, an input here, not a result), so this experiment "
            "says what follows from each, not which holds.")
