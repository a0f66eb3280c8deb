"""Purge and erasure: the purge jobs (the purge queues walked per shard with pointers, the
domain's double check, payload reclamation), what follows a purge's append (shredding) and
its aftermath, the erasure intents, and the completion of erasures on the files and on
scale-out.

May import: ``domain``, ``projections``, ``adapters.files``, ``adapters.tables``,
``adapters.payloads``, ``adapters.eventlog``, ``adapters.readside`` and
``adapters.operations``; never ``streaming``, ``cli`` or ``devtools``.
"""
