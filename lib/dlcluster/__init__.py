"""dlcluster: an open, tested reproduction of the ATC'19 Philly GPU-cluster study.

Modules:
    trace      load the Philly trace (embedded public data or the full raw trace)
    reference  the paper's published numbers, with provenance
    paths      where data and reports live
"""

__version__ = "0.1.0"
