"""Real inputs besides the Philly trace: training curves (:mod:`.curves`)
and the colocation benchmark (:mod:`.colocation`).

Failure logs are read by :mod:`dlcluster.analysis.classify`; their files live in ``data/failure_logs``.
"""
