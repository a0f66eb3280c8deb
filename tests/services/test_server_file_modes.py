"""Issue 40, item 4: what the dev servers write is for their owner alone. Under each server's
work dir (PostgreSQL's data, WAL and log; HBase's WALs and store files; Kafka's segments and
logs) every directory is 0700 and every file 0600, and the `nobody` account can neither list
the work dir nor read a file holding a live envelope (docs/services.md, "File modes")."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import stat
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from devtools.devservers import HBaseServer, KafkaServer, PostgresServer

pytestmark = pytest.mark.services


@pytest.fixture(autouse=True)
def _runuser() -> None:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("reading as `nobody` needs root and runuser")


def as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "nobody", "--", *command], capture_output=True,
                          text=True, timeout=60, check=False)


#: directories a server makes traversable itself, at every start: HBase's root and bulk-load
#: staging directory (0711: others may pass through, never list; all in them is private)
TRAVERSABLE = {"data/hbase": 0o711, "data/hbase/staging": 0o711}


def open_to_others(root: Path) -> list[str]:
    """Every directory or file under ``root`` (and ``root``) with a group or other bit, but
    the ``TRAVERSABLE`` directories with exactly their mode."""
    found = []
    for path in [root, *root.rglob("*")]:
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue  # removed by the server meanwhile
        relative = str(path.relative_to(root))
        if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o077:
            continue
        if stat.S_ISDIR(st.st_mode) and TRAVERSABLE.get(relative) == stat.S_IMODE(st.st_mode):
            continue
        found.append(f"{path.relative_to(root.parent)} {stat.filemode(st.st_mode)}")
    return found


def holding(files: Callable[[], list[Path]], marker: bytes, what: str) -> list[Path]:
    """The files (as ``files()`` lists them) that hold ``marker``, polled until one does
    (the server writes it on its own schedule), bounded."""
    deadline = time.monotonic() + 60
    while True:
        found = []
        for path in files():
            try:
                if marker in path.read_bytes():
                    found.append(path)
            except (FileNotFoundError, IsADirectoryError):
                continue
        if found:
            return found
        assert time.monotonic() < deadline, f"no {what} holds the marker after 60 s"
        time.sleep(0.2)


def assert_private(root: Path, files: list[Path]) -> None:
    assert open_to_others(root) == []  # the modes themselves: not only a closed parent
    listing = as_nobody("ls", str(root))
    assert listing.returncode != 0 and "Permission denied" in listing.stderr
    for path in files:
        read = as_nobody("cat", str(path))
        assert read.returncode != 0 and read.stdout == "", path
        assert "Permission denied" in read.stderr


def test_postgres_data_wal_and_log_are_private(postgres_server: PostgresServer) -> None:
    import psycopg

    marker = f"envelope-{secrets.token_hex(8)}"
    table = f"modes_{secrets.token_hex(4)}"
    with psycopg.connect(postgres_server.admin_dsn, autocommit=True) as con:
        con.execute(f"CREATE TABLE {table} (subject text)")
        con.execute(f"INSERT INTO {table} VALUES (%s)", (marker,))
        con.execute("CHECKPOINT")
        try:
            root = postgres_server.workdir
            assert root is not None
            wal = holding(lambda: sorted((root / "data" / "pg_wal").glob("0*")),
                          marker.encode(), "WAL segment")
            assert_private(root, [*wal, root / "postgres.log", root / "data" / "PG_VERSION"])
        finally:
            con.execute(f"DROP TABLE {table}")


def test_hbase_wal_and_logs_are_private(hbase_server: HBaseServer) -> None:
    pytest.importorskip("happybase")
    name = f"modes_{secrets.token_hex(4)}".encode()
    marker = f"envelope-{secrets.token_hex(8)}".encode()
    conn = hbase_server.connection()
    try:
        conn.create_table(name, {"d": {}})
        conn.table(name).put(b"row", {b"d:subject": marker})
        root = hbase_server.workdir
        assert root is not None
        wal = holding(lambda: [p for p in (root / "data" / "hbase" / "WALs").rglob("*")
                               if p.is_file()], marker, "HBase WAL")
        logs = [p for p in (root / "logs").iterdir() if p.is_file()]
        assert logs
        assert_private(root, [*wal, *logs])
    finally:
        conn.disable_table(name)
        conn.delete_table(name)
        conn.close()


def test_kafka_segments_and_logs_are_private(kafka_server: KafkaServer) -> None:
    pytest.importorskip("aiokafka")
    from aiokafka import AIOKafkaProducer

    topic = f"letterlog-modes-{uuid.uuid4().hex[:8]}"
    marker = f"envelope-{secrets.token_hex(8)}".encode()

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topic, marker)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(produce(), timeout=120))
    root = kafka_server.workdir
    assert root is not None
    segments = holding(lambda: sorted((root / "data").glob(f"{topic}-*/*.log")), marker,
                       "Kafka segment")
    logs = [p for p in (root / "logs").iterdir() if p.is_file()]
    assert logs
    assert_private(root, [*segments, *logs])
