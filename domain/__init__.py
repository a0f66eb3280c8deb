"""The mail domain: aggregates (Account, Mailbox, Message), their events, commands (pydantic
models), values, errors, the RFC 5322 inspection, the lifecycle rules, and the command side
(``service.Mailstore``: ``delivery``, ``messages``, ``mailboxes`` around ``unit_of_work``).

May import: the standard library, eventsourcing, pydantic, uuid_utils, tenacity (the unit of
work's retries); nothing of ``projections``, ``adapters`` or ``spark_replay``, and no client
library.
"""
