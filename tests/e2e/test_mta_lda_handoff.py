"""``letterlog lda``'s fast path (ADR 0060): with ``letterlog lmtp`` running on the same data
directory, lda hands its message over ``DATA/lda.sock`` and the server delivers it, with the
lda's envelope, options and idempotency key, and lda answers with its usual exit status and
line. Every fault after the message was sent is a 75; a server that cannot take it leaves
the delivery to lda itself, as if it were not there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.mta_support import (
    BOB,
    Server,
    assert_one_status_line,
    awaits_its_answer,
    envelope_of_first,
    lda,
    stored,
    write_locked,
)
from tests.factories import CORPUS, make_mail, until

# ``letterlog`` with the application made unimportable: only the fast path can deliver
# (without it, lda fails to start and exits 75)
HANDOFF_ONLY = ("import sys; "
                "sys.modules['adapters.cli.app'] = None; sys.argv[0] = 'letterlog'; "
                "from adapters.cli import main; main()")


ATTEMPT_S = 1.0  # how long one append attempt waits for the lock with the server's --timeout 5


def handoff_only(env: dict[str, str], data: Path, raw: bytes, *args: str,
                 recipient: str = BOB) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", HANDOFF_ONLY, "--data", str(data), "lda",
                           "--recipient", recipient, *args], input=raw, capture_output=True,
                          env=env, timeout=120, check=False)


def message(where: Path, raw: bytes) -> int:
    """A descriptor reading ``raw`` (an lda's standard input)."""
    path = where / "message.eml"
    path.write_bytes(raw)
    return os.open(path, os.O_RDONLY)


@pytest.fixture
def server(env: dict[str, str], data: Path, tmp_path: Path) -> Iterator[Server]:
    s = Server(env, data, tmp_path / "lmtp.sock")
    yield s
    if s.proc.poll() is None:
        s.stop()
    s.proc.communicate()


def test_the_server_delivers_the_lda_message_with_its_envelope(env, data, server):
    assert (data / "lda.sock").is_socket()
    raw = (CORPUS / "rubymail__plain-basic_email.eml").read_bytes()
    p = handoff_only(env, data, b"From MAILER-DAEMON Thu Nov 26 12:00:00 2026\n" + raw,
                     "--sender", "ada@example.net", "--original-recipient",
                     "robert@example.org", "--queue-id", "4XyZ1",
                     recipient="bob+lists@example.org")
    assert (p.returncode, p.stderr) == (0, b"")
    p = handoff_only(env, data, raw, "--queue-id", "4XyZ1", "--json",
                     recipient="bob+lists@example.org")  # the MTA's retry: a duplicate
    assert p.returncode == 0 and b'"2.0.0"' in p.stdout and b"already delivered" in p.stdout
    assert server.stop() == 0
    assert not (data / "lda.sock").exists()
    assert stored(env, data, BOB) == [raw]
    envelope = envelope_of_first(env, data, BOB)
    assert {k: v for k, v in envelope.items() if k != "arrived_at"} == {
        "sender": "ada@example.net", "recipient": "bob+lists@example.org",
        "original_recipient": "robert@example.org", "detail": "lists", "queue_id": "4XyZ1",
        "via": "lda"}


def test_the_key_is_the_same_on_both_paths(env, data, server):
    raw, other = make_mail("first"), make_mail("second")
    assert handoff_only(env, data, raw, "--queue-id", "Q1").returncode == 0
    assert server.stop() == 0
    assert lda(env, data, raw, "--queue-id", "Q1") == (0, "")  # lda itself: a duplicate
    assert lda(env, data, other, "--queue-id", "Q1") == (0, "")  # a reused id, other bytes
    assert stored(env, data, BOB) == [raw, other]


def test_the_options_and_refusals_are_lda_s_own(env, data, server):
    p = handoff_only(env, data, b"   \n")  # nothing on standard input: a broken wrapper
    assert p.returncode == 75
    assert_one_status_line(p.stderr.decode(), "4.3.0")
    p = handoff_only(env, data, b"Subject: \x01\x02\x03\x04\r\n\r\nx\r\n")  # stored
    assert (p.returncode, p.stderr) == (0, b"")
    p = handoff_only(env, data, make_mail("x"), "--accounts-must-exist",
                     recipient="nobody@example.org")
    assert p.returncode == 67
    assert_one_status_line(p.stderr.decode(), "5.1.1")
    raw = make_mail("headers")
    assert handoff_only(env, data, raw, "--sender", "ada@example.net",
                        "--envelope-headers").returncode == 0
    assert server.stop() == 0
    assert stored(env, data, BOB) == [
        b"Subject: \x01\x02\x03\x04\r\n\r\nx\r\n",
        b"Return-Path: <ada@example.net>\r\nDelivered-To: " + BOB.encode() + b"\r\n" + raw]


def test_a_server_of_other_settings_leaves_the_delivery_to_lda(env, data, server):
    other = {**env, "LETTERLOG_MAX_PARTS": "7"}
    p = handoff_only(other, data, make_mail("x"))
    assert p.returncode == 75  # not handed off: lda itself, made unable to start here
    assert_one_status_line(p.stderr.decode(), "4.3.5")
    assert lda(other, data, make_mail("x")) == (0, "")


def test_a_server_gone_mid_delivery_is_a_temporary_failure_and_the_retry_stores_once(
        env, data, server, tmp_path):
    raw = make_mail("server killed")
    with write_locked(data / "events.sqlite"):  # the server's append waits for the lock
        client = subprocess.Popen(
            [sys.executable, "-c", HANDOFF_ONLY, "--data", str(data), "lda", "--recipient",
             BOB, "--queue-id", "Q9"], stdin=message(tmp_path, raw), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env)
        until(lambda: awaits_its_answer(client.pid, len(raw)), timeout=60,
              what="the lda's message in the server's hands")
        server.proc.send_signal(signal.SIGKILL)
        _, err = client.communicate(timeout=60)
    assert client.returncode == 75
    assert_one_status_line(err.decode(), "4.3.0")
    assert "stopped while delivering" in err.decode()
    server.proc.wait(30)
    assert (data / "lda.sock").exists()  # left behind by the killed server: not answered
    assert lda(env, data, raw, "--queue-id", "Q9") == (0, "")  # Postfix's retry, lda itself
    assert lda(env, data, raw, "--queue-id", "Q9") == (0, "")
    assert stored(env, data, BOB) == [raw]


def test_a_client_gone_before_its_append_stores_nothing(env, data, server, tmp_path):
    """Postfix kills an lda at its time limit and bounces the message: it must not be
    stored afterwards. (The server's --timeout 5: each attempt waits 1 s for the lock.)"""
    assert server.stop() == 0
    server = Server(env, data, tmp_path / "lmtp2.sock", "--timeout", "5")
    assert handoff_only(env, data, make_mail("opens the store")).returncode == 0
    raw = make_mail("client killed")
    with write_locked(data / "events.sqlite"):
        client = subprocess.Popen(
            [sys.executable, "-c", HANDOFF_ONLY, "--data", str(data), "lda", "--recipient",
             BOB, "--queue-id", "Q7", "--timeout", "10"], stdin=message(tmp_path, raw),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        until(lambda: awaits_its_answer(client.pid, len(raw)), timeout=60,
              what="the lda's message in the server's hands")
        client.kill()
        client.communicate(timeout=30)
        # not a readiness wait: the lock outlasts the append attempt under way when the
        # client died (1 s a try with --timeout 5), so that the next attempt's check finds
        # the client gone; an attempt is bounded in wall time, whatever the load
        time.sleep(ATTEMPT_S * 3)
    # the barrier: the server's writer takes deliveries in order, so once a later one is
    # answered, the killed client's delivery has been decided (dropped, or stored)
    assert handoff_only(env, data, make_mail("after the lock")).returncode == 0
    assert server.stop() == 0
    assert b"nothing stored" not in server.proc.communicate()[1]  # (it logs no lda's fault)
    assert [m for m in stored(env, data, BOB) if b"client killed" in m] == []
    assert len(stored(env, data, BOB)) == 2  # "opens the store" and "after the lock"
