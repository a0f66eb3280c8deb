"""Benchmarks: one module per benchmark, synthetic mail, plotting."""
