"""Typed errors. Every error names what is wrong; nothing is written when one is raised."""

from __future__ import annotations


class LetterlogError(Exception):
    """Base of every error letterlog raises on purpose."""


class InvalidCommand(LetterlogError):
    """A command's input is malformed (bad field, bad flag, bad label...)."""


class NotFound(LetterlogError):
    """An account, mailbox or message that does not exist."""


class MailboxNotFound(NotFound):
    pass


class MessageNotFound(NotFound):
    pass


class AccountNotFound(NotFound):
    pass


class MailboxExists(LetterlogError):
    pass


class MailboxHasInferiors(LetterlogError):
    """A mailbox that is already ``\\Noselect`` cannot be deleted while mailboxes below it
    (``NAME/...``) exist (RFC 3501 DELETE); nothing is written."""


class MessageRejected(LetterlogError):
    """Bytes that cannot be accepted as a message (not a message, too large, too deep...)."""


class IdempotencyKeyReused(LetterlogError):
    """An idempotency key claimed by a delivery of other bytes: not a retry of it. Nothing is
    written; a key never makes a different message count as already delivered."""


class QuotaExceeded(LetterlogError):
    """A delivery, upload or copy would take an account past its quota (bytes or messages);
    nothing is written. Names the account, the limit, the usage and what was asked."""

    def __init__(self, account: str, resource: str, limit: int, used: int, adding: int
                 ) -> None:
        self.account, self.resource, self.limit = account, resource, limit
        self.used, self.adding = used, adding
        super().__init__(
            f"quota: {account} is over its {resource} quota: {used} of {limit} {resource} "
            f"used, {adding} more refused; nothing was stored")

    def __reduce__(self) -> tuple[type, tuple[str, str, int, int, int]]:
        return type(self), (self.account, self.resource, self.limit, self.used, self.adding)


class ExtractionRefused(LetterlogError):
    """The extraction policy does not allow another extraction (limit reached, date passed)."""


class InvalidState(LetterlogError):
    """The command is not allowed in the message's current state (purged, incomplete...)."""


class PayloadMissing(LetterlogError):
    """A payload referenced by an event is absent from the payload store."""


class CorruptEvent(LetterlogError):
    """An event in the log cannot be decoded or is unknown; names position, aggregate, version."""


class SettingsError(LetterlogError):
    """Invalid configuration."""


class StoreBusy(LetterlogError):
    """The event store's write lock is held by another writer; nothing was written. The
    event store adapter raises it in place of its driver's error ("database is locked")."""


class StoreUnavailable(LetterlogError):
    """The data directory or event store cannot be used (missing, not a store, unreadable).
    ``hint``: what a person at a terminal might do about it (the CLI prints it; an MTA's
    delivery never does: ``init`` on an unmounted volume makes an empty store there)."""

    def __init__(self, message: str = "", *, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


class StoreNotPrivate(StoreUnavailable):
    """The data directory or its key store is open to other users (group or other
    permission bits): refused, naming the file, its mode and the ``chmod`` that fixes it,
    unless ``LETTERLOG_ALLOW_SHARED_KEYS=true`` (then only a warning)."""


class PermissionDenied(LetterlogError):
    """The caller lacks a right (RFC 4314) the command needs; ``missing`` names it (``"a"``
    ... or ``"administrator"`` for a command only the administrator may run). Nothing is
    written. A mailbox the caller may not look up (``l``) is never named by this error: it
    is refused as not found, exactly as a mailbox that does not exist."""

    def __init__(self, message: str, missing: str = "", command: str = "") -> None:
        super().__init__(message)
        self.missing = missing
        self.command = command


class RuleNotFound(NotFound):
    """An event rule that does not exist (or was deleted)."""


class RuleExists(LetterlogError):
    """An event rule of that name exists already; nothing is written."""


class RuleEventNotFound(NotFound):
    """A rule event (raised by an event rule for a message) that does not exist."""
