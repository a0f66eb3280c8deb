"""Over quota, as an MTA hears it: ``letterlog lda`` exits 75 with 4.2.2 (the default: the
MTA keeps the message and retries) or 77 with 5.2.2 (``LETTERLOG_QUOTA_EXCEEDED=
permanent``: it bounces); ``letterlog lmtp`` replies 452 4.2.2 or 552 5.2.2. Real
processes; nothing is stored for the refused message."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.mta_support import Client, Server, assert_one_status_line, lda, letterlog, listing

BOB = "bob@example.org"
RAW = b"From: ada@example.net\r\nTo: bob@example.org\r\nSubject: hi\r\n\r\nHello\r\n"


def _full(env: dict[str, str], data: Path) -> None:
    """Bob holds one message and may hold one."""
    assert lda(env, data, RAW)[0] == 0
    p = letterlog(env, data, "quota", "set", BOB, "--messages", "1")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize(("setting", "code", "status"), [
    (None, 75, "4.2.2"), ("permanent", 77, "5.2.2"), ("temporary", 75, "4.2.2")])
def test_lda_over_quota_answers_the_code_the_admin_chose(env, data, syslog, setting, code,
                                                        status):
    _full(env, data)
    env = {**env, "LETTERLOG_SYSLOG_SOCKET": str(syslog.path)}
    if setting is not None:
        env = {**env, "LETTERLOG_QUOTA_EXCEEDED": setting}
    got, err = lda(env, data, RAW.replace(b"Hello", b"Again"), "--queue-id", "Q2")
    assert got == code
    assert_one_status_line(err, status)
    assert "mailbox full" in err and "quota" not in err  # the usage is not the sender's
    [line] = syslog.lines()  # the local log has it (ADR 0067)
    assert "Q2: to=<bob@example.org>" in line and "messages quota: 1 of 1" in line, line
    assert len(listing(env, data, BOB)) == 1  # nothing stored


def test_lda_delivers_again_once_an_expunge_freed_room(env, data):
    _full(env, data)
    assert lda(env, data, RAW, "--queue-id", "Q2")[0] == 75
    [row] = listing(env, data, BOB)
    assert letterlog(env, data, "expunge", row["message_id"]).returncode == 0
    assert lda(env, data, RAW, "--queue-id", "Q2")[0] == 0  # the MTA's retry lands


@pytest.mark.parametrize(("setting", "reply"), [
    ("temporary", "452 4.2.2"), ("permanent", "552 5.2.2")])
def test_lmtp_over_quota_replies_with_the_code_the_admin_chose(env, data, setting, reply):
    _full(env, data)
    server = Server({**env, "LETTERLOG_QUOTA_EXCEEDED": setting}, data,
                    data.parent / "lmtp.sock")
    try:
        client = Client(server.sock)
        client.command("LHLO mta.example.org")
        [answer] = client.send("ada@example.net", [BOB], RAW.replace(b"Hello", b"More"))
        client.close()
    finally:
        server.stop()
        _, log = server.proc.communicate()
    assert answer.startswith(reply), answer
    assert "quota" not in answer  # the account's usage goes to the server's log only
    assert b"messages quota: 1 of 1" in log, log
    assert len(listing(env, data, BOB)) == 1
