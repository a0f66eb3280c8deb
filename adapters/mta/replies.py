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

from domain.errors import (
    AccountNotFound,
    InvalidCommand,
    MessageRejected,
    PermissionDenied,
    QuotaExceeded,
    SettingsError,
    StoreBusy,
    StoreUnavailable,
)

EX_OK = 0
EX_USAGE = 64
EX_DATAERR = 65
EX_NOUSER = 67
EX_NOPERM = 77
EX_TEMPFAIL = 75


@dataclass(frozen=True)
class Outcome:
    """One delivery's answer: ``exit_status`` for lda, ``smtp`` (the reply code) for LMTP,
    ``status`` the RFC 3463 code, ``text`` one line for a person."""

    exit_status: int
    smtp: int
    status: str
    text: str

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


def delivered(text: str) -> Outcome:
    return Outcome(EX_OK, 250, "2.0.0", one_line(text))


def temporary(text: str, status: str = "4.3.0", smtp: int = 451) -> Outcome:
    return Outcome(EX_TEMPFAIL, smtp, status, one_line(text))


def usage(text: str) -> Outcome:
    return Outcome(EX_USAGE, 501, "5.5.4", one_line(f"usage: {text}"))


_DISK_FULL = ("disk is full", "no space left", "database or disk is full")
_TEXT = re.compile(r"[^\x20-\x7e]")


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
    (552 5.2.2, exit 77: the MTA bounces it; ``LETTERLOG_QUOTA_EXCEEDED=permanent``)."""
    if permanent:
        return Outcome(EX_NOPERM, 552, "5.2.2", one_line(f"mailbox full: {error}"))
    return temporary(f"mailbox full, try again later: {error}", "4.2.2", 452)


def classify(error: BaseException, data: Path | None = None, *,
             quota_permanent: bool = False) -> Outcome:
    """The outcome of a delivery that raised ``error`` (``data``: the store's directory, to
    tell a full disk from other I/O errors; ``quota_permanent``: what over quota means)."""
    if isinstance(error, QuotaExceeded):
        return over_quota(error, quota_permanent)
    outcome = _classify(error)
    if outcome.temporary and outcome.status != "4.3.1" and data is not None \
            and no_space_left(data):
        return temporary(f"mail system full: {outcome.text}", "4.3.1", 452)
    return outcome


def _classify(error: BaseException) -> Outcome:
    text = str(error) or type(error).__name__
    if isinstance(error, MessageRejected):
        if "too large" in text:
            return Outcome(EX_DATAERR, 552, "5.3.4", one_line(text))
        return Outcome(EX_DATAERR, 554, "5.6.0", one_line(text))
    if isinstance(error, AccountNotFound):
        return Outcome(EX_NOUSER, 550, "5.1.1", one_line(f"{text}: no such mailbox here"))
    if isinstance(error, InvalidCommand) and text.startswith("account:"):
        return Outcome(EX_NOUSER, 553, "5.1.3", one_line(f"recipient {text}"))
    lowered = text.lower()
    if (isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
            s in lowered for s in _DISK_FULL):
        return temporary(f"mail system full: {text}", "4.3.1", 452)
    if isinstance(error, StoreBusy) or "locked" in lowered or "busy" in lowered:
        return temporary(f"store busy, try again later: {text}")
    if isinstance(error, StoreUnavailable):
        return temporary(f"store unavailable: {text}", "4.3.2")
    if isinstance(error, PermissionDenied):  # lda --as USER: a configuration to mend
        return temporary(f"configuration: {text}", "4.3.5")
    if isinstance(error, SettingsError):
        return temporary(f"configuration: {text}", "4.3.5")
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else ""
        return temporary(f"{where}{error.strerror or text}")
    # a read-only database, an I/O error, a corrupt store, a bug: a retry may fix it, a
    # bounce would lose the message
    return temporary(f"{type(error).__name__}: {text}")
