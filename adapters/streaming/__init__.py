"""The scale-out path: outbox relay to Kafka, stream projector, stream worker.

May import: ``domain``, ``projections``, ``eventlog``, ``tables``, ``settings`` (and
``bootstrap`` in entry points); never ``cli`` or ``devtools``.
"""
