"""The local delivery agent: one message from file descriptor 0 into a recipient's mailbox,
in the manner of ``dovecot-lda``; the exit status tells the MTA what to do with it.

0 stored (or already stored: the same queue id, recipient and bytes); 75 anything a retry
may fix (the MTA keeps the message and tries again), empty input included; 65 too large
(whatever its structure, what the MTA hands over is stored: ADR 0067); 67 an
unknown account where accounts must exist; 64 a wrong command line. One line on standard
error, starting with an RFC 3463 code, says why (Postfix puts it in the DSN). lda never
creates a data directory: an unmounted volume must not become a new, empty store.

lda appends to the log only: the read models catch up with it on the next read, or in the
process that keeps them (``letterlog lmtp``, ``processes``). So a locked ``tables.sqlite``
delays nobody's mail.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from adapters.mta.delivery import (
    Deadline,
    MtaOptions,
    Spool,
    delivery_fields,
    lock_timeout,
    without_from_line,
)
from adapters.mta.replies import Outcome, classify, stored, temporary, without_queue_id
from adapters.startup.handoff import NOTHING_ON_INPUT, nothing_to_deliver
from domain.errors import MessageRejected, QuotaExceeded


@dataclass(frozen=True)
class Envelope:
    recipient: str
    sender: str | None = None  # None: not given; "" or "<>": the null sender (a bounce)
    original_recipient: str = ""
    queue_id: str = ""


def quota_permanent(data: Path, error: BaseException) -> bool:
    """Whether an over-quota ``error`` is to be answered as permanent (a setting)."""
    if not isinstance(error, QuotaExceeded):
        return False
    from adapters.config.settings import load_settings  # local: under the deadline, as in _deliver

    try:
        return load_settings(data=data).quota_exceeded == "permanent"
    except Exception:  # noqa: BLE001 - settings that cannot be read: the safe answer
        return False


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


def deliver(data: Path, envelope: Envelope, options: MtaOptions, *, fd: int = 0) -> Outcome:
    """Delivers the message on ``fd``; never raises. The deadline ends the process with
    exit status 75 if the delivery has not committed within ``options.timeout``."""
    deadline = Deadline(options.timeout, lambda: temporary(
        f"delivery timed out after {options.timeout:g} s (store busy or slow); "
        "try again later").line).start()
    logging.getLogger().addHandler(logging.NullHandler())
    logging.lastResort = None  # stderr holds the one status line, nothing else
    try:
        outcome = _deliver(data, envelope, options, fd, deadline)
    except BaseException as e:  # noqa: BLE001 - every failure is an answer to the MTA
        outcome = classify(e, data, quota_permanent=quota_permanent(data, e))
    finally:
        deadline.finish()
    outcome = without_queue_id(outcome, envelope.queue_id)
    syslog(outcome, envelope)
    return outcome


SYSLOG_SOCKET = "/dev/log"
"""Where lda's local log goes (``LETTERLOG_SYSLOG_SOCKET``; empty: nowhere): the system's
log, beside Postfix's own lines. Its stderr is the DSN's text, for the remote sender."""


def syslog(outcome: Outcome, envelope: Envelope) -> None:
    """One line in the system's log (facility mail, as Postfix's and dovecot-lda's): the
    queue id, the recipient, the code, the short reason and the detail the DSN leaves out
    (paths, the library's error, the account's usage). Best effort: no syslog, no line."""
    path = os.environ.get("LETTERLOG_SYSLOG_SOCKET", SYSLOG_SOCKET)
    if not path:
        return
    severity = 6 if outcome.exit_status == 0 else 4  # info, warning
    where = f"{envelope.queue_id}: " if envelope.queue_id else ""
    line = (f"<{2 * 8 + severity}>letterlog-lda[{os.getpid()}]: {where}"
            f"to=<{envelope.recipient}>, {outcome.logged}")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1.0)
            sock.sendto(line.encode("utf-8", "replace")[:8192], path)
    except OSError:
        pass


def _deliver(data: Path, envelope: Envelope, options: MtaOptions, fd: int,
             deadline: Deadline) -> Outcome:
    # local: the store's libraries load under the deadline (a slow import ends in 75, in time)
    from adapters.config.settings import load_settings
    from adapters.embedded import Letterlog

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
