"""The lda's store side: the message read from its file descriptor and its delivery
appended to the log. ``adapters.mta.lda`` imports this under its deadline, so that a slow
import of the store's libraries (pydantic, the log) ends in 75, in time; ``letterlog
deliver -`` reads standard input with ``read_message`` too."""

from __future__ import annotations

import os
from pathlib import Path

from adapters.config.settings import load_settings
from adapters.embedded import Letterlog
from adapters.mta.delivery import (
    Deadline,
    Envelope,
    MtaOptions,
    Spool,
    delivery_fields,
    lock_timeout,
    without_from_line,
)
from adapters.mta.replies import Outcome, stored, temporary
from adapters.startup.handoff import NOTHING_ON_INPUT, nothing_to_deliver
from domain.errors import MessageRejected


def read_message(fd: int, limit: int, spool_dir: Path | None = None) -> bytes:
    """All of ``fd`` (read directly: no reopening of /dev/stdin, which may belong to another
    user), or a ``MessageRejected`` as soon as it passes ``limit`` bytes. A large message
    waits in a file of ``spool_dir`` while it is read (``Spool``: one copy in memory, not
    its pieces and their join)."""
    spool = Spool(spool_dir)
    try:
        while chunk := os.read(fd, 1 << 20):
            if spool.size + len(chunk) > limit:
                raise MessageRejected(
                    f"message too large: more than {limit} bytes (max_message_size={limit})")
            spool.write(chunk)
        return spool.read()
    finally:
        spool.discard()


def store_message(data: Path, envelope: Envelope, options: MtaOptions, fd: int,
                  deadline: Deadline) -> Outcome:
    """Reads the message on ``fd`` and appends its delivery to the log, within ``deadline``
    (its guard refuses an append once the time is up); raises what went wrong."""
    limit = load_settings(data=data).max_message_size
    raw = read_message(fd, limit, data if data.is_dir() else None)
    if nothing_to_deliver(raw):  # a broken wrapper: the MTA keeps the mail (ADR 0067)
        status, _, text = NOTHING_ON_INPUT.partition(" ")
        return temporary(text, status)
    raw = without_from_line(raw)
    with Letterlog.open(data, create=False, read_models=False,
                        lock_timeout=lock_timeout(options.timeout)) as store:
        store.guard_appends(deadline.append_guard)
        fields = delivery_fields(
            store, raw, recipient=envelope.recipient, options=options,
            key_prefix=f"lda:{envelope.queue_id}" if envelope.queue_id else None,
            sender=envelope.sender, original_recipient=envelope.original_recipient,
            queue_id=envelope.queue_id, via="lda")
        d = store.deliver(**fields)
    return stored(d, fields)
