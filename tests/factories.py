"""Builders the tests share: a fresh PostgreSQL database per test, a readiness poll, the
event store / payload store for each backend the domain suite runs on, and the ``letterlog``
command run as a user runs it.

Test modules import these from here, never from one another.
"""

from __future__ import annotations

import json
import mailbox
import os
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.eventlog.store import MailLog, postgres_env, sqlite_env
from adapters.payloads.files import FilePayloadStore
from adapters.payloads.memory import InMemoryPayloadStore
from domain.errors import NotFound

BACKENDS = ("memory", "sqlite", "postgres")
"""The event stores the domain suite runs on: eventsourcing's in-memory store, a SQLite file,
a PostgreSQL database."""


def backend_params(*names: str) -> list[Any]:
    """The named backends as parameters of the ``backend`` fixture (PostgreSQL's run is
    marked ``services``)."""
    return [pytest.param(name, marks=pytest.mark.services) if name == "postgres" else name
            for name in names]


def on_backends(*names: str) -> pytest.MarkDecorator:
    """Runs a test once per named backend (the ``backend`` fixture; ``log``, ``payloads`` and
    ``mail`` are built on it)."""
    return pytest.mark.parametrize("backend", backend_params(*names), indirect=True)


def new_database(server: Any) -> str:
    """A fresh, empty database owned by the server's role; returns its DSN."""
    import psycopg
    from psycopg import sql

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(server.user)))
    return str(server.dsn).rsplit("/", 1)[0] + "/" + name


def drop_database(server: Any, dsn: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(dsn.rsplit("/", 1)[1])))


@contextmanager
def database(server: Any) -> Iterator[str]:
    """A fresh database for the block (its DSN), dropped afterwards."""
    dsn = new_database(server)
    try:
        yield dsn
    finally:
        drop_database(server, dsn)


def until(condition: Callable[[], Any], *, timeout: float, what: str,
          explain: Callable[[], str] = lambda: "") -> Any:
    """Polls ``condition`` until it is truthy (a readiness probe, not a sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}. "
                                 f"{explain()}")
        time.sleep(0.2)


def scale_out_env(data: Path, *, dsn: str, hbase: Any, kafka_bootstrap: str, prefix: str,
                  topic: str, **settings: str) -> dict[str, str]:
    """The ``LETTERLOG_`` variables of a process on the scale-out path: the log (and its data
    keys) in PostgreSQL, the tables in HBase under ``prefix``, the events in Kafka ``topic``;
    ``settings`` adds more (``stream_group="g"`` is ``LETTERLOG_STREAM_GROUP=g``). The key
    vault is named, so that a process given another data directory (a relay, a worker) opens
    the same one, as every process of a deployment must."""
    env = {"LETTERLOG_DATA": str(data), "LETTERLOG_KEY_VAULT": str(data / "vault.sqlite"),
           "LETTERLOG_EVENT_STORE": "postgres",
           "LETTERLOG_POSTGRES_DSN": dsn, "LETTERLOG_TABLE_STORE": "hbase",
           "LETTERLOG_HBASE_HOST": hbase.thrift_host,
           "LETTERLOG_HBASE_PORT": str(hbase.thrift_port),
           "LETTERLOG_HBASE_TABLE_PREFIX": prefix, "LETTERLOG_KAFKA_BOOTSTRAP": kafka_bootstrap,
           "LETTERLOG_KAFKA_TOPIC": topic}
    env.update({f"LETTERLOG_{name.upper()}": value for name, value in settings.items()})
    return env


@contextmanager
def event_log(backend: str, directory: Path, postgres: Callable[[], Any]) -> Iterator[MailLog]:
    """The event store of ``backend`` (one of ``BACKENDS``): in memory, a SQLite file in
    ``directory``, or a fresh database on the server ``postgres()`` returns."""
    from adapters.config.settings import postgres_env_from_dsn

    if backend == "memory":
        yield MailLog(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
        return
    if backend == "sqlite":
        log = MailLog(env=sqlite_env(str(directory / "events.sqlite")))
        try:
            yield log
        finally:
            log.close()
        return
    if backend != "postgres":
        raise ValueError(f"backend: {backend!r} is not one of {BACKENDS}")
    server = postgres()
    with database(server) as dsn:
        log = MailLog(env=postgres_env(postgres_env_from_dsn(dsn),
                                       str(directory / "vault.sqlite")))
        try:
            yield log
        finally:
            log.close()


def payload_store(backend: str, directory: Path) -> InMemoryPayloadStore | FilePayloadStore:
    """In memory beside the in-memory log; files beside a durable one."""
    if backend == "memory":
        return InMemoryPayloadStore()
    return FilePayloadStore(directory / "payloads")


BIN = [sys.executable, "-m", "adapters.cli"]
"""The ``letterlog`` command, as the installed script runs it."""


FIRST_WRITES = ("deliver", "import", "demo")
"""Commands a user's first session starts with: ``run`` makes the store (``letterlog
init``) before one of them meets a data directory that does not exist, as the user must
(no command but ``init`` creates a store)."""


def run(data: Path, *args: str, ok: bool = True,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """``letterlog --data DATA ARGS`` in a subprocess; with ``ok`` it must exit 0. A first
    write (``FIRST_WRITES``) into a DATA that does not exist yet runs ``init`` first."""
    env = {**os.environ, "LETTERLOG_DURABILITY": "normal"}
    words = [a for a in args if not a.startswith("-")]
    if words and words[0] in FIRST_WRITES and not data.exists():
        made = subprocess.run([*BIN, "--data", str(data), "init"], capture_output=True,
                              env=env, timeout=120)
        assert made.returncode == 0, made.stderr.decode()
    p = subprocess.run([*BIN, "--data", str(data), *args], capture_output=True, env=env,
                       input=stdin, timeout=120)
    if ok:
        assert p.returncode == 0, p.stderr.decode()
    return p


def jrun(data: Path, *args: str) -> list[Any]:
    """``run`` with ``--json``: one decoded object per output line."""
    p = run(data, "--json", *args)
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]


def stored_event_count(data: Path) -> int:
    """How many events the SQLite log in the data directory ``data`` holds."""
    con = sqlite3.connect(data / "events.sqlite")
    try:
        return int(con.execute("SELECT count(*) FROM stored_events").fetchone()[0])
    finally:
        con.close()


CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "mail"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


class Clock:
    """A controllable clock for tests."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


def make_mail(subject: str = "Hello", *, message_id: str | None = "<m1@example.org>",
              in_reply_to: str | None = None, references: str | None = None,
              body: str = "Hi there.\r\n", sender: str = "ada@example.org") -> bytes:
    lines = [f"From: {sender}", "To: grace@example.org", f"Subject: {subject}",
             "Date: Sun, 01 Mar 2026 12:00:00 +0000"]
    if message_id:
        lines.append(f"Message-ID: {message_id}")
    if in_reply_to:
        lines.append(f"In-Reply-To: {in_reply_to}")
    if references:
        lines.append(f"References: {references}")
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode()


def run_threads(work: Callable[[int], None], n: int = 8) -> list[BaseException]:
    """Runs ``work(i)`` in ``n`` threads started together; the errors they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 - the caller asserts there are none
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def in_processes(work: Callable[[Any], Any], args: list[Any]) -> list[Any]:
    """``work`` applied to each of ``args`` in its own spawned OS process."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(len(args)) as pool:
        return pool.map(work, args)


def corpus_messages(corpus: Path) -> Iterator[tuple[str, bytes]]:
    """Each message of the mail corpus (a file, or one of an mbox) named, with its bytes."""
    for path in sorted(corpus.iterdir()):
        if path.suffix == ".mbox":
            box = mailbox.mbox(str(path), create=False)
            for key in box.keys():  # noqa: SIM118 - iterating a mailbox yields messages
                yield f"{path.name}#{key}", box.get_bytes(key)
        elif path.is_file() and path.name != "MANIFEST.tsv" and not path.name.startswith("."):
            yield path.name, path.read_bytes()


@dataclass
class Changed:
    position: int
    changed: bool = True


@dataclass
class FakeRecords:
    """The store's four administrator methods, in memory."""

    root: dict[str, str] = field(default_factory=dict)
    acl: list[tuple[str, str, str, str]] = field(default_factory=list)
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def roots(self) -> dict[str, str]:
        return dict(self.root)

    def delete_root(self, user: str) -> Changed:
        self.calls.append(("delete_root", user))
        if user not in self.root:
            raise NotFound(user)
        del self.root[user]
        return Changed(len(self.calls))

    def acl_entries(self) -> list[tuple[str, str, str, str]]:
        return list(self.acl)

    def acl_delete(self, account: str, mailbox: str, identifier: str) -> Changed:
        self.calls.append(("acl_delete", account, mailbox, identifier))
        self.acl = [e for e in self.acl if e[:3] != (account, mailbox, identifier)]
        return Changed(len(self.calls))


def records() -> FakeRecords:
    return FakeRecords(
        root={"ada": "ada@example.org/INBOX", "gone": "shared@example.org/Projects",
              "Grace": "grace@example.org"},
        acl=[("shared@example.org", "Projects", "ada", "lr"),
             ("shared@example.org", "Projects", "gone", "lrswi"),
             ("shared@example.org", "Projects", "-gone", "w"),
             ("shared@example.org", "Projects", "$sales", "lr"),
             ("shared@example.org", "Projects", "-$interns", "r"),
             ("shared@example.org", "Projects", "anyone", "l"),
             ("shared@example.org", "Projects", "authenticated", "lr"),
             ("shared@example.org", "Archive", "grace", "lr")])
