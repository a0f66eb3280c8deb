"""Everything that talks to a library or a server, grouped by what it talks to.

``bootstrap`` builds every part from ``settings`` (the one composition root); ``embedded``
is the ``Letterlog`` facade an application imports. Sub-packages: ``eventlog`` (event store),
``payloads``, ``tables``, ``readside``, ``streaming`` (Kafka), ``lifecycle`` (purge
jobs), ``cli``, ``bench``, ``devservers``.

May import: ``domain``, ``projections`` and client libraries; never ``spark_replay``. Inside:
``tables``, ``payloads``, ``eventlog``, ``readside`` and ``lifecycle`` never import
``streaming``, ``cli``, ``bench`` or ``devservers``; only ``bench`` (and the tests) import
``devservers`` (tests/unit/test_import_rules.py).
"""
