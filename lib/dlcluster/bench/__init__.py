"""Benchmarks that measure on the user's hardware what the trace cannot show (see colocation)."""
