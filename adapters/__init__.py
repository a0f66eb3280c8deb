"""Everything that talks to a library or a server, grouped by what it talks to.

``bootstrap`` builds every part from ``settings`` (the one composition root); ``embedded``
is the ``Letterlog`` facade an application imports. Sub-packages: ``eventlog`` (event store),
``payloads``, ``tables``, ``readside``, ``streaming`` (Kafka), ``lifecycle`` (purge
jobs), ``cli``. The development tools (benchmarks, dev servers) are not here: they are the
top-level ``devtools`` package, outside the product (ADR 0086).

May import: ``domain``, ``projections`` and client libraries; never ``spark_replay``. Inside:
``tables``, ``payloads``, ``eventlog``, ``readside`` and ``lifecycle`` never import
``streaming`` or ``cli``; nothing imports ``devtools`` but ``cli.bench`` (for ``letterlog
bench``), by import-linter's rules (``make lint``).
"""
