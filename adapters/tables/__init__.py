"""Table stores: in-memory, embedded SQLite and HBase (happybase).

May import: ``projections`` (the ``TableStore`` port) and ``domain``; never ``streaming``,
``cli`` or ``devtools``.
"""
