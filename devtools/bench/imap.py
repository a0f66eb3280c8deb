"""``letterlog bench imap``: IMAP commands per second under Dovecot's imaptest in its
benchmark mode (random commands of ``clients`` clients on one user's INBOX, its state
tracking on), against ``letterlog imap`` and, with ``--peer dovecot``, Dovecot's own IMAP
server on the same mail in the same run; and the memory an idle logged-in connection
costs the letterlog server.

Both servers write with fsync on every commit (letterlog's default durability, Dovecot's
``mail_fsync = always``). The mail is a mbox of generated messages with unique Message-IDs
(what imaptest's state tracking needs). Issue 43's target: at least half of Dovecot's
commands per second at 10 clients.
"""

from __future__ import annotations

import contextlib
import imaplib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapters.demo.benchmail import bench_messages
from devtools.bench.common import bar_panels
from devtools.devservers import DovecotServer
from devtools.devservers._common import free_ports
from devtools.devservers.imaptest import LIBRARY_PATH, install_imaptest

TARGET = 0.5
USER, PASSWORD = "bench@example.org", "bench-password"
_COMMANDS = re.compile(r"^\s*(\d+(?:\s+\d+)+)\s*$")


def write_mbox(path: Path, count: int) -> None:
    with open(path, "wb") as out:
        for raw in bench_messages(count):
            body = raw.replace(b"\r\n", b"\n")
            body = re.sub(rb"(?m)^(>*From )", rb">\1", body)
            out.write(b"From bench@example.org  Sat Jan  1 00:00:00 2000\n" + body
                      + (b"" if body.endswith(b"\n") else b"\n") + b"\n")


def imaptest_rate(binary_dir: Path, port: int, mbox: Path, seconds: int,
                  clients: int) -> dict[str, Any]:
    """imaptest's benchmark mode against 127.0.0.1:``port``: commands per second (its
    Totals line over the run), the count of each command, and its errors."""
    done = subprocess.run(
        [str(binary_dir / "imaptest"), "host=127.0.0.1", f"port={port}", f"user={USER}",
         f"pass={PASSWORD}", f"mbox={mbox}", f"clients={clients}", f"secs={seconds}"],
        capture_output=True, env={**os.environ, "LD_LIBRARY_PATH": LIBRARY_PATH},
        timeout=seconds + 300)
    text = done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")
    totals = text.rsplit("Totals:", 1)
    if len(totals) != 2:
        raise RuntimeError(f"imaptest printed no totals: {text[-2000:]}")
    lines = totals[1].strip().splitlines()
    names = lines[0].split()
    counts = [int(n) for n in next(line for line in reversed(lines)
                                   if _COMMANDS.match(line)).split()[:len(names)]]
    errors = [line for line in text.splitlines() if line.startswith("Error:")]
    return {"commands_per_s": round(sum(counts) / seconds, 1),
            "commands": dict(zip(names, counts, strict=True)), "errors": len(errors),
            "first_errors": errors[:5]}


@contextlib.contextmanager
def letterlog_imap(root: Path, processes: int = 1) -> Iterator[tuple[int, int]]:
    """``letterlog imap`` on a new store with the bench user: (port, pid; with several
    processes, the first server's)."""
    data = root / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETTERLOG_")}
    env["LETTERLOG_DATA"] = str(data)
    cli = [sys.executable, "-m", "adapters.cli"]
    subprocess.run([*cli, "init"], env=env, check=True, capture_output=True)
    passwd = data / "users.passwd"
    passwd.write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
    passwd.chmod(0o600)
    port = free_ports(1)[0]
    log = root / "imap.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([*cli, "imap", "--listen", f"127.0.0.1:{port}",
                                 "--plaintext-auth", "--processes", str(processes)], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while b"listening on port" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"letterlog imap did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)  # a readiness probe: its own line that it listens
        server = proc.pid
        if processes > 1:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            server = int(children[0])
        yield port, server
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]


def first_login(port: int) -> None:
    """One login that selects INBOX before imaptest's clients start together: Dovecot
    makes a new user's INBOX on its first SELECT, and two clients doing that at once may
    be told ``NO [ALREADYEXISTS]`` (letterlog makes it at the first login)."""
    client = imaplib.IMAP4("127.0.0.1", port, timeout=60)
    try:
        client.login(USER, PASSWORD)
        client.select("INBOX")
    finally:
        with contextlib.suppress(Exception):
            client.logout()


def idle_connection_kib(port: int, pid: int, count: int) -> float:
    """The server's resident memory per idle connection: ``count`` clients logged in with
    INBOX selected, the growth of its RSS divided by them."""
    warm = imaplib.IMAP4("127.0.0.1", port, timeout=60)
    warm.login(USER, PASSWORD)
    warm.select("INBOX")
    before = _rss_kib(pid)
    clients = []
    try:
        for _ in range(count):
            c = imaplib.IMAP4("127.0.0.1", port, timeout=60)
            c.login(USER, PASSWORD)
            c.select("INBOX")
            clients.append(c)
        after = _rss_kib(pid)
    finally:
        for c in [warm, *clients]:
            with contextlib.suppress(Exception):
                c.logout()
    return round((after - before) / count, 1)


def bench_imap(*, seconds: int = 30, clients: int = 10, messages: int = 160,
               idle: int = 100, peer: str | None = None, processes: int = 1,
               plot: Path | None = None) -> dict[str, Any]:
    binary = install_imaptest()
    with tempfile.TemporaryDirectory(prefix="letterlog-bench-imap-") as tmp:
        root = Path(tmp)
        mbox = root / "bench.mbox"
        write_mbox(mbox, messages)
        with letterlog_imap(root, processes) as (port, pid):
            first_login(port)
            ours = imaptest_rate(binary, port, mbox, seconds, clients)
            ours["idle_connection_kib"] = idle_connection_kib(port, pid, idle) if idle else None
        result: dict[str, Any] = {"benchmark": "imap", "seconds": seconds, "clients": clients,
                                  "messages": messages, "server_processes": processes,
                                  "letterlog": ours}
        if peer == "dovecot":
            dport = free_ports(1)[0]
            with DovecotServer(imap_port=dport):
                first_login(dport)
                theirs = imaptest_rate(binary, dport, mbox, seconds, clients)
            result["dovecot"] = theirs
            ratio = ours["commands_per_s"] / theirs["commands_per_s"] \
                if theirs["commands_per_s"] else 0.0
            result["ratio"] = round(ratio, 3)
            result["target"] = TARGET
            result["target_met"] = ratio >= TARGET
    if plot is not None:
        values = {"letterlog imap": ours["commands_per_s"]}
        if "dovecot" in result:
            values["dovecot imap"] = result["dovecot"]["commands_per_s"]
            values["target"] = TARGET * result["dovecot"]["commands_per_s"]
        bar_panels(plot, f"imaptest benchmark mode, {clients} clients, {seconds} s",
                   [("commands/s", values)])
    return result
