"""The event log: event store wiring, msgpack transcoder, log reader, event records.

May import: ``domain`` and eventsourcing/msgpack; never ``streaming``, ``cli``
or ``devtools``.
"""
