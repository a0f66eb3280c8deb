"""``letterlog-lda``, the lda's compiled hand-off client (ADR 0087): run with ``letterlog``'s
own arguments, it hands the message to the data directory's running ``letterlog lmtp`` as
``adapters/startup/handoff.py`` does, and answers with the same exit status and line; for
anything else (no server, a refusal, ``--json``, a command line it does not take) it
becomes ``letterlog`` with the same arguments, having read nothing. Built here from the
repository's source with the system's C compiler, as ``make venv`` builds it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
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
    letterlog,
    stored,
    write_locked,
)
from tests.factories import make_mail, until

SOURCE = Path(__file__).resolve().parents[2] / "adapters" / "startup" / "lda_client.c"
# ``letterlog`` with the application made unimportable: only the Python fast path delivers
HANDOFF_ONLY = ("import sys; "
                "sys.modules['adapters.cli.app'] = None; sys.argv[0] = 'letterlog'; "
                "from adapters.cli import main; main()")
FELL_BACK = 99


def build(directory: Path, letterlog: str) -> Path:
    """``letterlog-lda`` in ``directory``, with ``letterlog`` (a shell script) beside it."""
    directory.mkdir()
    compiler = shutil.which(os.environ.get("CC", "cc"))
    assert compiler, "a C compiler (cc) is part of the setup (make venv builds letterlog-lda)"
    client = directory / "letterlog-lda"
    subprocess.run([compiler, "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(client),
                    str(SOURCE)], check=True, capture_output=True)
    beside = directory / "letterlog"
    beside.write_text(f"#!/bin/sh\n{letterlog}\n")
    beside.chmod(0o755)
    return client


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client, falling back to the real ``letterlog``."""
    return build(tmp_path_factory.mktemp("lda-client") / "bin",
                 f'exec {sys.executable} -m adapters.cli "$@"')


@pytest.fixture(scope="module")
def served_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client, beside a ``letterlog`` that only says how it was run (exit 99): what it
    delivers, the server delivered."""
    return build(tmp_path_factory.mktemp("lda-served-only") / "bin",
                 f'printf "fell back:"; printf " %s" "$@"; exit {FELL_BACK}')


def run(program: Path, env: dict[str, str], data: Path, raw: bytes, *args: str,
        recipient: str = BOB, stdin: int | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(program), "--data", str(data), "lda", "--recipient", recipient,
                           *args], input=None if stdin is not None else raw, stdin=stdin,
                          capture_output=True, env=env, timeout=120, check=False)


def python_client(env: dict[str, str], data: Path, raw: bytes, *args: str,
                  recipient: str = BOB) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", HANDOFF_ONLY, "--data", str(data), "lda",
                           "--recipient", recipient, *args], input=raw, capture_output=True,
                          env=env, timeout=120, check=False)


@pytest.fixture
def server(env: dict[str, str], data: Path, tmp_path: Path) -> Iterator[Server]:
    s = Server(env, data, tmp_path / "lmtp.sock")
    yield s
    if s.proc.poll() is None:
        s.stop()
    s.proc.communicate()


def answer(p: subprocess.CompletedProcess[bytes]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr, the message's id made a placeholder."""
    ids = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    return (p.returncode, ids.sub("ID", p.stdout.decode()), ids.sub("ID", p.stderr.decode()))


def test_it_delivers_through_the_server_with_the_lda_s_envelope(env, data, server,
                                                                served_only):
    raw = make_mail("by the client")
    p = run(served_only, env, data, b"From MAILER-DAEMON Thu Nov 26 12:00:00 2026\n" + raw,
            "--sender", "ada@example.net", "--original-recipient=robert@example.org",
            "--queue-id", "4XyZ1", recipient="bob+lists@example.org")
    assert (p.returncode, p.stderr) == (0, b"") and p.stdout.startswith(b"2.0.0 delivered as ")
    p = run(served_only, env, data, raw, "--queue-id", "4XyZ1",
            recipient="bob+lists@example.org")  # the MTA's retry: a duplicate
    assert p.returncode == 0 and p.stdout.startswith(b"2.0.0 already delivered as ")
    assert server.stop() == 0
    assert stored(env, data, BOB) == [raw]
    envelope = envelope_of_first(env, data, BOB)
    assert {k: v for k, v in envelope.items() if k != "arrived_at"} == {
        "sender": "ada@example.net", "recipient": "bob+lists@example.org",
        "original_recipient": "robert@example.org", "detail": "lists", "queue_id": "4XyZ1",
        "via": "lda"}


@pytest.mark.parametrize("case", ["blank", "odd bytes", "unknown account", "too large",
                                  "envelope headers", "detail mailbox", "no sender"])
def test_it_answers_as_the_python_client_does(env, data, tmp_path, served_only, case):
    """The same request through both clients (each to a server of its own store): the same
    exit status and lines, to the byte."""
    env = {**env, "LETTERLOG_MAX_MESSAGE_SIZE": "2048"}
    raw, args, recipient = {
        "blank": (b"From x\n   \r\n", (), BOB),
        "odd bytes": (b"Subject: \x01\x02\xff\r\n\r\nx\r\n", ("--queue-id", "Q1"), BOB),
        "unknown account": (make_mail("x"), ("--accounts-must-exist",), "nobody@example.org"),
        "too large": (make_mail("x" * 4000), ("--queue-id", "Q2"), BOB),
        "envelope headers": (make_mail("h"), ("--envelope-headers", "--sender", ""), BOB),
        "detail mailbox": (make_mail("d"), ("--detail-mailbox", "--recipient-delimiter=-",
                                            "--timeout", "30.5"), "bob-x@example.org"),
        "no sender": (make_mail("n"), ("--mailbox", "Archive"), BOB),
    }[case]
    answers = []
    for name, deliver in (("c", lambda d: run(served_only, env, d, raw, *args,
                                              recipient=recipient)),
                          ("python", lambda d: python_client(env, d, raw, *args,
                                                             recipient=recipient))):
        store = tmp_path / f"data-{name}"
        assert letterlog(env, store, "init").returncode == 0
        s = Server(env, store, tmp_path / f"{name}.sock")
        try:
            answers.append(answer(deliver(store)))
        finally:
            assert s.stop() == 0
            s.proc.communicate()
    assert answers[0] == answers[1]
    assert str(FELL_BACK) != str(answers[0][0])
    if answers[0][0]:
        assert_one_status_line(answers[0][2], answers[0][2].split(" ")[0])


def test_what_it_does_not_take_goes_to_letterlog_with_the_same_arguments(env, data, server,
                                                                         served_only):
    raw = make_mail("x")
    for args in (("--json",), ("--help",), ("--as", "bob@example.org"), ("--timeout", "0.5"),
                 ("--timeout", "1e3"), ("--recipient",), ("--unknown",)):
        p = run(served_only, env, data, raw, *args)
        assert p.returncode == FELL_BACK, (args, p)
        assert p.stdout.decode() == (f"fell back: --data {data} lda --recipient {BOB} "
                                     + " ".join(args))
    p = subprocess.run([str(served_only), "--version"], capture_output=True, env=env,
                       check=False)
    assert (p.returncode, p.stdout) == (FELL_BACK, b"fell back: --version")
    other = {**env, "LETTERLOG_MAX_PARTS": "7"}  # the server refuses: other settings
    assert run(served_only, other, data, raw).returncode == FELL_BACK
    assert server.stop() == 0  # no server: lda itself
    assert run(served_only, env, data, raw).returncode == FELL_BACK


def test_letterlog_it_falls_back_to_delivers_and_answers(env, data, client):
    raw = make_mail("no server")
    p = run(client, env, data, raw, "--queue-id", "Q3", "--json")
    assert p.returncode == 0 and b'"2.0.0"' in p.stdout
    assert run(client, env, data, raw, "--queue-id", "Q3").returncode == 0  # a duplicate
    p = run(client, env, data, raw, "--timeout", "0")
    assert p.returncode == 64, p  # letterlog's own usage error
    assert stored(env, data, BOB) == [raw]
    assert lda(env, data, raw, "--queue-id", "Q3") == (0, "")


def test_a_server_gone_mid_delivery_is_a_temporary_failure(env, data, server, served_only,
                                                           tmp_path):
    raw = make_mail("server killed")
    (tmp_path / "message.eml").write_bytes(raw)
    fd = os.open(tmp_path / "message.eml", os.O_RDONLY)
    try:
        with write_locked(data / "events.sqlite"):  # the server's append waits for the lock
            c = subprocess.Popen([str(served_only), "--data", str(data), "lda", "--recipient",
                                  BOB, "--queue-id", "Q9"], stdin=fd, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env)
            until(lambda: awaits_its_answer(c.pid, len(raw)), timeout=60,
                  what="the client's message in the server's hands")
            server.proc.send_signal(signal.SIGKILL)
            _, err = c.communicate(timeout=60)
    finally:
        os.close(fd)
    assert c.returncode == 75
    assert_one_status_line(err.decode(), "4.3.0")
    assert "stopped while delivering" in err.decode()
    server.proc.wait(30)
    assert lda(env, data, raw, "--queue-id", "Q9") == (0, "")  # Postfix's retry
    assert stored(env, data, BOB) == [raw]
