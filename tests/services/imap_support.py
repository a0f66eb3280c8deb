"""A ``letterlog imap`` server for tests: a store with users in its passwd-file, the
server started as an operator starts it, and imaptest's scripted groups read back."""

from __future__ import annotations

import contextlib
import imaplib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devtools.devservers._common import free_ports
from tests.factories import BIN, run, until

USERS = {"ada@example.org": "ada-secret", "bob@example.org": "bob-secret"}


@dataclass
class ImapServer:
    data: Path
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def client(self, user: str | None = None) -> imaplib.IMAP4:
        c = imaplib.IMAP4("127.0.0.1", self.port, timeout=60)
        if user is not None:
            c.login(user, USERS[user])
        return c


@contextlib.contextmanager
def imap_server(data: Path, *extra: str, env: dict[str, str] | None = None
                ) -> Iterator[ImapServer]:
    """``letterlog imap`` on a free port of 127.0.0.1 for the store in ``data`` (made when
    new), with ``USERS`` in its passwd-file, until the block ends (SIGTERM, then waited).
    ``env``: more settings (``LETTERLOG_...``) for the server."""
    if not data.exists():
        run(data, "init")
    passwd = data / "users.passwd"
    if not passwd.exists():
        passwd.write_text("".join(f"{u}:{{PLAIN}}{p}\n" for u, p in USERS.items()))
        passwd.chmod(0o600)
    port = free_ports(1)[0]
    log = data.parent / f"imap-{port}.log"
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal", **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen([*BIN, "--data", str(data), "imap", "--listen",
                                 f"127.0.0.1:{port}", "--login-failure-delay", "0.5", *extra],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    server = ImapServer(data, port, proc, log)
    try:
        until(lambda: proc.poll() is not None or b"listening on port" in log.read_bytes(),
              timeout=120, what="letterlog imap listening", explain=log.read_text)
        assert proc.poll() is None, log.read_text()
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def required_capabilities(tests: Path) -> dict[str, list[str]]:
    """Each scripted group of imaptest and the capabilities its header requires."""
    out: dict[str, list[str]] = {}
    for path in sorted(tests.iterdir()):
        if not path.is_file() or path.suffix == ".mbox":
            continue
        head = path.read_bytes().split(b"\n\n", 1)[0].decode("utf-8", "replace")
        m = re.search(r"^capabilities:\s*(.*)$", head, re.M)
        out[path.name] = m.group(1).split() if m else []
    return out


def run_imaptest(binary_dir: Path, port: int, user: str, password: str,
                 tests: Path) -> tuple[str, dict[str, int]]:
    """imaptest's scripted groups in ``tests`` against the server: its output and the
    figures of its summary lines."""
    env = {**os.environ, "LD_LIBRARY_PATH": "/usr/lib/dovecot"}
    done = subprocess.run([str(binary_dir / "imaptest"), "host=127.0.0.1", f"port={port}",
                           f"user={user}", f"pass={password}", f"test={tests}"],
                          capture_output=True, env=env, timeout=600)
    text = done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")
    figures: dict[str, int] = {}
    m = re.search(r"(\d+) test groups: (\d+) failed, (\d+) skipped", text)
    if m:
        figures["groups"], figures["failed"] = int(m.group(1)), int(m.group(2))
        figures["skipped"] = int(m.group(3))
    m = re.search(r"base protocol: (\d+)/(\d+) individual commands failed", text)
    if m:
        figures["base_failed"], figures["base"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"extensions: (\d+)/(\d+) individual commands failed", text)
    if m:
        figures["ext_failed"], figures["ext"] = int(m.group(1)), int(m.group(2))
    return text, figures


def raw(c: imaplib.IMAP4, command: str, *literals: bytes) -> tuple[str, list[bytes]]:
    """``command`` (with ``{N+}`` literals, given in order), its untagged lines and its
    tagged status (``OK``, ``NO`` or ``BAD``) with its text."""
    tag = c._new_tag().decode()  # noqa: SLF001 - raw commands imaplib does not know
    parts = re.split(r"(?<=\+\})", command)
    c.send(f"{tag} {parts[0]}".encode())
    for literal, rest in zip(literals, parts[1:], strict=True):
        c.send(b"\r\n" + literal + rest.encode())
    c.send(b"\r\n")
    lines = []
    while True:
        line = c.readline()
        if line.startswith(tag.encode() + b" "):
            return line[len(tag) + 1:].decode().strip(), lines
        lines.append(line)


#: (bob's rights on the source, on the target, the command bob sends, whether it succeeds)
RIGHTS_TABLE = [
    ("l", "", "SELECT", False),
    ("lr", "", "EXAMINE", True),
    ("lr", "", "STORE +FLAGS (\\Seen)", False),
    ("lrs", "", "STORE +FLAGS (\\Seen)", True),
    ("lrs", "", "STORE +FLAGS (\\Flagged)", False),
    ("lrw", "", "STORE +FLAGS (\\Flagged $Work)", True),
    ("lrw", "", "STORE +FLAGS (\\Deleted)", False),
    ("lrt", "", "STORE +FLAGS (\\Deleted)", True),
    ("lrt", "", "EXPUNGE", False),
    ("lrte", "", "EXPUNGE", True),
    ("lr", "lr", "COPY", False),
    ("lr", "lri", "COPY", True),
    ("lrte", "lri", "MOVE", True),
    ("lr", "lri", "MOVE", False),
    ("lr", "", "CREATE", False),
    ("lrk", "", "CREATE", True),
    ("lr", "", "DELETE", False),
    ("lrx", "", "DELETE", True),
    ("lr", "", "SETACL", False),
    ("lra", "", "SETACL", True),
]
