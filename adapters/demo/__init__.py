"""Deterministic synthetic mail: what ``letterlog demo`` delivers (``mailgen``) and the
benchmarks replay (``benchmail``).

May import: the standard library only.
"""
