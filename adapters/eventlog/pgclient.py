"""psycopg, PostgreSQL's client library, through one door, loaded on first use.

The PostgreSQL key stores (``keypostgres``, ``keycluster``, ``keyscrub``) and the log's
factory on PostgreSQL are imported by every process (the composition root and the erasure
name their classes), but only a deployment on PostgreSQL calls them: each takes the library
from ``psycopg()`` where it connects, so that an embedded store never loads it (ADR 0096).
"""

from __future__ import annotations

from types import ModuleType


def psycopg() -> ModuleType:
    """The ``psycopg`` module (its ``conninfo`` and ``errors`` with it)."""
    import psycopg as client  # local: the client library, loaded only when PostgreSQL is used

    return client
