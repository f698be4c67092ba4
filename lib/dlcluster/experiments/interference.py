"""Experiment 2, mitigate interference: pack vs spread vs dedicated servers, migration on or off.

No real data here measure how much jobs sharing a server slow each other down, so the experiment runs under
scenarios of assumed colocation slowdown (``interference`` in each cell: its name and factors, given by the
caller; :func:`.grid.experiment_cells`), and its conclusion is one per scenario: what follows from each
assumption, not which holds.
"""

from __future__ import annotations

import pandas as pd

from .common import best_arm, compare_arms, format_seconds, judged_change, mean_where
from .kinds import ASSUMPTION, MECHANISM, tagged


class DedicatedPlacement:
    """Isolation: a job only gets servers no other job uses, and no other job joins them while it runs.

    Tightest level first (one server, then one rack, then anywhere); the
    smallest idle server that fits, racks needing the fewest servers. The
    GPUs a job leaves free on its servers stay unused: the price of isolation.
    Reads the cluster's index of idle servers by size (``idle_by_cap``,
    ``rack_idle_by_cap``), so that a saturated cluster, asked again and again,
    costs a few list looks per call rather than a sort of every idle server.
    """

    #: the cluster's count of the GPUs it can give: those of servers without a job (the simulator's full pass stops
    #: when none is left, though other GPUs are free)
    capacity = "idle_gpus"

    def __repr__(self) -> str:
        return "DedicatedPlacement()"

    def choose(self, cluster, num_gpus: int, min_level: int, max_level: int):
        if num_gpus > cluster.idle_gpus:  # GPUs on servers without any job
            return None
        for level in range(min_level, max_level + 1):
            if level == 0:
                for size in range(num_gpus, cluster.max_cap + 1):
                    if cluster.idle_by_cap[size]:
                        return [(cluster.idle_by_cap[size][0], num_gpus)], level
            elif level == 1:
                best = None
                for rack, idle in enumerate(cluster.rack_idle_by_cap):
                    if cluster.rack_idle_gpus[rack] >= num_gpus:
                        rank = _largest_first_rank(idle, num_gpus)
                        if best is None or rank < best[0]:
                            best = (rank, idle)
                if best is not None:
                    return _largest_first(best[1], num_gpus), level
            else:
                return _largest_first(cluster.idle_by_cap, num_gpus), level
        return None


def _largest_first(idle_by_cap, num_gpus: int) -> list[tuple[int, int]]:
    """``sim.placement.fill_largest_first`` over idle servers given by size (each list ascending): the largest first,
    ties to the lowest index. The caller has checked that they hold ``num_gpus``."""
    counts, remaining = [], num_gpus
    for size in range(len(idle_by_cap) - 1, 0, -1):
        for s in idle_by_cap[size]:
            take = min(size, remaining)
            counts.append((s, take))
            remaining -= take
            if remaining == 0:
                return counts
    raise ValueError(f"the idle servers hold fewer than {num_gpus} GPUs")


def _largest_first_rank(idle_by_cap, num_gpus: int) -> tuple[int, int]:
    """(servers, their GPUs) that :func:`_largest_first` would take, without listing them."""
    servers = gpus = 0
    remaining = num_gpus
    for size in range(len(idle_by_cap) - 1, 0, -1):
        available = len(idle_by_cap[size])
        if available:
            needed = -(-remaining // size)
            if needed <= available:
                return servers + needed, gpus + needed * size
            servers, gpus, remaining = servers + available, gpus + available * size, remaining - available * size
    raise ValueError(f"the idle servers hold fewer than {num_gpus} GPUs")


def interference_arm(row) -> str:
    name = {"pack": "pack (best fit)", "spread": "spread (Philly)", "dedicated": "dedicated servers"}[row["placement"]]
    return name + (" + migration" if bool(row["migration"]) else "")


def scenario_kind(scenario: str | None) -> tuple[str, str]:
    """What a result under an interference scenario rests on: with no colocation slowdown ('none') it emerges from
    the simulation; under any other it rests on the assumed slowdown (no public data measure it)."""
    if scenario in (None, "none"):
        return MECHANISM, ""
    return ASSUMPTION, (f"the colocation slowdown of scenario '{scenario}' is assumed (no public data measure it), "
                        "and the result follows from it")


def interference_conclusion(rows: pd.DataFrame, main_load: str, bucket: str, scenario: str | None = None) -> str:
    """One sentence, tagged by what it rests on (:func:`scenario_kind` of ``scenario``): isolation vs packing vs
    spreading (speed, large jobs' fragmentation wait, JCT), and migration; each change paired by seed and named as a
    direction only outside its interval."""
    at = rows[rows["load_label"] == main_load]
    everyone, large = at[at["bucket"] == "all"], at[at["bucket"] == bucket]
    arms = ["pack (best fit)", "spread (Philly)", "dedicated servers"]
    speed = [mean_where(everyone, "speed_mean", arm=a) for a in arms]
    frag = [mean_where(large, "frag_delay_mean_s", arm=a) for a in arms]
    mig = ("spread (Philly)", "spread (Philly) + migration")
    best, _ = best_arm(everyone, "jct_mean_s")
    tail = ""
    if best is not None and best != mig[0]:
        tail = (f", and the lowest mean JCT of all jobs came from '{best}' (against Philly's spreading: "
                f"{judged_change(everyone, mig[0], best, 'jct_mean_s')})")
    elif best is not None:
        tail = ", and the lowest mean JCT of all jobs came from Philly's spreading"
    kind, because = scenario_kind(scenario)
    return tagged(kind,
                  f"At {main_load}, jobs ran at a mean speed of {speed[2]:.2f} on dedicated servers vs {speed[0]:.2f} "
                  f"packed and {speed[1]:.2f} spread, while {bucket}-GPU jobs waited on average "
                  f"{format_seconds(frag[2])} for a local placement with dedicated servers vs "
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
