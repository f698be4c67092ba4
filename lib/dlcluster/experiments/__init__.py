"""The paper's design implications (section 5) as measured simulator experiments.

Every experiment replays real Philly jobs on the reconstructed machines. By
default (grids ``full`` and ``small``) that is the calibrated replay
(:class:`.common.CalibratedReplay`): RFold's jobs of every status at the real
arrival rate, with the parameters calibrated by
:func:`dlcluster.validation.calibration.calibrated_params` (cached, shared with
notebook 05): notebook 05's replay itself, set up as it runs it, whole, once per arm, and
measured in consecutive blocks of submit time (:func:`.common.replay_block_inputs`). The ``pollux-*`` grids
keep the earlier setting (the 82,247 Pollux jobs, load calibrated by
compressing arrivals). One *cell* per (setting, seed, load), run by
:func:`dlcluster.experiments.sweep.run_sweep` through :func:`run_cell`. The five
experiments (``experiment`` parameter of a cell):

1. ``locality``: strict locality vs Philly's relax-after-timeout (sweeping the
   timeout) vs no locality at all (GPUs taken wherever a list of servers starts:
   :class:`.locality.LocalityBlindPlacement`); long jobs held to strict locality (their
   duration known in advance: an oracle) or migrated to a tighter placement (when at least an hour of work is left:
   an oracle too, or once they have run an hour: attained service, which a scheduler knows).
2. ``interference``: packing jobs onto busy servers (best fit) vs spreading
   them (most free GPUs, Philly's rule), migration (defragment + consolidate) on
   or off, vs isolating the gangs (a multi-GPU job only gets servers no other job
   uses, 1-GPU jobs packed on the others, migration to defragment); every job on
   dedicated servers is kept only as a construction.
3. ``failures``: no failures (baseline) vs retry everything (Philly) vs
   class-aware retries vs pre-running multi-GPU jobs on one GPU first, under a
   failure model fitted to the public data or the simulator's illustrative one.
4. ``early_stop``: ending each job when it comes within a tolerance of its best
   metric, the point drawn from real learning curves; GPU-hours saved vs the
   quality lost.
5. ``policy``: FIFO, Philly, Tiresias 2D-LAS and Gittins, and preemptive SRTF
   (an oracle bound), all placing jobs as the calibrated replay does, so that they differ in queue
   order, locality and preemption only, and Philly's arm is notebook 05's replay.

**Replicates.** On the block design (grids ``full`` and ``small``) every arm
replays notebook 05's calibrated replay whole, once, and the replicates are
consecutive blocks of submit time (weekly at default); the intervals are a
circular block bootstrap over them (:mod:`.intervals`), and the table's
``seed`` is the block (:func:`.grid.with_arms`). On the Pollux grids (the simulator is deterministic for a
given workload) seed ``s`` replays a block bootstrap of the real jobs
(whole ``resample_block_days`` periods of the trace drawn with replacement,
keeping each job's VC, size, duration and time of day within its period) and
seeds the failure and convergence draws. Confidence intervals across seeds
therefore say how much a result depends on which weeks of jobs the cluster
saw. ``resample_block_days=0`` replays the trace as recorded.

**Load** (Pollux grids). The Pollux jobs on the full reconstructed cluster keep only ~21% of
servers busy, against 74% in the real occupancy data (``trace.occupancy``).
A cell's ``load`` factor compresses inter-arrival times by that factor (x1 is
the real load); :func:`calibrated_load` finds the factor at which the
simulated share of busy servers matches the real occupancy ("calibrated to the
real occupancy").

Modules: :mod:`.common` (inputs, measures, wording: a change on a near-zero base is a difference, never a ratio),
:mod:`.kinds` (what each result sentence rests on: mechanism, by construction or assumption),
:mod:`.intervals` (intervals that respect the quantity,
the block bootstrap, and the rule for naming a direction), :mod:`.implications` (the paper's implications
answered: supported / contradicted / no effect larger than X / cannot be tested, each tagged by what it rests on),
one module per experiment (:mod:`.locality`, :mod:`.interference`,
:mod:`.failures`, :mod:`.early_stop`, :mod:`.policies`), :mod:`.grid` (the
cells of a sweep and running one), :mod:`.plots`, and :mod:`.sweep` (the
generic sweep runner: local processes or a Dask cluster, with a cache).
Each experiment owns its arms: its module defines ``cells(spec, arms)`` (the cells of its arms) and ``options(cell,
workload, philly, slowdown)`` (a cell's policy, simulator options, workload and extras), and :data:`.grid.ARMS` names
them with the arm label; the grid only lists and runs cells. A new experiment gets a module of its own (copy
:mod:`.failures`: its ``cells``, ``options``, arm label and conclusion) and one entry in :data:`.grid.ARMS`.
"""

from __future__ import annotations

from .common import (  # noqa: F401
    BUCKET_KEYS, CODE_MODULES, EXPERIMENTS, METRIC_LABELS, arm_order, focus_bucket, format_seconds,
    Inputs, CalibratedReplay, load_inputs, load_key, load_label, load_order, measure, paired_change,
    resample_periods, rows_of, scale_load, short_duration, summarize, replay_block_inputs,
    is_block_design, level_interval, paired_interval)
from .early_stop import (  # noqa: F401
    curve_bootstrap_saving, early_stop_conclusion, early_stop_points, early_stop_savings, plot_early_stop, quality_lost,
    saving_beside_paper)
from .failures import earliest_rtf_s, failure_costs, failure_model, failures_conclusion, plot_failures  # noqa: F401
from .grid import (  # noqa: F401
    GRIDS, calibrated_load, calibration_cells, cell_inputs, experiment_cells, grid_spec, inputs_fingerprint,
    plot_calibration, run_cell, shared_simulations, with_arms)
from .implications import (  # noqa: F401
    IMPLICATIONS, KINDS, answer_words, answers_table, arm_stability, implication_answers, interval_target,
    scorecard_words, target_note)
from .ensemble import (  # noqa: F401
    EnsembleAnswer, draw_runs, ensemble_answer, ensemble_answers, ensemble_implications, forest_plot)
from .grid import ensemble_cells  # noqa: F401
from .members import CALIBRATED, member_names as ensemble_members, member_table, slowdown_ends  # noqa: F401
from .kinds import kind_tag, load_kind, tagged  # noqa: F401
from .intervals import (  # noqa: F401
    Interval, Stability, combine_runs, direction, effective_n, mean_interval, pooled_interval, pooled_ratio_interval,
    ratio_interval, stability)
from .interference import (  # noqa: F401
    DEDICATED_ARM, INTERFERENCE_ARMS, ISOLATE_ARM, DedicatedPlacement, interference_arm, interference_conclusion,
    interference_conclusion_by_scenario, interference_options)
from .locality import (  # noqa: F401
    LocalityBlindPlacement, LongJobsStrictPolicy, locality_conclusion, relax_tradeoff, relax_tradeoff_sentence,
    strict_locality_explanation)
from .plots import POLICY_COLORS, metric_grid, plot_paired_changes  # noqa: F401
from .naming import replay_data_label, replay_name, targets_met  # noqa: F401
from .policies import first_wait_verdict, is_preemptive, policy_changes, policy_conclusion, policy_context  # noqa: F401
