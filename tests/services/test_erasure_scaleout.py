"""Scale-out erasure completes, on the real servers: a PostgreSQL log, the outbox relay,
Kafka, a stream worker (a real subprocess) and HBase.

Messages carrying unique markers (subject, From, body, attachment name and a large
attachment kept in the payload store: HBase's payload table, ADR 0072) go through the
scale-out path; one message is deleted and purged by two purge runs (the first purges it,
the second deletes its payload once the workers have applied the purge); one message and
one account are erased; ``letterlog erase complete`` waits for the workers, frees the erased
payloads, flushes and major-compacts HBase, the payload table included. Then no marker of a
purged or erased message (nor the digest of a stored one, ADR 0099) is in any file of the
data directory, and, within the
write-ahead-log and archive retention docs/lifecycle.md states (here shortened by
``SITE``), under HBase's root directory, in any form (plain, base64, inside a zstd frame);
a message delivered beside them keeps its payload and its row.

A server of its own: the shorter schedules must not change the other tests' server.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.bootstrap.scaleout import relay as make_relay
from adapters.embedded import Letterlog
from adapters.streaming.worker import kafka_lag
from devtools.devservers import HBaseServer
from tests.erasure_support import (
    deliver_marked,
    encoded_forms,
    every_file,
    files_holding,
    files_holding_any_form,
    marked_mail,
)
from tests.factories import database, scale_out_env, until
from tests.key_cluster_support import files_with, keks, server_files
from tests.services.servers import _fixture
from tests.services.support import ERASURE_SITE, Worker

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
SITE = {**ERASURE_SITE,
        # compacted files leave the region's directory after 1 s (default 2 min); the
        # MajorCompactor tool reads the same file and waits that long before its check
        "hbase.hfile.compaction.discharger.interval": "1000"}
CLEAN_DEADLINE_S = 240.0


@pytest.fixture(scope="module")
def hbase() -> Any:
    yield from _fixture("hbase-erasure-scaleout", lambda: HBaseServer(extra_site=SITE))


def cli(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "adapters.cli", "--json", *args], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)


def test_scale_out_erasure_completes_leaving_no_marker_in_hbase_or_the_payloads(
        tmp_path, monkeypatch, hbase, postgres_server, kafka_server, key_cluster):
    _run(tmp_path, monkeypatch, hbase, postgres_server, kafka_server, key_cluster,
         wait_for_cleaners=True)


def test_with_hbase_defaults_only_the_wals_and_archive_the_docs_name_keep_erased_bytes(
        tmp_path, monkeypatch, hbase_server, postgres_server, kafka_server, key_cluster):
    """The session's HBase runs HBase's default schedules: right after ``erase complete``
    no live store file holds an erased marker; what still does is only under ``WALs/``,
    ``oldWALs/`` and ``archive/``, as docs/lifecycle.md says (gone within its bound)."""
    _run(tmp_path, monkeypatch, hbase_server, postgres_server, kafka_server, key_cluster,
         wait_for_cleaners=False)


def _run(tmp_path: Path, monkeypatch: Any, hbase: Any, postgres_server: Any,
         kafka_server: Any, key_cluster: Any, *, wait_for_cleaners: bool) -> None:
    tag = secrets.token_hex(4)
    data = tmp_path / "data"
    with database(postgres_server) as dsn, database(key_cluster) as key_dsn:
        env = scale_out_env(
            data, dsn=dsn, hbase=hbase, kafka_bootstrap=kafka_server.bootstrap,
            prefix=f"so{tag}", topic=f"so-{tag}", stream_group=f"so-{tag}",
            stream_batch="40", stream_within="0.2", stream_commit_interval="0.5",
            stream_session_timeout="6", hbase_thrift2_port=str(hbase.thrift2_port),
            hbase_compactor=hbase.compactor_command(), erase_complete_wait_seconds="500",
            key_store_dsn=key_dsn, deleted_retention_days="0", payload_grace_hours="0")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        worker = Worker(env, tmp_path / "worker.log")
        store = Letterlog.open(data)
        try:
            _scenario(store, env, worker, data, Path(hbase.workdir) / "data" / "hbase",
                      wait_for_cleaners,
                      servers=[Path(postgres_server.workdir), Path(kafka_server.workdir)],
                      keys=(key_cluster, key_dsn))
        finally:
            worker.stop()
            store.close()


def _publish(store: Letterlog) -> None:
    with make_relay(store.settings, log=store, partitions=4,
                                   batch=100) as relay:
        relay.run_once()


def _wait_for_worker(store: Letterlog, worker: Worker) -> None:
    s = store.settings

    def caught_up() -> bool:
        assert worker.alive(), worker.tail()
        lag = kafka_lag(s.kafka_bootstrap, s.kafka_topic, s.stream.group)
        return bool(lag["partitions"]) and lag["events"] == 0

    until(caught_up, timeout=180, what="the worker to commit every record",
          explain=worker.tail)


def _purge_twice(store: Letterlog, env: dict[str, str], worker: Worker) -> None:
    """The deleted message purged by a run (no retention, no grace: ``env``); its payload
    deleted by the next run, once the workers have applied the purge (its reference gone)."""
    first = cli(env, "purge", "run")
    assert first.returncode == 0, first.stderr
    assert _queue(first, "deleted")["purged"] == 1, first.stdout
    _publish(store)
    _wait_for_worker(store, worker)
    second = cli(env, "purge", "run")
    assert second.returncode == 0, second.stderr
    assert _queue(second, "payloads")["payloads_freed"] == 1, second.stdout


def _queue(run: subprocess.CompletedProcess[str], name: str) -> dict[str, Any]:
    return next(q for q in json.loads(run.stdout)["queues"] if q["queue"] == name)


def _scenario(store: Letterlog, env: dict[str, str], worker: Worker, data: Path,
              root: Path, wait_for_cleaners: bool, servers: list[Path],
              keys: tuple[Any, str]) -> None:
    account_ids, account_markers = deliver_marked(store)  # erase-account
    one, one_markers = marked_mail("one", attachment=True)  # erase-message
    kept, kept_markers = marked_mail("kept", attachment=True)  # stays
    purged, purged_markers = marked_mail("purged", attachment=True)  # purge run
    one_id = store.deliver(account="single@example.org", raw=one).message_id
    kept_id = store.deliver(account="single@example.org", raw=kept).message_id
    store.delete(store.deliver(account="single@example.org", raw=purged).message_id)
    # and the digests of the two stored ones, hex and raw: a guess would be checked against
    # them (ADR 0099: sealed in the events; the payload table's link goes with the payload)
    digests = [form for raw in (one, purged) for form in (
        hashlib.sha256(raw).hexdigest().encode(), hashlib.sha256(raw).digest())]
    erased = account_markers + one_markers + purged_markers + digests
    blobs = [m for m in erased if m.startswith(b"blob")]
    _publish(store)
    worker.start()
    _wait_for_worker(store, worker)
    host = store.projections
    assert host.tables.flush([host.physical("messages"), "payloads"])
    assert files_holding(root, erased), "the rows (subject, From) are in HBase's files"
    assert not (data / "payloads").exists(), "no payload on this host's disk"
    in_hbase = files_holding_any_form(root, blobs)
    assert {b for hits in in_hbase.values() for b in hits} == set(blobs), "in the payload table"
    _purge_twice(store, env, worker)

    key_cluster, key_dsn = keys
    erased_ids = [one_id, *account_ids]
    data_keys = [store.log.keys.get(store.log.repository.get(i).personal.key_id)
                 for i in erased_ids]
    keks_before = keks(key_dsn)
    by_message = store.erase_message(one_id)
    erasing = cli(env, "erase-account", "erasure@example.org")
    assert erasing.returncode == 3, erasing.stderr  # done, not yet complete
    assert "`letterlog erase complete`" in erasing.stderr
    by_account = json.loads(erasing.stdout)
    assert by_message["scale_out_pending"] and by_account["scale_out_pending"]
    assert by_message["purged"] == [str(one_id)]
    assert sorted(by_account["purged"]) == sorted(str(i) for i in account_ids)
    # the workers have not applied Purged yet: nothing is decided from HBase's state now
    assert by_message["payload_bytes_freed"] == by_account["payload_bytes_freed"] == 0
    status = cli(env, "erase", "status")
    assert status.returncode == 3, status.stderr
    assert len(json.loads(status.stdout)["scale_out"]["pending"]) == 3  # and the purge runs

    _publish(store)  # the relay runs all the time in a deployment
    started = time.monotonic()
    done = cli(env, "erase", "complete")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    scale = json.loads(done.stdout)["scale_out"]
    assert scale["complete"] and scale["pending_cleared"] == 3, scale  # and purges.json
    assert scale["payloads_freed"] == 2 and scale["payload_bytes_freed"] > 0, scale
    assert len(scale["tables_compacted"]) == 7, scale
    assert any(t.endswith("_payloads") for t in scale["tables_compacted"]), scale
    assert "major-compacting" in done.stderr  # progress on stderr
    print(f"erase complete: {took:.1f} s; {scale}")

    assert files_holding_any_form(data, erased) == {}  # payloads, relay position...
    assert not list(data.glob("vault.sqlite*"))  # the KEKs: the key cluster's alone
    gone = [v for k, v in keks_before.items() if k not in keks(key_dsn)]
    assert gone, "the erasure rotated KEKs away"
    everywhere = server_files(key_cluster) + [
        (p, blob) for server in servers for p, blob in every_file(server)] + list(every_file(data))
    assert files_with(everywhere, gone) == [], "an erased KEK is left in a file"
    assert files_with(everywhere, [k for k in data_keys if k]) == [], "an erased data key"
    for server in servers:  # PostgreSQL (heap, pg_wal) and Kafka's segments: sealed only
        assert files_holding_any_form(server, erased) == {}, server
    logged = worker.log.read_bytes()  # the worker's log never held a message's text
    assert not [m for m in erased + kept_markers if any(f in logged
                                                          for f in encoded_forms(m))]
    assert store.extract(kept_id) == kept, "a live one keeps its payload"
    assert files_holding_any_form(root, kept_markers[-1:]), "in HBase's files"
    assert files_holding(root, kept_markers[:1]), "the live message's row is still there"
    after = cli(env, "erase", "status")
    assert after.returncode == 0 and json.loads(after.stdout)["scale_out"]["pending"] == []
    if not wait_for_cleaners:
        left = files_holding_any_form(root, erased)
        outside = {f for f in left if not f.startswith(("WALs/", "oldWALs/", "archive/"))}
        assert outside == set(), f"a live store file still holds erased bytes: {left}"
        print(f"with HBase's defaults, right after erase complete: {sorted(left)}")
        return
    deadline = time.monotonic() + CLEAN_DEADLINE_S
    left = files_holding_any_form(root, erased)
    while left and time.monotonic() < deadline:
        time.sleep(1.0)  # polling files for HBase's cleaner chores; no event to wait on
        left = files_holding_any_form(root, erased)
    cleaned = time.monotonic() - started
    assert left == {}, f"HBase still holds erased bytes {CLEAN_DEADLINE_S} s after: {left}"
    assert files_holding_any_form(root, erased) == {}
    print(f"HBase's root directory clean {cleaned:.1f} s after erase complete began")
