"""A delivery from an MTA, as the local delivery agent and the LMTP server both make it: the
recipient's address split into account and detail, the mailbox chosen, the envelope kept,
an idempotency key bound to the message, and the deadline every wait is bounded by.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from domain.values import normalise_address

if TYPE_CHECKING:
    from adapters.face import Ingest

DEFAULT_TIMEOUT = 300.0
"""Seconds a delivery may wait in all (well under Postfix's 1000 s command_time_limit)."""


@dataclass(frozen=True)
class Envelope:
    """What the MTA says of one message besides its bytes (``letterlog lda``'s options)."""
    recipient: str
    sender: str | None = None  # None: not given; "" or "<>": the null sender (a bounce)
    original_recipient: str = ""
    queue_id: str = ""


@dataclass(frozen=True)
class MtaOptions:
    """How an MTA's deliveries are placed (the options of ``lda`` and ``lmtp``)."""

    mailbox: str | None = None  # every message to this mailbox (else INBOX)
    detail_mailbox: bool = False  # user+detail@domain to mailbox "detail", if it exists
    accounts_must_exist: bool = False  # an unknown account is refused (5.1.1), not opened
    recipient_delimiter: str = "+"
    envelope_headers: bool = False  # add Return-Path and Delivered-To, as dovecot-lda does
    timeout: float = DEFAULT_TIMEOUT


SPOOL_OVER = 1 << 20
"""Bytes of a message kept in memory as it arrives; past that, it goes to a file."""


class Spool:
    """A message that arrives in pieces, kept as one piece at the end with one copy of it
    in memory (issue 42, item 7): up to ``SPOOL_OVER`` bytes its pieces are joined; past
    that they go to an unlinked file (0600) in ``directory`` (the private data directory)
    and are read back in one ``read``, so the pieces and their join are never held
    together. A file that cannot be made or written (a read-only or full volume: the
    delivery then fails as it would) leaves the message in memory, never lost."""

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        self.directory = directory
        self.size = 0
        self._parts: list[bytes] = []
        self._file: Any = None
        self._spooling = directory is not None

    def write(self, piece: bytes) -> None:
        self.size += len(piece)
        if self._file is None and self._spooling and self.size > SPOOL_OVER:
            try:
                self._file = tempfile.TemporaryFile(dir=self.directory)  # noqa: SIM115
                self._file.writelines(self._parts)
            except OSError:
                self._to_memory()
            else:
                self._parts.clear()
        if self._file is not None:
            try:
                self._file.write(piece)
                return
            except OSError:
                self._to_memory()
        self._parts.append(piece)

    def _to_memory(self) -> None:
        """Back to memory: what the file holds, read back (a full volume mid-message)."""
        self._spooling = False
        if self._file is None:
            return
        with contextlib.suppress(OSError):
            self._file.flush()
        self._file.seek(0)
        self._parts[:0] = [self._file.read()]
        self._file.close()
        self._file = None

    def read(self) -> bytes:
        """The whole message (the spool is empty afterwards)."""
        if self._file is None:
            whole = b"".join(self._parts)
        else:
            self._file.flush()
            self._file.seek(0)
            whole = self._file.read()
            self._file.close()
            self._file = None
        self._parts.clear()
        return whole

    def discard(self) -> None:
        self._parts.clear()
        if self._file is not None:
            self._file.close()
            self._file = None


def split_recipient(address: str, delimiter: str = "+") -> tuple[str, str]:
    """``user+detail@domain`` -> (``user@domain``, ``detail``); the account is normalised
    (an address that is none raises InvalidCommand naming ``account``)."""
    local, at, domain = address.strip().strip("<>").rpartition("@")
    detail = ""
    if delimiter and at:
        base, sep, rest = local.partition(delimiter)
        if sep and base:
            local, detail = base, rest
    return normalise_address(f"{local}{at}{domain}"), detail


def without_from_line(raw: bytes) -> bytes:
    """An mbox ``From `` line in front of the message (Postfix's pipe flag F) is not part
    of it."""
    if raw.startswith(b"From "):
        end = raw.find(b"\n")
        return raw[end + 1:] if end >= 0 else b""
    return raw


NULL_SENDER = "<>"
"""The reverse path of a bounce (RFC 5321's null path), as the envelope keeps it."""


def reverse_path(sender: str | None) -> str | None:
    """The envelope's sender: None when the MTA said nothing; the null path ``<>`` for an
    empty one (pipe(8)'s ``null_sender=`` hands a bounce's over as ``--sender=``) or
    ``<>`` itself (LMTP's ``MAIL FROM:<>``), so a bounce is never stored as "no sender"."""
    if sender is None:
        return None
    sender = sender.strip()
    return NULL_SENDER if sender in ("", NULL_SENDER) else sender


def with_envelope_headers(raw: bytes, sender: str | None, recipient: str) -> bytes:
    """``Return-Path`` and ``Delivered-To`` in front, with the message's own line ending."""
    eol = b"\r\n" if raw.find(b"\r\n") == raw.find(b"\n") - 1 >= 0 else b"\n"
    path = sender if sender and sender.startswith("<") else f"<{sender or ''}>"
    head = f"Return-Path: {path}".encode() + eol
    if recipient:
        head += f"Delivered-To: {recipient}".encode() + eol
    return head + raw


def delivery_fields(store: Ingest, raw: bytes, *, recipient: str, options: MtaOptions,
                    key_prefix: str | None, **envelope: str | None) -> dict[str, Any]:
    """``deliver``'s fields for one recipient of one message. ``key_prefix``: the
    idempotency key's first part (an MTA's queue id, or ``lmtp``), bound to the recipient
    and the message's SHA-256, so a retry of this message is a duplicate and nothing else
    ever is; None: no key. The key is a hash of the three: a key's claim is written in the
    clear, and the queue id and recipient are personal data (sealed in the envelope)."""
    account, detail = split_recipient(recipient, options.recipient_delimiter)
    mailbox = options.mailbox or (detail if options.detail_mailbox and detail else "INBOX")
    if options.accounts_must_exist:
        store.require_account(account)  # AccountNotFound
    if mailbox != "INBOX" and not store.takes_messages(account, mailbox):
        # as dovecot-lda does for a mailbox that does not exist, or is \Noselect (a name
        # kept for the mailboxes below it: it takes no messages)
        mailbox = "INBOX"
    key = None
    if key_prefix is not None:  # hashed: the key's claim is not sealed, the envelope is
        digest = hashlib.sha256(raw).hexdigest()
        key = hashlib.sha256(f"{key_prefix}\0{recipient.lower()}\0{digest}".encode()).hexdigest()
    envelope["sender"] = reverse_path(envelope.get("sender"))
    if options.envelope_headers:
        raw = with_envelope_headers(raw, envelope["sender"], recipient)
    return {"account": account, "mailbox": mailbox, "raw": raw, "idempotency_key": key,
            "envelope": {**{k: v for k, v in envelope.items() if v}, "recipient": recipient,
                         "detail": detail, "arrived_at": datetime.now(UTC)}}


def lock_timeout(timeout: float) -> int:
    """Seconds one attempt may wait for the log's lock: a share of the whole delivery's
    ``timeout``, so that several attempts fit in it."""
    return max(1, min(30, int(timeout / 5)))


class Deadline:
    """Bounds a whole delivery in time: at ``seconds`` a watchdog thread writes ``line()``
    to standard error and ends the process with exit status 75, so the MTA retries rather
    than killing it at its own limit and bouncing the message.

    It never turns a committed delivery into a failure: as the store's ``append_guard`` it
    refuses to start an append once the deadline has passed, waits (up to ``grace``) for an
    append in progress, and does nothing if that append committed. Only an append still
    running after ``grace`` is abandoned; if it did commit, the MTA's retry is answered as
    the duplicate it is (the idempotency key)."""

    def __init__(self, seconds: float, line: Callable[[], str], *, grace: float = 10.0,
                 exit_status: int = 75) -> None:
        self.seconds = seconds
        self.grace = grace
        self._line = line
        self._exit_status = exit_status
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.committed = False
        self.expired = False

    def start(self) -> Deadline:
        threading.Thread(target=self._watch, name="delivery-deadline", daemon=True).start()
        return self

    def finish(self) -> None:
        self._done.set()

    @contextmanager
    def append_guard(self) -> Iterator[None]:
        with self._lock:
            if self.expired:
                raise TimeoutError(f"delivery timed out after {self.seconds:g} s")
            yield
            self.committed = True

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        got = self._lock.acquire(timeout=self.grace)
        if got:
            if self.committed or self._done.is_set():
                self._lock.release()
                return
            self.expired = True
        try:
            os.write(2, (self._line() + "\n").encode("ascii", "replace"))
        finally:
            os._exit(self._exit_status)

