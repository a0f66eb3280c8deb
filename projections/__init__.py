"""Read models as pure functions from an event (and its log position) to table mutations: one
module per read model, every table and column in ``names``, every row key in ``keys``, the
``TableStore`` port and the ``ProjectionRunner`` every runtime shares.

May import: the standard library and ``domain``; no client library, nothing of ``adapters``
or ``spark_replay``.
"""
