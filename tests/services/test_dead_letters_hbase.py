"""Dead letters on real HBase, acted on through ``letterlog dead-letters`` (subprocesses with
``LETTERLOG_TABLE_STORE=hbase``): a record a broken projector set aside is redriven once the
projector is fixed and then applied exactly once; a garbage record is discarded, and the
decision is kept. A redrive that leaves letters failing exits 1 and counts its try in
``times``."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.readside.verification import verify_tables
from adapters.streaming.deadletters import list_closed, list_dead_letters
from adapters.streaming.projector import StreamProjector
from projections.registry import ALL
from projections.runner import identity
from tests.stream_support import TOPIC, Log, failing_at, poison, story

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]


def cli(env: dict[str, str], *args: str, code: int = 0) -> list[dict[str, Any]]:
    p = subprocess.run([sys.executable, "-m", "adapters.cli", "--json", "dead-letters", *args],
                       cwd=ROOT, env={**os.environ, **env}, capture_output=True, timeout=300)
    assert p.returncode == code, p.stderr.decode()
    if code:
        assert p.stderr.decode().count("\n") == 1 and "still fail" in p.stderr.decode()
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]


def test_redrive_after_a_fix_applies_once_and_a_discard_is_recorded(hbase_server, tmp_path):
    from adapters.tables.hbase import HBaseTableStore

    history = Log()
    story(history.mail)
    # an event with no sealed part: the CLI's process redrives it without this in-memory
    # log's key store (a sealed delivery needs the log's keys: docs/streaming.md)
    first = [p for p, e in history.events()
             if type(e).__qualname__ == "Message.FlagsChanged"][-1]
    prefix = f"dl{secrets.token_hex(4)}"
    store = HBaseTableStore(hbase_server.thrift_host, hbase_server.thrift_port,
                            table_prefix=prefix)
    env = {"LETTERLOG_DATA": str(tmp_path / "data"), "LETTERLOG_TABLE_STORE": "hbase",
           "LETTERLOG_HBASE_HOST": hbase_server.thrift_host,
           "LETTERLOG_HBASE_PORT": str(hbase_server.thrift_port),
           "LETTERLOG_HBASE_TABLE_PREFIX": prefix}
    try:
        broken = StreamProjector(store, [TOPIC], failing_at(first), attempts=2,
                                 sleep=lambda s: None)
        broken.create_tables()
        broken.apply(history.records() + [poison(10**6)])
        letters = {d.position: d.id for d in list_dead_letters(store)}
        assert set(letters) == {first, None}

        # `lag` counts them in its verdict (here without Kafka or a log: still said)
        lag = subprocess.run([sys.executable, "-m", "adapters.cli", "--json", "lag"], cwd=ROOT,
                             env={**os.environ, **env}, capture_output=True, timeout=300)
        report = json.loads(lag.stdout)
        assert report["dead_letters"] == 2 and "2 dead letters open" in report["verdict"]
        times = {d["id"]: d["times"] for d in cli(env, "list")}
        [report] = cli(env, "redrive", code=1)  # the CLI's projectors are the fixed ones
        assert (report["redriven"], report["failed"]) == (1, 1)
        [left] = cli(env, "list")  # the garbage record failed once more: counted
        assert left["times"] == times[letters[None]] + 1
        [discarded] = cli(env, "discard", letters[None], "--reason", "garbage in the topic")
        assert discarded["id"] == letters[None]

        reports = verify_tables(store, identity, history.events, ALL, history.head)
        assert [r.table for r in reports if not r.identical] == []
        digests = {r.table: r.live_digest for r in reports}
        assert cli(env, "list") == []
        assert cli(env, "redrive") == [{"redriven": 0, "failed": 0}]
        again = verify_tables(store, identity, history.events, ALL, history.head)
        assert {r.table: r.live_digest for r in again} == digests  # applied once, not twice
        closed = {d.id: d.closed for d in list_closed(store)}
        assert closed[letters[first]]["outcome"] == "redriven"
        assert closed[letters[None]]["outcome"] == "discarded"
        assert closed[letters[None]]["reason"] == "garbage in the topic"
        [shown] = cli(env, "show", letters[None])
        assert shown["outcome"] == "discarded"
        assert [a["by"].split()[0] for a in shown["attempts"]] == ["worker", "redrive"]
    finally:
        for table in store.list_tables():
            store.drop_table(table)
        store.close()
