"""The PySpark replay job: read the log, run the projectors, write fresh tables.

May import: ``domain``, ``projections``, of ``adapters`` only its door
``adapters.bootstrap.spark`` (ADR 0094), and pyspark; nothing imports it.
"""
