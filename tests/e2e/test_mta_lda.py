"""``letterlog lda`` as an MTA runs it: one message on file descriptor 0, an exit status
from sysexits.h, one stderr line starting with an RFC 3463 code, and no fault that turns a
message into a bounce (exit 75 for everything a retry may fix). Real SQLite, real
filesystems made full or read-only, a real second writer holding the lock."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.mta_support import (
    BOB,
    assert_one_status_line,
    envelope_of_first,
    fill,
    lda,
    letterlog,
    listing,
    remount,
    stored,
    tmpfs,
    write_locked,
)
from tests.factories import CORPUS, make_mail


def test_a_message_on_standard_input_is_stored_byte_exact_with_its_envelope(env, data):
    raw = (CORPUS / "rubymail__plain-basic_email.eml").read_bytes()
    code, err = lda(env, data, b"From MAILER-DAEMON Thu Nov 26 12:00:00 2026\n" + raw,
                    "--sender", "ada@example.net", "--original-recipient", "robert@example.org",
                    "--queue-id", "4XyZ1", recipient="bob+lists@example.org")
    assert (code, err) == (0, "")
    assert stored(env, data, BOB) == [raw]  # the mbox From_ line is not part of it
    envelope = envelope_of_first(env, data, BOB)
    assert {k: v for k, v in envelope.items() if k != "arrived_at"} == {
        "sender": "ada@example.net", "recipient": "bob+lists@example.org",
        "original_recipient": "robert@example.org", "detail": "lists", "queue_id": "4XyZ1",
        "via": "lda"}
    assert envelope["arrived_at"]


def test_a_success_names_the_message_id_and_warns_without_a_queue_id(env, data, syslog):
    """Issue 42, item 6: lda's success line (stdout: Postfix's pipe(8) logs it) names the
    letterlog id; without --queue-id it warns that a retry after a crash would store a
    second copy (in that line and in the local log)."""
    env = {**env, "LETTERLOG_SYSLOG_SOCKET": str(syslog.path)}
    with_id = letterlog(env, data, "lda", "--recipient", BOB, "--queue-id", "Q9",
                        stdin=make_mail("one"))
    without = letterlog(env, data, "lda", "--recipient", BOB, stdin=make_mail("two"))
    assert (with_id.returncode, with_id.stderr, without.returncode, without.stderr) == (
        0, b"", 0, b"")
    ids = [row["message_id"] for row in reversed(listing(env, data, BOB))]
    assert with_id.stdout.decode() == f"2.0.0 delivered as {ids[0]}\n"
    line = without.stdout.decode()
    assert line.startswith(f"2.0.0 delivered as {ids[1]}; warning: no --queue-id") \
        and line.count("\n") == 1, line
    logged = syslog.lines()
    assert "Q9: to=<bob@example.org>, 2.0.0 delivered as" in logged[0], logged
    assert "warning: no --queue-id" in logged[1] and "warning" not in logged[0], logged


def test_envelope_headers_only_when_asked(env, data):
    raw = make_mail("headers")
    assert lda(env, data, raw, "--sender", "ada@example.net")[0] == 0
    assert lda(env, data, raw, "--sender", "ada@example.net", "--envelope-headers")[0] == 0
    plain, headed = stored(env, data, BOB)
    assert plain == raw
    assert headed == b"Return-Path: <ada@example.net>\r\nDelivered-To: " + BOB.encode() \
        + b"\r\n" + raw


def test_the_detail_picks_a_mailbox_that_exists_else_inbox(env, data):
    assert letterlog(env, data, "mailbox", "create", BOB, "lists",
                     "--create-account").returncode == 0
    assert lda(env, data, make_mail("a"), "--detail-mailbox",
               recipient="bob+lists@example.org")[0] == 0
    assert lda(env, data, make_mail("b"), "--detail-mailbox",
               recipient="bob+nosuch@example.org")[0] == 0
    p = letterlog(env, data, "--json", "list", BOB, "--mailbox", "lists")
    assert [b"a" in line for line in p.stdout.splitlines()] == [True]
    assert len(listing(env, data, BOB)) == 1  # +nosuch went to INBOX


def test_a_retry_of_the_same_queue_id_is_stored_once_a_reused_one_is_not_a_duplicate(
        env, data):
    first, second = make_mail("first"), make_mail("second")
    assert lda(env, data, first, "--queue-id", "ABC")[0] == 0
    assert lda(env, data, first, "--queue-id", "ABC")[0] == 0  # the MTA's retry
    assert lda(env, data, second, "--queue-id", "ABC")[0] == 0  # a short id, repeated
    assert stored(env, data, BOB) == [first, second]


CONTROL_BYTES = (b"Received: from mx.example.net by mx.example.org; Thu, 26 Nov 2026\r\n"
                 b"Subject: \x01\x02\x03 an old mailer's \x00 header\x7f\r\n"
                 b"X-Junk: \x04\x05\x06\x07\x08\x0e\x0f\r\n"
                 b"\r\nbody\r\n")
"""Mail whose header block has control bytes, as old or broken mailers send it: real mail,
which dovecot-lda stores (the API's deliver refuses it as binary data)."""


def test_a_header_block_with_control_bytes_is_stored_as_handed_over(env, data):
    code, err = lda(env, data, CONTROL_BYTES, "--queue-id", "C1")
    assert (code, err) == (0, "")
    assert stored(env, data, BOB) == [CONTROL_BYTES]


@pytest.mark.parametrize("raw", [b"", b" \r\n\r\n", b"From MAILER-DAEMON Thu Nov 26\n"],
                         ids=["empty", "blank", "from-line-only"])
def test_no_message_on_standard_input_is_a_temporary_failure(env, data, raw):
    """A broken wrapper hands over nothing: the MTA must keep the mail (75), not bounce it."""
    code, err = lda(env, data, raw, "--queue-id", "E1")
    assert code == 75
    assert_one_status_line(err, "4.3.0")
    assert "standard input" in err
    assert letterlog(env, data, "list", BOB).returncode == 2  # nothing stored: no account


@pytest.mark.parametrize(("raw", "args", "code", "status"), [
    (b"Subject: x\r\n\r\n" + b"y" * 3000, (), 65, "5.3.4"),
    (make_mail(), ("--accounts-must-exist",), 67, "5.1.1"),
    (make_mail(), ("--no-such-option",), 64, "5.5.4"),
])
def test_permanent_refusals_name_the_problem_and_store_nothing(env, data, raw, args, code,
                                                               status):
    small = {**env, "LETTERLOG_MAX_MESSAGE_SIZE": "2048"}
    got, err = lda(small, data, raw, *args, recipient="carol@example.org")
    assert got == code
    assert_one_status_line(err, status)
    assert letterlog(env, data, "list", "carol@example.org").returncode == 2  # no account


def test_a_recipient_that_is_no_address_is_refused(env, data):
    code, err = lda(env, data, make_mail(), recipient="not-an-address")
    assert code == 67
    assert_one_status_line(err, "5.1.3")


def test_a_missing_store_is_a_temporary_failure_and_is_never_created(env, tmp_path, syslog):
    missing = tmp_path / "unmounted" / "data"
    code, err = lda({**env, "LETTERLOG_SYSLOG_SOCKET": str(syslog.path)}, missing,
                    make_mail(), "--queue-id", "M1")
    assert code == 75
    assert_one_status_line(err, "4.3.2")
    assert not missing.exists() and not missing.parent.exists()
    # the sender reads a code and a short reason; the local log the path; nobody is told to
    # run init (on an unmounted volume it would make an empty store): ADR 0067
    assert str(tmp_path) not in err and "init" not in err
    [line] = syslog.lines()
    assert "M1: to=<bob@example.org>, 4.3.2 " in line and str(missing) in line, line
    assert "init" not in line, line


def test_a_missing_store_still_tells_a_person_at_a_terminal_how_to_make_one(env, tmp_path):
    p = letterlog(env, tmp_path / "typo", "list", BOB)
    assert p.returncode == 2
    assert b"is not mounted, mount it" in p.stderr and b"init` makes one" in p.stderr


def test_a_store_that_is_not_one_is_a_temporary_failure(env, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "events.sqlite").write_bytes(b"not a database" * 100)
    code, err = lda(env, data, make_mail())
    assert code == 75
    assert_one_status_line(err, "4.3.2")


def test_a_read_only_store_defers_and_takes_the_retry(env, tmp_path, syslog):
    with tmpfs(tmp_path / "volume") as volume:
        data = volume / "data"
        assert letterlog(env, data, "init").returncode == 0
        remount(volume, "ro")
        raw = make_mail("read-only")
        code, err = lda({**env, "LETTERLOG_SYSLOG_SOCKET": str(syslog.path)}, data, raw,
                        "--queue-id", "Q1")
        assert code == 75
        assert_one_status_line(err, "4.3.0")
        assert "read-only" in err  # not a permissions problem (issue 42, item 5)
        [line] = syslog.lines()
        assert "read-only" in line and "readable and writable" not in line, line
        remount(volume, "rw")
        assert lda(env, data, raw, "--queue-id", "Q1")[0] == 0
        assert stored(env, data, BOB) == [raw]


def test_a_full_disk_defers_and_takes_the_retry(env, tmp_path):
    with tmpfs(tmp_path / "volume", "2m") as volume:
        data = volume / "data"
        assert letterlog(env, data, "init").returncode == 0
        filler = fill(volume)
        raw = make_mail("full", body="x" * 20_000 + "\r\n")  # a payload file too
        code, err = lda(env, data, raw, "--queue-id", "Q2")
        assert code == 75
        assert_one_status_line(err, "4.3.1")
        filler.unlink()
        assert lda(env, data, raw, "--queue-id", "Q2")[0] == 0
        assert stored(env, data, BOB) == [raw]


def test_a_writer_holding_the_log_past_the_timeout_defers_within_the_bound(env, data):
    raw = make_mail("locked")
    with write_locked(data / "events.sqlite"):
        t0 = time.monotonic()
        code, err = lda(env, data, raw, "--queue-id", "Q3", "--timeout", "2")
        waited = time.monotonic() - t0
    assert code == 75
    assert_one_status_line(err, "4.3.0")
    assert waited < 2 + 10 + 5  # the timeout, the grace for an append in progress, start-up
    assert lda(env, data, raw, "--queue-id", "Q3")[0] == 0
    assert stored(env, data, BOB) == [raw]


def test_locked_read_models_delay_no_mail(env, data):
    """lda appends to the log only: the read models catch up on the next read."""
    raw = make_mail("tables locked")
    with write_locked(data / "tables.sqlite"):
        code, err = lda(env, data, raw, "--timeout", "5")
    assert (code, err) == (0, "")
    assert stored(env, data, BOB) == [raw]


def test_a_store_moved_away_is_not_recreated_and_the_retry_lands_once_back(env, data):
    raw = make_mail("moved")
    aside = data.with_name("aside")
    shutil.move(data, aside)
    code, err = lda(env, data, raw, "--queue-id", "Q4")
    assert code == 75 and not data.exists()
    assert_one_status_line(err, "4.3.2")
    shutil.move(aside, data)
    assert lda(env, data, raw, "--queue-id", "Q4")[0] == 0
    assert stored(env, data, BOB) == [raw]


def test_the_readme_example_runs(env, tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Mail from an MTA", 1)[1]
    script = section.split("```sh\n", 1)[1].split("```", 1)[0]
    script = script.replace("/var/lib/letterlog", str(tmp_path / "store"))
    (tmp_path / "message.eml").write_bytes(make_mail("readme"))
    bin_dir = Path(sys.executable).parent
    p = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                       env={**env, "PATH": f"{bin_dir}:{env['PATH']}"}, timeout=120,
                       check=False)
    assert p.stdout.splitlines()[-1] == "0", (p.stdout, p.stderr)
    assert stored(env, tmp_path / "store", BOB) == [make_mail("readme")]
