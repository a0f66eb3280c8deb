"""``letterlog lmtp`` and the lda hand-off on the scale-out store (the log in PostgreSQL): the
server delivers (it once answered ``451 4.3.2 store unavailable`` to every message, looking
for an ``events.sqlite`` that a PostgreSQL deployment has not), and an lda handed off to it
stores its message once, a retry being a duplicate."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.mta_support import BOB, Client, Server, environment, letterlog
from tests.factories import make_mail

pytestmark = pytest.mark.services


@pytest.fixture
def scaleout(tmp_path: Path, pg_dsn: str) -> Iterator[tuple[dict[str, str], Path]]:
    """The command side of a scale-out deployment: the log in PostgreSQL; the tables are
    HBase's (nothing listens: the MTA paths append to the log only, ADR 0039)."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    data = tmp_path / "data"
    env = environment(runtime, LETTERLOG_EVENT_STORE="postgres", LETTERLOG_POSTGRES_DSN=pg_dsn,
                      LETTERLOG_KEY_VAULT=str(data / "vault.sqlite"),
                      LETTERLOG_TABLE_STORE="hbase", LETTERLOG_HBASE_HOST="127.0.0.1",
                      LETTERLOG_HBASE_PORT="9", LETTERLOG_DURABILITY="normal")
    assert letterlog(env, data, "init").returncode == 0
    assert not (data / "events.sqlite").exists()
    yield env, data


def _extracted(env: dict[str, str], data: Path, reply: str) -> bytes:
    found = re.search(r" as ([0-9a-f-]{36})", reply)
    assert found, reply
    p = letterlog(env, data, "extract", found.group(1))
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_the_lmtp_server_delivers_to_the_scale_out_store(scaleout, tmp_path):
    env, data = scaleout
    server = Server(env, data, tmp_path / "lmtp.sock")
    try:
        client = Client(tmp_path / "lmtp.sock")
        assert client.command("LHLO mx.example.net")[-1].startswith("250")
        raw = make_mail("over lmtp to postgres", message_id="<pg-lmtp@example.org>")
        [reply] = client.send("ada@example.net", [BOB], raw)
        assert reply.startswith("250 2.0.0 delivered as "), reply
        [again] = client.send("ada@example.net", [BOB], raw)  # a retry of the same message
        assert again == reply.replace(" delivered as ", " already delivered as "), again
        client.command("QUIT")
    finally:
        assert server.stop() == 0
    assert _extracted(env, data, reply) == raw


def test_an_lda_hands_off_to_the_scale_out_server_and_a_retry_is_a_duplicate(scaleout,
                                                                              tmp_path):
    env, data = scaleout
    server = Server(env, data, tmp_path / "lmtp.sock")
    try:
        assert (data / "lda.sock").is_socket()
        raw = make_mail("handed off to postgres", message_id="<pg-lda@example.org>")
        runs = [subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data),
                                "--json", "lda", "--recipient", BOB, "--queue-id", "PGQ1"],
                               input=raw, capture_output=True, env=env, timeout=120)
                for _ in range(2)]
    finally:
        assert server.stop() == 0
    assert [p.returncode for p in runs] == [0, 0], [p.stderr for p in runs]
    first, retry = (p.stdout.decode() for p in runs)
    assert "already delivered" not in first and "already delivered" in retry
    assert _extracted(env, data, first) == raw
    assert not os.path.exists(data / "events.sqlite")
