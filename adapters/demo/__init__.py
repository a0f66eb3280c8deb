"""Deterministic synthetic mail (``mailgen``): what ``letterlog demo`` delivers and the
benchmarks replay.

May import: the standard library only.
"""
