"""``letterlog lmtp``: an LMTP server (RFC 2033) that answers each recipient after DATA, says
4.x.x for everything a retry may fix and 5.x.x only for what none can, and finishes the
transaction in flight when told to stop. A real server process on a real socket, a client
speaking the protocol line by line (smtplib's LMTP reads one reply after DATA)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from signal import SIGTERM

import pytest

from tests.e2e.mta_support import (
    Client,
    Server,
    fill,
    letterlog,
    listing,
    shown,
    stored,
    tmpfs,
    write_locked,
)
from tests.factories import CORPUS, make_mail, until
from tests.process_support import cmdline, descendants

BOB, CAROL = "bob@example.org", "carol@example.org"






@pytest.fixture
def serve(env: dict[str, str], tmp_path: Path) -> Iterator[object]:
    servers: list[Server] = []

    def start(data: Path, *args: str) -> Server:
        servers.append(Server(env, data, tmp_path / f"lmtp{len(servers)}.sock", *args))
        return servers[-1]

    yield start
    for s in servers:
        if s.proc.poll() is None:
            s.stop()
        s.proc.communicate()


def test_lhlo_announces_what_an_mta_relies_on(data, serve):
    client = Client(serve(data).sock)
    assert client.greeting[0].startswith("220")
    keywords = {line[4:].split()[0] for line in client.command("LHLO mta.example.org")[1:]}
    assert {"PIPELINING", "ENHANCEDSTATUSCODES", "8BITMIME", "SIZE"} <= keywords
    assert client.command("EHLO mta.example.org")[0].startswith("500")  # LMTP, not SMTP
    client.close()


def test_the_server_runs_on_uvloop(data, serve):
    # ADR 0112: its event loop is uvloop's; the process has mapped uvloop's loop module
    server = serve(data)
    Client(server.sock).close()  # serving: its loop is running
    maps = Path(f"/proc/{server.proc.pid}/maps").read_text()
    assert "/uvloop/loop." in maps


def test_each_recipient_gets_its_own_reply_and_the_message_byte_exact(env, data, serve):
    server = serve(data, "--accounts-must-exist")
    for account in (BOB, CAROL):  # accounts that must exist: made first
        assert letterlog(env, data, "mailbox", "create", account, "Archive",
                         "--create-account").returncode == 0
    raw = (CORPUS / "rubymail__plain-basic_email.eml").read_bytes()
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    assert client.command("MAIL FROM:<ada@example.net>")[0].startswith("250")
    assert client.command(f"RCPT TO:<{BOB}>")[0].startswith("250 2.1.5")
    assert client.command("RCPT TO:<dave@example.org>")[0].startswith("550 5.1.1")
    assert client.command("RCPT TO:<carol+news@example.org>")[0].startswith("250 2.1.5")
    assert client.command("DATA")[0].startswith("354")
    client.sock.sendall(raw + b".\r\n")
    replies = [client.reply()[0] for _ in range(2)]
    assert all(r.startswith("250 2.0.0") for r in replies), replies
    client.close()
    assert server.stop() == 0
    assert stored(env, data, BOB) == [raw] and stored(env, data, CAROL) == [raw]
    envelope = shown(env, data, listing(env, data, CAROL)[0]["message_id"])["smtp_envelope"]
    assert envelope["sender"] == "ada@example.net"
    assert (envelope["recipient"], envelope["detail"]) == ("carol+news@example.org", "news")
    assert envelope["via"] == "lmtp" and envelope["session"] and envelope["client"] == "local"


def test_a_message_the_store_refuses_is_refused_permanently(env, data, serve):
    small = {**env, "LETTERLOG_MAX_MESSAGE_SIZE": "2048"}
    server = Server(small, data, data.parent / "small.sock")
    try:
        client = Client(server.sock)
        client.command("LHLO mta.example.org")
        replies = client.send("ada@example.net", [BOB], b" \r\n")
        assert [r[:9] for r in replies] == ["554 5.6.0"]
        replies = client.send("ada@example.net", [BOB, CAROL],
                              b"Subject: big\r\n\r\n" + b"y" * 4000 + b"\r\n")
        assert [r[:9] for r in replies] == ["552 5.3.4", "552 5.3.4"]
        assert client.command("MAIL FROM:<a@example.net> SIZE=999999")[0][:9] == "552 5.3.4"
        client.close()
    finally:
        assert server.stop() == 0
    assert letterlog(env, data, "list", BOB).returncode == 2  # nothing stored: no account


def test_a_header_block_with_control_bytes_is_stored_as_handed_over(env, data, serve):
    """Real mail is never refused for its structure (ADR 0067): control bytes in the header
    block are stored (dovecot's LMTP stores them too); the API's deliver refuses them."""
    raw = (b"Subject: \x01\x02\x03 an old mailer's \x00 header\x7f\r\n"
           b"X-Junk: \x04\x05\x06\x07\x08\x0e\x0f\r\n\r\nbody\r\n")
    client = Client(serve(data).sock)
    client.command("LHLO mta.example.org")
    assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
    client.close()
    assert stored(env, data, BOB) == [raw]


@pytest.mark.slow
def test_a_locked_tables_sqlite_does_not_kill_the_projecting_process(env, data, tmp_path):
    """Issue 42, item 6: the follower (the server's second process) waits a lock on the
    read models out and tries again; before, it died with a traceback (busy timeout 30 s)
    and a new one was started for the next message."""
    log = tmp_path / "lmtp.log"
    sock = tmp_path / "locked.sock"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "adapters.cli", "--data", str(data),
                                 "lmtp", "--listen", f"unix:{sock}"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        until(lambda: sock.exists(), timeout=60, what="the lmtp socket")
        client = Client(sock)
        client.command("LHLO mta.example.org")
        assert client.send("a@example.net", [BOB], make_mail("first"))[0][:3] == "250"
        follower = until(lambda: projecting(proc.pid), timeout=30, what="the follower")
        with write_locked(data / "tables.sqlite"):
            assert client.send("a@example.net", [BOB], make_mail("locked"))[0][:3] == "250"
            until(lambda: b"read models not updated" in log.read_bytes(), timeout=90,
                  what="the follower to hit the lock")
        until(lambda: b"read models current again" in log.read_bytes(), timeout=60,
              what="the follower to catch up once the lock is gone")
        assert client.send("a@example.net", [BOB], make_mail("after"))[0][:3] == "250"
        client.close()
        assert projecting(proc.pid) == follower  # the same process all along
    finally:
        proc.send_signal(SIGTERM)
        assert proc.wait(60) == 0
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "projecting process is gone" not in text, text
    assert [m.split(b"Subject: ")[1].split(b"\r\n")[0] for m in stored(env, data, BOB)] == [
        b"first", b"locked", b"after"]


def projecting(pid: int) -> list[int]:
    """The projecting processes among ``pid``'s descendants (the writer process's child)."""
    return sorted(p for p in descendants(pid) if b"adapters.cli.follower" in cmdline(p))


def test_a_store_moved_away_defers_and_the_retry_lands_once_back(env, data, serve):
    server = serve(data)
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    raw = make_mail("moved")
    aside = data.with_name("aside")
    shutil.move(data, aside)
    assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["451 4.3.2"]
    assert not data.exists()
    shutil.move(aside, data)
    assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
    client.close()
    assert server.stop() == 0
    assert stored(env, data, BOB) == [raw]


def test_a_full_disk_defers_and_the_retry_lands(env, tmp_path, serve):
    with tmpfs(tmp_path / "volume", "3m") as volume:
        data = volume / "data"
        assert letterlog(env, data, "init").returncode == 0
        server = serve(data)
        client = Client(server.sock)
        client.command("LHLO mta.example.org")
        warm = make_mail("first")  # opens the store (and its second process) first
        assert [r[:3] for r in client.send("ada@example.net", [BOB], warm)] == ["250"]
        filler = fill(volume)
        raw = make_mail("full", body="x" * 30_000 + "\r\n")
        replies = client.send("ada@example.net", [BOB], raw)
        assert [r[:9] for r in replies] == ["452 4.3.1"], replies
        filler.unlink()
        assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
        client.close()
        assert server.stop() == 0
        assert stored(env, data, BOB) == [warm, raw]


def test_a_writer_holding_the_log_defers_and_a_late_commit_is_not_stored_twice(
        env, data, serve):
    server = serve(data, "--timeout", "2")
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    raw = make_mail("locked")
    with write_locked(data / "events.sqlite"):
        replies = client.send("ada@example.net", [BOB], raw)
    assert [r[:9] for r in replies] == ["451 4.3.0"], replies
    replies = client.send("ada@example.net", [BOB], raw)  # the MTA's retry
    assert [r[:9] for r in replies] == ["250 2.0.0"]
    client.close()
    assert server.stop() == 0
    assert stored(env, data, BOB) == [raw]


def test_a_retried_message_is_stored_once_beside_new_mail_in_the_same_append(
        env, data, serve):
    """The writer appends without reading the keys' claims first (nearly every key is new);
    a retried message in the same append as new mail makes that append fail whole, and the
    retry that reads the claims stores the new mail once and answers the retry as a
    duplicate."""
    server = serve(data)
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    raw, other = make_mail("first"), make_mail("second")
    assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
    replies = client.send("ada@example.net", [BOB, CAROL], raw)  # one append, two items
    assert "already delivered" in replies[0] and replies[0].startswith("250 2.0.0"), replies
    assert "already delivered" not in replies[1] and replies[1].startswith("250 2.0.0")
    replies = client.send("ada@example.net", [BOB], other)  # same recipient, other bytes
    assert "already delivered" not in replies[0] and replies[0].startswith("250 2.0.0")
    client.close()
    assert server.stop() == 0
    assert sorted(stored(env, data, BOB)) == sorted([raw, other])
    assert stored(env, data, CAROL) == [raw]


def test_a_stop_finishes_the_transaction_in_flight(env, data, serve):
    server = serve(data)
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    raw = make_mail("in flight")
    assert client.command("MAIL FROM:<ada@example.net>")[0].startswith("250")
    assert client.command(f"RCPT TO:<{BOB}>")[0].startswith("250")
    server.proc.send_signal(SIGTERM)  # the transaction is open: it is let finish
    late = Client.__new__(Client)  # a new connection is refused once the listener closed
    with pytest.raises(OSError):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            late.__init__(server.sock)
            late.close()
            time.sleep(0.05)
    assert client.command("DATA")[0].startswith("354")
    client.sock.sendall(raw + b".\r\n")
    assert client.reply()[0].startswith("250 2.0.0")
    assert server.proc.wait(60) == 0
    assert stored(env, data, BOB) == [raw]


def test_the_server_runs_supervised_and_stops_gracefully(env, data, tmp_path):
    sock = tmp_path / "supervised.sock"
    start = letterlog(env, data, "--json", "processes", "start", "--no-relay", "--workers",
                      "0", "--no-purger", "--lmtp", f"unix:{sock}", timeout=180)
    try:
        assert start.returncode == 0, start.stderr
        rows = [json.loads(line) for line in start.stdout.splitlines()]
        assert [(r["name"], r["state"]) for r in rows] == [("lmtp", "RUNNING")]
        deadline = time.monotonic() + 60
        while True:  # ready: it greets a connection
            try:
                client = Client(sock)
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        client.command("LHLO mta.example.org")
        raw = make_mail("supervised")
        assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
        client.close()
    finally:
        stop = letterlog(env, data, "processes", "stop", timeout=120)
    assert stop.returncode == 0, stop.stderr
    assert stored(env, data, BOB) == [raw]
    log = (data / "supervisor" / "lmtp.log").read_text()
    assert "listening on unix:" in log and "Traceback" not in log


def test_dots_at_line_starts_and_ends_arrive_as_sent(env, data, serve):
    """DATA is read in runs up to each '.<CRLF>': a line ending in a dot, a line of dots
    and a line starting with one must all arrive as the client meant them."""
    server = serve(data)
    client = Client(server.sock)
    client.command("LHLO mta.example.org")
    raws = [b".starts with a dot\r\nSubject: x\r\n\r\nends with a dot.\r\n.\r\n..\r\n.x.\r\n",
            b"Subject: y\r\n\r\nlast line.\r\n",
            b"Subject: z\r\n\r\n" + b"long " * 300_000 + b"line.\r\n.\r\nend\r\n"]
    for raw in raws:
        assert [r[:9] for r in client.send("ada@example.net", [BOB], raw)] == ["250 2.0.0"]
    client.close()
    assert server.stop() == 0
    assert stored(env, data, BOB) == raws


def test_the_socket_takes_the_mode_and_group_asked_for(env, data, tmp_path):
    """``--socket-mode``/``--socket-group`` (issue 42, item 1): what lets Postfix's lmtp(8),
    another user, connect (the chrooted setup behind Postfix: test_mta_postfix.py)."""
    import grp
    import os

    group = grp.getgrnam("daemon") if os.geteuid() == 0 else grp.getgrgid(os.getegid())
    server = Server(env, data, tmp_path / "shared.sock", "--socket-mode", "0660",
                    "--socket-group", group.gr_name)
    try:
        st = server.sock.stat()
        assert (st.st_mode & 0o777, st.st_gid) == (0o660, group.gr_gid)
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("args", [
    ("--listen", "unix:{sock}", "--socket-mode", "999"),
    ("--listen", "unix:{sock}", "--socket-group", "no-such-group-here"),
    ("--listen", "127.0.0.1:2424", "--socket-mode", "0660"),
], ids=["bad-mode", "no-such-group", "tcp"])
def test_socket_options_that_cannot_apply_are_a_usage_error(env, data, tmp_path, args):
    sock = tmp_path / "never.sock"
    p = letterlog(env, data, "lmtp", *(a.format(sock=sock) for a in args), timeout=60)
    assert p.returncode == 2 and p.stderr.count(b"\n") == 1, p.stderr
    assert b"--socket-" in p.stderr and not sock.exists()
