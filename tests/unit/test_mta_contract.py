"""The MTA contract's pure parts: which failures are temporary, how a recipient names an
account, what an mbox From_ line is, and a deadline that never undoes a commit."""

from __future__ import annotations

import errno
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from adapters.mta.delivery import split_recipient, with_envelope_headers, without_from_line
from adapters.mta.replies import EX_TEMPFAIL, classify, one_line
from domain.errors import (
    AccountNotFound,
    CorruptEvent,
    IdempotencyKeyReused,
    InvalidCommand,
    MessageRejected,
    QuotaExceeded,
    SettingsError,
    StoreBusy,
    StoreUnavailable,
)
from projections.tablestore import TableStoreUnavailable


@pytest.mark.parametrize(("error", "exit_status", "reply"), [
    (MessageRejected("not a message: empty input (0 bytes)"), 65, "554 5.6.0"),
    (MessageRejected("message too large: 9 bytes exceeds max_message_size=8"), 65, "552 5.3.4"),
    (AccountNotFound("account 'x@example.org' does not exist"), 67, "550 5.1.1"),
    (InvalidCommand("account: 'x' is not an e-mail address"), 67, "553 5.1.3"),
    (StoreBusy("event store busy: database is locked"), 75, "451 4.3.0"),
    (StoreUnavailable("d: no letterlog store here"), 75, "451 4.3.2"),
    (TableStoreUnavailable("HBase Thrift server at h:9090 is unreachable"), 75, "451 4.3.2"),
    (OSError(errno.ENOSPC, "No space left on device"), 75, "452 4.3.1"),
    (sqlite3.OperationalError("database or disk is full"), 75, "452 4.3.1"),
    (sqlite3.OperationalError("attempt to write a readonly database"), 75, "451 4.3.0"),
    (sqlite3.OperationalError("disk I/O error"), 75, "451 4.3.0"),
    (OSError(errno.EROFS, "Read-only file system"), 75, "451 4.3.0"),
    (PermissionError(errno.EACCES, "Permission denied"), 75, "451 4.3.0"),
    (SettingsError("invalid settings: LETTERLOG_X"), 75, "451 4.3.5"),
    (CorruptEvent("position 7: cannot decode"), 75, "451 4.3.0"),
    (IdempotencyKeyReused("idempotency_key: 'k' was used"), 75, "451 4.3.0"),
    (TimeoutError("delivery timed out"), 75, "451 4.3.0"),
    (RuntimeError("a bug"), 75, "451 4.3.0"),
])
def test_only_what_no_retry_can_fix_is_permanent(error, exit_status, reply):
    outcome = classify(error)
    assert outcome.exit_status == exit_status
    assert outcome.reply.startswith(reply + " ")
    assert outcome.temporary == (exit_status == EX_TEMPFAIL)
    assert outcome.exit_status not in (1, 2, 70, 78)


def test_a_reason_is_one_line_of_ascii():
    assert one_line("a\nb\tc\u00e9" + "x" * 500).startswith("a b c?xx")
    assert len(one_line("x" * 500)) == 400


@pytest.mark.parametrize(("address", "account", "detail"), [
    ("bob@example.org", "bob@example.org", ""),
    ("Bob+Lists@Example.org", "bob@example.org", "Lists"),
    ("<bob+a+b@example.org>", "bob@example.org", "a+b"),
    ("+tag@example.org", "+tag@example.org", ""),  # no user before the delimiter: no detail
])
def test_a_recipient_names_an_account_and_a_detail(address, account, detail):
    assert split_recipient(address) == (account, detail)


def test_no_delimiter_keeps_the_address_whole():
    assert split_recipient("bob+x@example.org", "") == ("bob+x@example.org", "")


def test_a_recipient_that_is_no_address_is_refused():
    with pytest.raises(InvalidCommand, match="account"):
        split_recipient("nobody")


def test_an_mbox_from_line_is_dropped_and_nothing_else():
    assert without_from_line(b"From a@b Thu Nov 26 12:00:00 2026\nSubject: x\n\ny\n") == \
        b"Subject: x\n\ny\n"
    assert without_from_line(b"From: a@b\n\ny\n") == b"From: a@b\n\ny\n"


def test_envelope_headers_take_the_message_line_ending():
    assert with_envelope_headers(b"S: x\n\nb\n", "a@b", "c@d").startswith(
        b"Return-Path: <a@b>\nDelivered-To: c@d\nS: x")
    assert with_envelope_headers(b"S: x\r\n\r\nb\r\n", "", "c@d").startswith(
        b"Return-Path: <>\r\nDelivered-To: c@d\r\n")


DEADLINE = textwrap.dedent("""
    import sys, threading, time
    from adapters.mta.delivery import Deadline
    d = Deadline(0.3, lambda: "4.3.0 timed out", grace=120)
    if sys.argv[1] == "commit-spans-the-deadline":
        with d.append_guard():  # the append begun before the deadline's clock runs out
            d.start()
            time.sleep(0.8)     # and committing after it
        time.sleep(0.5)
        print("returned")
    else:
        d.start()
        threading.Event().wait()  # stuck before any append, for ever
        print("returned")
""")


def run_deadline(case: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", DEADLINE, case], capture_output=True,
                          text=True, timeout=60, check=False)


def test_a_deadline_ends_a_stuck_delivery_with_75_and_its_line():
    p = run_deadline("stuck")
    assert (p.returncode, p.stdout, p.stderr) == (75, "", "4.3.0 timed out\n")


def test_a_deadline_never_undoes_an_append_that_committed():
    p = run_deadline("commit-spans-the-deadline")
    assert (p.returncode, p.stdout, p.stderr) == (0, "returned\n", "")


@pytest.mark.parametrize("error", [
    StoreUnavailable("/srv/mail/data: no letterlog store here (no such directory)",
                     hint="`letterlog --data /srv/mail/data init` makes one"),
    sqlite3.OperationalError("disk I/O error"),
    sqlite3.OperationalError("attempt to write a readonly database"),
    PermissionError(errno.EACCES, "Permission denied", "/srv/mail/data/payloads/ab"),
    OSError(errno.EROFS, "Read-only file system", "/srv/mail/data/events.sqlite"),
    CorruptEvent("position 7: cannot decode"),
    SettingsError("invalid settings: LETTERLOG_X=/etc/secret"),
    RuntimeError("a bug in /opt/letterlog/adapters/x.py"),
    QuotaExceeded("bob@example.org", "messages", 1, 1, 1),
    MessageRejected("message too large: 9 bytes exceeds max_message_size=8"),
    AccountNotFound("account 'x@example.org' does not exist"),
], ids=lambda e: type(e).__name__)
def test_a_reply_tells_the_sender_a_code_and_a_short_reason_the_log_the_rest(error):
    """Issue 42, item 5 (ADR 0067): no path, no library error, no usage in what the MTA
    copies into its DSN; the local log line keeps them."""
    outcome = classify(error)
    assert "/" not in outcome.text and "Error" not in outcome.text, outcome
    assert "init" not in outcome.text and "quota" not in outcome.text, outcome
    assert len(outcome.text) <= 60, outcome
    assert str(error).split(":")[0] in outcome.logged or type(error).__name__ in outcome.logged


@pytest.mark.parametrize("error", [
    sqlite3.OperationalError("attempt to write a readonly database"),
    OSError(errno.EROFS, "Read-only file system"),
    StoreUnavailable("/srv/mail/data: on a read-only filesystem"),
], ids=["sqlite", "erofs", "datadir"])
def test_a_read_only_store_is_reported_as_read_only(error):
    outcome = classify(error)
    assert (outcome.exit_status, outcome.status) == (75, "4.3.0")
    assert "read-only" in outcome.text and "permission" not in outcome.logged.lower()
