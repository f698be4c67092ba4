"""dlcluster: an open, tested reproduction of the ATC'19 Philly GPU-cluster study.

Modules:
    trace      load the Philly trace (embedded public data or the full raw trace)
    curves     per-epoch training curves (real Pollux curves, the project's corpus, CSV, TensorBoard)
    analysis   the study's analyses, one module per section
    classify   rule-based failure classification of job logs
    reference  the paper's published numbers, with provenance
    paths      where data and reports live
"""

__version__ = "0.1.0"
