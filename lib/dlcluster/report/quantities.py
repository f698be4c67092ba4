"""One number per quantity: the names under which the notebooks publish the quantities more than one of them
prints, and the quantities that once went under one name but are two.

Each is computed once, in the library (:mod:`dlcluster.validation.quantities` and the functions named below), and
labelled in its results.json description by its selection, span and definition. ``tests/test_one_number.py`` runs
every notebook at CI parameters and fails when

* one results.json key holds different values in two notebooks (every key, not only those listed here);
* the keys of one entry of :data:`ALIASES` (one quantity that two notebooks publish under names of their own
  sections) differ;
* the keys of one entry of :data:`DISTINCT` are missing, or share a description: two selections, spans or
  definitions give two numbers, and each is named by its own label, side by side.
"""

from __future__ import annotations

SIZE_KEYS = ("2-4", "5-8", "gt8")

#: One quantity, two names: (notebook, key) pairs that must hold the same value.
ALIASES: dict[str, tuple[tuple[str, str], ...]] = {
    **{f"real median first-attempt wait of every reconstructed DRE record, {b} GPUs": (
        ("01-locality-queueing", f"queueing.median_s.{b}"),
        ("05-simulator-validation", f"real.first_wait_median_s.{'>8' if b == 'gt8' else b}")) for b in SIZE_KEYS},
    "the simulator's spread factor and the measured one it is fitted to (median over models of each model's "
    "one-server / spread step-time ratio)": (
        ("02-utilization-colocation", "slowdown_model.spread"),
        ("02-utilization-colocation", "placement.spread_speed_factor")),
}

#: Quantities printed once as one, which are two or more: notebook -> keys, each labelled by its own selection,
#: span or definition.
DISTINCT: dict[str, dict[str, tuple[str, ...]]] = {
    "share of DRE jobs retried": {
        "04-failures-rtf": ("dre.retried_share.reconstructed", "dre.retried_share.reconstructed_passed",
                            "dre.retried_share.extract")},
    "real median first-attempt wait, 2-4 GPUs": {
        "01-locality-queueing": ("queueing.median_s.2-4", "real_vs_sim.2-4.real_median_s",
                                 "heldout.delay.2-4.real_median_s")},
    "the replay's busy servers and GPU allocation": {
        "01-locality-queueing": ("replay.record_units.busy_share", "replay.record_units.busy_mae_pp",
                                 "replay.record_units.gpu_allocated_share",
                                 "validation.heldout.busy_servers_mae_pp_complete",
                                 "validation.heldout.gpu_allocated_share")},
    "killed or unsuccessful jobs": {
        "04-failures-rtf": ("failures.dre_records.unsuccessful_jobs_pct", "jobsets.rfold_not_in_pollux_jobs_pct"),
        "05-simulator-validation": ("failures.dre_records.unsuccessful_jobs_pct",
                                    "jobsets.rfold_not_in_pollux_jobs_pct")},
    "GPU time of killed or unsuccessful jobs": {
        "04-failures-rtf": ("failures.dre_records.unsuccessful_gpu_time_pct",
                            "jobsets.rfold_not_in_pollux_gpu_time_pct"),
        "05-simulator-validation": ("failures.dre_records.unsuccessful_gpu_time_pct",
                                    "jobsets.rfold_not_in_pollux_gpu_time_pct")},
    "server counts of our Figure 4 jobs": {
        "01-locality-queueing": ("official.fig4.5-8.ours_server_counts", "official.fig4.5-8.ours_distinct_servers")},
}
