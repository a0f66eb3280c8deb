"""Benchmarks: one module per benchmark, synthetic mail, plotting.

May import: everything in ``adapters`` and ``devtools.devservers`` (to start servers for a
run), ``domain``, ``projections``; imported only by ``letterlog bench`` (``adapters.cli.bench``),
the Spark benchmark (``spark_replay.bench``) and the tests.
"""
