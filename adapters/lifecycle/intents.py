"""Erasure intents: what a purge run or an erasure must finish, durable before it starts.

An erasure (``erase-message``, ``erase-account``, the erasures a restore makes again) or a
purge run writes one small JSON file in ``<data>/erasures-intent/`` *before* it appends
anything, fsyncs it and its directory, and holds an exclusive ``flock`` on it while it runs:

- ``kind``: ``erase`` (the message ids asked for), ``erase-account`` (the account's id) or
  ``purge``;
- ``position``: the log's head when it began: every ``Message.Purged`` it appends comes
  after it;
- ``began``: when (payloads re-used since are kept).

Once every step is done (``Purged`` appended, the data keys destroyed and their KEKs gone
from the vault, the payloads deleted or their grace started, the SQLite files
checkpointed) the file is removed. A process killed on the way leaves the file, and the
kernel lets go of its lock: whoever opens the store next (any command, ``erase status``,
``erase complete``, ``purge run``, the ``purger``) takes the lock without waiting and
finishes it (``adapters.facade.erasure``): an erasure is made again from its ids (every
step is idempotent), and every ``Purged`` after the position has its key destroyed. A file
whose lock is held belongs to a running process and is left to it (ADR 0063).

No content and no address: message and account ids only (the log holds them anyway). The
files and what every intent has: ``intentfiles``.

With the log in PostgreSQL (scale-out: many hosts, one store) an intent is a row in the
log's database instead, held by a session advisory lock, which any host takes over once
its holder is gone (``sharedintents``, ADR 0084). ``of`` says which a store uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.lifecycle.intentfiles import Intents

if TYPE_CHECKING:
    from adapters.config.settings import Settings
    from adapters.lifecycle.sharedintents import SharedIntents


def of(settings: Settings) -> Intents | SharedIntents:
    """Where ``settings``' store keeps its intents: the log's PostgreSQL database on
    scale-out (every host sees them), ``<data>/erasures-intent/`` on the embedded store."""
    if settings.event_store == "postgres" and settings.postgres_dsn:
        # local: psycopg, a client library, loaded only when the log is in PostgreSQL
        from adapters.lifecycle.sharedintents import SharedIntents

        return SharedIntents(settings.postgres_dsn, settings.data,
                             timeout=settings.postgres_timeout)
    return Intents(settings.data)
