"""What a delivery's outcome means to an MTA: an exit status (sysexits.h) for the local
delivery agent, an SMTP reply for LMTP, and an RFC 3463 enhanced status code for both.

The rule: only what no retry can fix is permanent (the bytes are not a message, the message
is too large, the account does not exist where accounts must exist, the command line is
wrong). Everything else -- a busy or locked store, a full disk, an I/O error, a read-only or
missing store, a permission problem, a timeout and any error nobody foresaw -- is temporary,
so the MTA keeps the message in its queue and tries again: exit 75, reply 4.x.x. Postfix
bounces a message on any other non-zero exit status, so exit 1 or 2 would lose it.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.errors import (
    AccountNotFound,
    InvalidCommand,
    LetterlogError,
    MessageRejected,
    PermissionDenied,
    QuotaExceeded,
    SettingsError,
    StoreBusy,
    StoreUnavailable,
)
from projections.tablestore import TableStoreUnavailable

EX_OK = 0
EX_USAGE = 64
EX_DATAERR = 65
EX_NOUSER = 67
EX_NOPERM = 77
EX_TEMPFAIL = 75


@dataclass(frozen=True)
class Outcome:
    """One delivery's answer: ``exit_status`` for lda, ``smtp`` (the reply code) for LMTP,
    ``status`` the RFC 3463 code, ``text`` a short reason a remote sender may read (the MTA
    copies it into its DSN), ``detail`` what happened, for the local log only (file paths,
    the library's error, the account's usage): ADR 0067."""

    exit_status: int
    smtp: int
    status: str
    text: str
    detail: str = ""

    @property
    def temporary(self) -> bool:
        return self.status.startswith("4.")

    @property
    def line(self) -> str:
        """What lda writes on stderr (Postfix puts it in its DSN): the code first."""
        return f"{self.status} {self.text}"

    @property
    def reply(self) -> str:
        return f"{self.smtp} {self.status} {self.text}"

    @property
    def logged(self) -> str:
        """The local log's line: the code, the short reason and the detail."""
        detail = f" ({self.detail})" if self.detail and self.detail != self.text else ""
        return f"{self.status} {self.text}{detail}"


def delivered(text: str, detail: str = "") -> Outcome:
    return Outcome(EX_OK, 250, "2.0.0", one_line(text), one_line(detail))


def stored(d: Any, fields: dict[str, Any]) -> Outcome:
    """A delivery that committed (or had, the MTA's retry): the message's letterlog id for
    the MTA's log; where it went for the local log only."""
    what = "already delivered" if d.duplicate else "delivered"
    return delivered(f"{what} as {d.message_id}",
                     f"to {fields['account']} {fields['mailbox']} uid {d.uid}")


NO_QUEUE_ID = ("warning: no --queue-id, so a retry after a crash between the commit and "
               "the exit stores a second copy (pass --queue-id=${queue_id})")


def without_queue_id(outcome: Outcome, queue_id: str) -> Outcome:
    """lda's success, with a warning in its line when the MTA gave no queue id (the line
    goes to the MTA's log: Postfix's pipe(8) records a command's output)."""
    if queue_id or outcome.exit_status != EX_OK:
        return outcome
    return Outcome(outcome.exit_status, outcome.smtp, outcome.status,
                   f"{outcome.text}; {NO_QUEUE_ID}", outcome.detail)


def temporary(text: str, status: str = "4.3.0", smtp: int = 451, detail: str = "") -> Outcome:
    return Outcome(EX_TEMPFAIL, smtp, status, one_line(text), one_line(detail))


def usage(text: str) -> Outcome:
    return Outcome(EX_USAGE, 501, "5.5.4", one_line(f"usage: {text}"))


_DISK_FULL = ("disk is full", "no space left", "database or disk is full")
_READ_ONLY = ("readonly database", "read-only file system", "read-only filesystem")
_TEXT = re.compile(r"[^\x20-\x7e]")
LATER = "try again later"


def one_line(text: str, limit: int = 400) -> str:
    """ASCII on one line (an SMTP reply and a DSN take nothing else), at most ``limit``."""
    flat = _TEXT.sub("?", " ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def no_space_left(path: Path) -> bool:
    """Whether the filesystem holding ``path`` (or its nearest existing parent) is full:
    SQLite often reports a full disk as a "disk I/O error"."""
    for where in (path, *path.parents):
        try:
            st = os.statvfs(where)
        except OSError:
            continue
        return st.f_bavail == 0 or (st.f_favail == 0 and st.f_files > 0)
    return False


def over_quota(error: QuotaExceeded, permanent: bool = False) -> Outcome:
    """The account is over its quota: temporary (452 4.2.2, exit 75: the MTA keeps the
    message and retries, room may be freed) unless the administrator chose permanent
    (552 5.2.2, exit 77: the MTA bounces it; ``LETTERLOG_QUOTA_EXCEEDED=permanent``). The
    account's limit and usage go to the local log only."""
    if permanent:
        return Outcome(EX_NOPERM, 552, "5.2.2", "mailbox full", one_line(str(error)))
    return temporary(f"mailbox full, {LATER}", "4.2.2", 452, str(error))


def classify(error: BaseException, data: Path | None = None, *,
             quota_permanent: bool = False) -> Outcome:
    """The outcome of a delivery that raised ``error`` (``data``: the store's directory, to
    tell a full disk from other I/O errors; ``quota_permanent``: what over quota means)."""
    if isinstance(error, QuotaExceeded):
        return over_quota(error, quota_permanent)
    outcome = _classify(error)
    if outcome.temporary and outcome.status != "4.3.1" and data is not None \
            and no_space_left(data):
        return temporary(f"mail system full, {LATER}", "4.3.1", 452, outcome.detail)
    return outcome


def _classify(error: BaseException) -> Outcome:
    text = str(error) or type(error).__name__
    detail = one_line(text)
    if isinstance(error, MessageRejected):
        if "too large" in text:
            return Outcome(EX_DATAERR, 552, "5.3.4", "message too large", detail)
        return Outcome(EX_DATAERR, 554, "5.6.0", "not a message", detail)
    if isinstance(error, AccountNotFound):
        return Outcome(EX_NOUSER, 550, "5.1.1", "no such mailbox here", detail)
    if isinstance(error, InvalidCommand) and text.startswith("account:"):
        return Outcome(EX_NOUSER, 553, "5.1.3", "recipient is not a mail address", detail)
    lowered = text.lower()
    if not isinstance(error, LetterlogError):
        detail = one_line(f"{type(error).__name__}: {text}")
    if (isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
            s in lowered for s in _DISK_FULL):
        return temporary(f"mail system full, {LATER}", "4.3.1", 452, detail)
    if (isinstance(error, OSError) and error.errno == errno.EROFS) or any(
            s in lowered for s in _READ_ONLY):
        return temporary(f"mail store read-only, {LATER}", "4.3.0", 451, detail)
    if isinstance(error, StoreBusy) or "locked" in lowered or "busy" in lowered:
        return temporary(f"mail store busy, {LATER}", detail=detail)
    if isinstance(error, StoreUnavailable | TableStoreUnavailable):  # HBase: the payloads
        return temporary(f"mail store unavailable, {LATER}", "4.3.2", detail=detail)
    if isinstance(error, PermissionDenied):  # lda --as USER: a configuration to mend
        return temporary(f"mail system configuration error, {LATER}", "4.3.5", detail=detail)
    if isinstance(error, SettingsError):
        return temporary(f"mail system configuration error, {LATER}", "4.3.5", detail=detail)
    if isinstance(error, OSError) and error.filename:
        detail = one_line(f"{type(error).__name__}: {error.filename}: "
                          f"{error.strerror or text}")
    # a read-only database, an I/O error, a corrupt store, a bug: a retry may fix it, a
    # bounce would lose the message
    return temporary(f"local error in processing, {LATER}", detail=detail)
