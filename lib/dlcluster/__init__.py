"""dlcluster: an open, tested reproduction of the ATC'19 Philly GPU-cluster study.

Stages (one package each, in pipeline order; see ARCHITECTURE.md):
    trace        the Philly trace in: raw reader and writer, embedded public data, ingest, data quality
    sources      other real inputs: training curves, the ResNet-50 colocation benchmark
    analysis     the study's analyses (sections 3-4), one module per question
    sim          the discrete-event cluster simulator
    validation   the simulator held against the real cluster
    experiments  the design implications (section 5) as simulator experiments
    report       notebook reports, published numbers, plotting, the report runner, the index page
Shared: paths (where data and reports live), atomic (atomic writes), cli (the ``dlcluster`` command).
"""

__version__ = "0.1.0"
