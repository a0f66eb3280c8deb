"""What the MTA tests share: running letterlog as an MTA would (a fresh process, no command
server of the user's, no LETTERLOG_* of the caller's), a small filesystem to fill or make
read-only, a lock held on one of the store's files, and reading the store back."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from signal import SIGTERM
from typing import Any

import pytest

from tests.factories import IN_CI


def environment(runtime: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("LETTERLOG_")}
    return {**env, "XDG_RUNTIME_DIR": str(runtime), **extra}


def letterlog(env: dict[str, str], data: Path, *args: str, stdin: bytes = b"",
              timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), *args],
                          input=stdin, capture_output=True, env=env, timeout=timeout,
                          check=False)


def listing(env: dict[str, str], data: Path, account: str) -> list[dict[str, Any]]:
    p = letterlog(env, data, "--json", "list", account, "--limit", "1000")
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def stored(env: dict[str, str], data: Path, account: str) -> list[bytes]:
    """Every message of ``account``'s INBOX, oldest first, as extracted."""
    found = []
    for row in reversed(listing(env, data, account)):
        p = letterlog(env, data, "extract", row["message_id"])
        assert p.returncode == 0, p.stderr
        found.append(p.stdout)
    return found


def shown(env: dict[str, str], data: Path, message_id: str) -> dict[str, Any]:
    p = letterlog(env, data, "--json", "show", message_id)
    assert p.returncode == 0, p.stderr
    return dict(json.loads(p.stdout))


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@contextmanager
def tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (root only), unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                        str(where)], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        unavailable(f"cannot mount a tmpfs (needs root): {p.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True,
                   capture_output=True)


def fill(where: Path) -> Path:
    """Fills the filesystem of ``where`` to the last byte; returns the filler file."""
    filler = where / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another writer holding ``path``'s write lock (SQLite ``BEGIN IMMEDIATE``)."""
    con = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        con.execute("BEGIN IMMEDIATE")
        yield
    finally:
        con.execute("ROLLBACK")
        con.close()


BOB = "bob@example.org"


def envelope_of_first(env: dict[str, str], data: Path, account: str) -> dict[str, Any]:
    """The stored envelope of ``account``'s first listed message, as ``show`` gives it, with
    the fields an lda command line sets (its arrival time aside)."""
    envelope = shown(env, data, listing(env, data, account)[0]["message_id"])["smtp_envelope"]
    return {k: envelope[k] for k in ("sender", "recipient", "original_recipient", "detail",
                                     "queue_id", "via", "arrived_at")}


def lda(env: dict[str, str], data: Path, raw: bytes, *args: str, recipient: str = BOB,
        timeout: float = 120) -> tuple[int, str]:
    p = letterlog(env, data, "lda", "--recipient", recipient, *args, stdin=raw,
                  timeout=timeout)
    return p.returncode, p.stderr.decode()


def awaits_its_answer(pid: int, sent: int) -> bool:
    """Whether process ``pid`` has read all ``sent`` bytes of its standard input and is
    blocked waiting on a socket (``poll`` of a socket with a time-out, or ``recvfrom``): an
    lda handing off a small message waits for the server's answer, the probe that its message
    is in the server's hands. Linux's /proc (x86-64 syscall numbers)."""
    try:
        pos = next(line for line in Path(f"/proc/{pid}/fdinfo/0").read_text().splitlines()
                   if line.startswith("pos:"))
        syscall = Path(f"/proc/{pid}/syscall").read_text().split()
    except (OSError, StopIteration):
        return False
    return int(pos.split()[1]) == sent and syscall[:1] in (["7"], ["45"])  # poll, recvfrom


def assert_one_status_line(stderr: str, status: str) -> None:
    """What Postfix puts in the DSN: one line, the RFC 3463 code first, no traceback."""
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith(status + " "), stderr


class Client:
    """One LMTP connection, speaking line by line."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rb")
        self.greeting = self.reply()

    def reply(self) -> list[str]:
        lines = []
        while True:
            line = self.file.readline().decode().rstrip("\r\n")
            if not line:
                raise ConnectionError("the server closed the connection")
            lines.append(line)
            if line[3:4] != "-":
                return lines

    def command(self, line: str) -> list[str]:
        self.sock.sendall(line.encode() + b"\r\n")
        return self.reply()

    def send(self, sender: str, recipients: list[str], raw: bytes) -> list[str]:
        """One transaction; the reply to each accepted recipient after DATA."""
        assert self.command(f"MAIL FROM:<{sender}>")[0].startswith("250")
        accepted = [r for r in recipients if self.command(f"RCPT TO:<{r}>")[0][:3] == "250"]
        if not accepted:
            return []
        assert self.command("DATA")[0].startswith("354")
        body = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        body = b"\r\n".join(b"." + line if line.startswith(b".") else line
                            for line in body.split(b"\r\n"))
        if not body.endswith(b"\r\n"):
            body += b"\r\n"
        self.sock.sendall(body + b".\r\n")
        return [self.reply()[0] for _ in accepted]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.command("QUIT")
        self.sock.close()


class Server:
    def __init__(self, env: dict[str, str], data: Path, sock: Path, *args: str) -> None:
        self.sock = sock
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", "--data", str(data), "lmtp", "--listen",
             f"unix:{sock}", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:  # ready: it greets a connection
            assert self.proc.poll() is None, self.proc.communicate()
            try:
                c = Client(sock)
                c.close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> int:
        self.proc.send_signal(SIGTERM)
        return self.proc.wait(60)


class Syslog:
    """A stand-in for ``/dev/log``: lda's local log (``LETTERLOG_SYSLOG_SOCKET``), read back
    as the lines it received."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.received: list[str] = []

    def lines(self) -> list[str]:
        while True:
            try:
                self.received.append(self.sock.recv(65536).decode("utf-8", "replace"))
            except BlockingIOError:
                return list(self.received)

    def close(self) -> None:
        self.sock.close()
