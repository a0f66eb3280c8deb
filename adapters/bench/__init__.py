"""Benchmarks: one module per benchmark, synthetic mail, plotting.

May import: everything in ``adapters`` (``devservers`` to start servers for a run),
``domain``, ``projections``; imported only by ``letterlog bench`` (``cli``).
"""
