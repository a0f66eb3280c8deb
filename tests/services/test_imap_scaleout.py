"""``letterlog imap`` on the scale-out deployment: the log in PostgreSQL, the read models
in HBase kept by a stream worker fed through Kafka. A session sees its own commands at
once and other processes' within the workers' pace; IDLE reports a delivery made by
another process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.factories import CORPUS, scale_out_env, until
from tests.services.imap_support import ImapServer, imap_server
from tests.services.support import Pipeline

pytestmark = [pytest.mark.services, pytest.mark.slow]

ADA = "ada@example.org"
RAW = (CORPUS / "cpython__msg_01.eml").read_bytes().replace(b"\n", b"\r\n")  # as imaplib sends


@pytest.fixture
def scaled(pipeline: Pipeline, postgres_server, hbase_server, tmp_path) -> Iterator[ImapServer]:
    stop = threading.Event()

    def relay() -> None:  # the outbox relay, running as `letterlog relay` would
        with pipeline.relay() as r:
            while not stop.is_set():
                if not r.run_once():
                    stop.wait(0.1)

    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    pipeline.worker.start()
    data = pipeline.letterlog.settings.data
    env = scale_out_env(data, dsn=pipeline.letterlog.settings.postgres_dsn,
                        hbase=hbase_server, kafka_bootstrap=pipeline.bootstrap,
                        prefix=pipeline.prefix, topic=pipeline.topic)
    try:
        with imap_server(data, "--plaintext-auth", env=env) as server:
            yield server
    finally:
        stop.set()
        thread.join(timeout=30)


def test_imap_on_hbase_read_models_kept_by_a_stream_worker(scaled: ImapServer,
                                                           pipeline: Pipeline) -> None:
    c = scaled.client(ADA)  # opens ada's account: an event the worker projects
    until(lambda: c.select("INBOX")[0] == "OK", timeout=120,
          what="ada's INBOX in HBase")
    typ, data = c.append("INBOX", "(\\Flagged)", None, RAW)
    assert typ == "OK" and b"APPENDUID" in data[0]
    typ, data = c.fetch("1", "(FLAGS BODY.PEEK[])")  # its own APPEND, shown before OK
    assert typ == "OK" and data[0][1] == RAW and b"\\Flagged" in data[0][0]
    c.store("1", "+FLAGS", "(\\Seen)")
    other = scaled.client(ADA)
    other.select("INBOX", readonly=True)

    def seen() -> bool:
        other.noop()
        return b"\\Seen" in other.fetch("1", "(FLAGS)")[1][0]

    until(seen, timeout=60, what="the other session to see \\Seen")
    other.logout()
    tag = c._new_tag().decode()  # noqa: SLF001 - imaplib of Python 3.11 has no IDLE
    c.send(f"{tag} IDLE\r\n".encode())
    assert c.readline().startswith(b"+")
    pipeline.letterlog.deliver(account=ADA, raw=RAW)  # another process's delivery
    started = time.monotonic()
    c.sock.settimeout(60)
    lines = [c.readline()]
    while b"EXISTS" not in lines[-1]:
        lines.append(c.readline())
    print(f"IDLE saw the delivery after {time.monotonic() - started:.2f} s (scale-out)")
    assert lines[-1].strip() == b"* 2 EXISTS", lines
    c.send(b"DONE\r\n")
    while not c.readline().startswith(tag.encode()):
        pass
    c.store("1", "+FLAGS", "(\\Deleted)")
    typ, data = c.expunge()
    assert typ == "OK" and data == [b"1"]  # its own EXPUNGE, reported before OK
    c.logout()
