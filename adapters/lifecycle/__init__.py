"""Purge jobs: the purge queues walked per shard with pointers, the domain's double check, and
payload reclamation.

May import: ``domain``, ``projections``, ``adapters.tables``, ``adapters.payloads``; never
``streaming``, ``cli`` or ``devtools``.
"""
