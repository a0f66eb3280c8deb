"""The PySpark replay job: read the log, run the projectors, write fresh tables.

May import: ``domain``, ``projections``, ``adapters`` (``adapters.bootstrap`` for its parts)
and pyspark; nothing imports it.
"""
