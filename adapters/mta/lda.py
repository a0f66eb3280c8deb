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
from pathlib import Path

from adapters.mta.delivery import Deadline, Envelope, MtaOptions
from adapters.mta.replies import Outcome, classify, temporary, without_queue_id
from domain.errors import QuotaExceeded


def quota_permanent(data: Path, error: BaseException) -> bool:
    """Whether an over-quota ``error`` is to be answered as permanent (a setting)."""
    if not isinstance(error, QuotaExceeded):
        return False
    from adapters.config.settings import load_settings  # local: under the deadline, as in ldastore

    try:
        return load_settings(data=data).quota_exceeded == "permanent"
    except Exception:  # noqa: BLE001 - settings that cannot be read: the safe answer
        return False


def deliver(data: Path, envelope: Envelope, options: MtaOptions, *, fd: int = 0) -> Outcome:
    """Delivers the message on ``fd``; never raises. The deadline ends the process with
    exit status 75 if the delivery has not committed within ``options.timeout``."""
    deadline = Deadline(options.timeout, lambda: temporary(
        f"delivery timed out after {options.timeout:g} s (store busy or slow); "
        "try again later").line).start()
    logging.getLogger().addHandler(logging.NullHandler())
    logging.lastResort = None  # stderr holds the one status line, nothing else
    try:
        # the store's libraries load under the deadline (a slow import ends in 75, in time)
        from adapters.mta.ldastore import store_message  # local: under the deadline

        outcome = store_message(data, envelope, options, fd, deadline)
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
