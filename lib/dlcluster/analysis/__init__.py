"""Analyses of the study, one module per section (trace tables, training curves)."""
