"""The advisory-lock key that serialises letterlog's schema creation on the log's
PostgreSQL (the log's tables, the key table, the erasure intents and pending records, the
relay's positions): any stable 64-bit number works, as long as every creator uses the same.
Its own module so that a process without the PostgreSQL client (the relay's Kafka side)
can name it."""

from __future__ import annotations

import zlib

SCHEMA_LOCK_KEY = zlib.crc32(b"letterlog schema")
