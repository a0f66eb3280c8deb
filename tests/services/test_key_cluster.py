"""The key-encryption keys in the key cluster (ADR 0073), on real PostgreSQL servers: the
log's, and the key store's own cluster with a synchronous streaming standby.

- Every KEK a data key refers to is in the key cluster, no host holds a vault file, and a
  second host with an empty data directory opens every message (the first one's deleted).
- Erasure: once ``erase-message`` exits 0, no file of the key cluster's primary or standby
  (heap, ``pg_wal``...), of the log's server or of the data directory holds an erased KEK
  or the erased data key, and every key the deployment holds opens no wrapped copy.
- Host loss: the key cluster's primary killed and its disk deleted, the standby promoted:
  every acknowledged message still opens (a multi-host DSN follows the promotion).
- Migration: a store with ``vault.sqlite`` reads through it until ``letterlog keys
  migrate`` moves its KEKs; run twice, the second copies nothing.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from devtools.devservers.keycluster import KeyClusterServer, KeyStandbyServer, remove_data
from tests.erasure_crash_support import key_opens
from tests.erasure_support import marked_mail, opened_by_a_fresh_reader
from tests.factories import database
from tests.key_cluster_support import (
    checkpoint,
    cli,
    files_with,
    keks,
    key_store_env,
    server_files,
    sql,
)

pytestmark = [pytest.mark.services, pytest.mark.slow]
ACCOUNT = "keys@example.org"


@pytest.fixture
def replicated() -> Iterator[tuple[KeyClusterServer, KeyStandbyServer]]:
    """A key cluster of its own with a synchronous standby (a test may kill either)."""
    with KeyClusterServer() as primary, KeyStandbyServer(primary) as standby:
        yield primary, standby


def _open(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Letterlog.open(Path(env["LETTERLOG_DATA"]))


def _deliver(store: Any, n: int) -> dict[Any, tuple[bytes, list[bytes]]]:
    sent = {}
    for i in range(n):
        raw, markers = marked_mail(f"k{i}", attachment=False)
        sent[store.deliver(account=ACCOUNT, raw=raw).message_id] = (raw, markers)
    return sent


def test_every_kek_is_in_the_key_cluster_and_a_second_host_opens_every_message(
        tmp_path: Path, pg_dsn: str, key_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with _open(key_store_env(a, dsn=pg_dsn, key_dsn=key_dsn), monkeypatch) as store:
        sent = _deliver(store, 12)
    referenced = {r[0] for r in sql(pg_dsn, "SELECT DISTINCT kek_id FROM letterlog_data_keys "
                                            "WHERE kek_id IS NOT NULL")}
    assert referenced and referenced <= set(keks(key_dsn))
    assert not list(a.glob("vault.sqlite*")), "no host holds the KEKs"
    import shutil

    shutil.rmtree(a)  # host A's disk is lost
    env_b = key_store_env(b, dsn=pg_dsn, key_dsn=key_dsn)
    with _open(env_b, monkeypatch) as store:  # host B: an empty directory, a new store's
        for message_id, (raw, _) in sent.items():
            assert store.extract(message_id) == raw
    every = [m for _, markers in sent.values() for m in markers]
    assert sorted(opened_by_a_fresh_reader(b, every)) == sorted(every)


def test_an_erasure_leaves_no_erased_kek_or_data_key_in_any_file_of_the_key_cluster(
        tmp_path: Path, pg_dsn: str, postgres_server: Any, monkeypatch: pytest.MonkeyPatch,
        replicated: tuple[KeyClusterServer, KeyStandbyServer]) -> None:
    primary, standby = replicated
    with database(primary) as key_dsn:
        standby_dsn = key_dsn.replace(f":{primary.port}/", f":{standby.port}/")
        env = key_store_env(tmp_path / "data", dsn=pg_dsn, key_dsn=key_dsn,
                            standbys=standby_dsn)
        with _open(env, monkeypatch) as store:
            sent = _deliver(store, 6)
            doomed = next(iter(sent))
            key_id = store.log.repository.get(doomed).personal.key_id
            data_key = store.log.keys.get(key_id)
            assert data_key
        before = keks(key_dsn)
        checkpoint(primary)
        sql(standby.admin_dsn, "CHECKPOINT")
        [(kek_id,)] = sql(pg_dsn, "SELECT kek_id FROM letterlog_data_keys WHERE key_id = %s",
                          key_id)
        kek = before[kek_id]
        cluster = server_files(primary) + server_files(standby)
        assert files_with(cluster, [kek]), "the attack works before: the KEK is on disk"

        erased = cli(env, "--json", "erase-message", str(doomed))
        assert erased.returncode == 0, erased.stderr
        gone = [v for k, v in before.items() if k not in keks(key_dsn)]
        assert kek in gone
        cluster = server_files(primary) + server_files(standby)
        everywhere = cluster + server_files(postgres_server) + [
            (p, p.read_bytes()) for p in (tmp_path / "data").rglob("*") if p.is_file()]
        assert files_with(everywhere, gone) == [], "an erased KEK is left in a file"
        assert files_with(everywhere, [data_key]) == [], "the erased data key is left"
        log_files = [blob for p, blob in server_files(postgres_server)]
        live = set(keks(key_dsn).values())
        assert not key_opens(key_id, log_files, [blob for _, blob in cluster], live), \
            "a key the deployment holds opens a wrapped copy of the erased data key"
        markers = [m for _, ms in sent.values() for m in ms]
        opened = opened_by_a_fresh_reader(tmp_path / "data", markers)
        assert set(sent[doomed][1]).isdisjoint(opened)
        assert len(opened) == len(markers) - len(sent[doomed][1])  # the others still open


def test_an_erasure_is_not_complete_while_a_standby_of_the_key_cluster_is_unreachable(
        tmp_path: Path, pg_dsn: str, key_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from devtools.devservers._common import free_port

    unreachable = key_dsn.rsplit("@", 1)[0] + f"@127.0.0.1:{free_port()}/x"
    env = key_store_env(tmp_path / "data", dsn=pg_dsn, key_dsn=key_dsn,
                        standbys=unreachable)
    with _open(env, monkeypatch) as store:
        doomed = next(iter(_deliver(store, 2)))
    p = cli({**env, "LETTERLOG_ERASE_WAIT_SECONDS": "1"}, "erase-message", str(doomed))
    assert p.returncode == 3, p.stderr
    assert "standby 127.0.0.1" in p.stderr and "Traceback" not in p.stderr
    status = cli(env, "erase", "status")
    assert status.returncode == 3
    fixed = cli({**env, "LETTERLOG_KEY_STORE_STANDBYS": ""}, "erase", "complete")
    assert fixed.returncode == 0, fixed.stderr


def test_losing_the_key_clusters_primary_loses_no_kek_of_an_acknowledged_message(
        tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch,
        replicated: tuple[KeyClusterServer, KeyStandbyServer]) -> None:
    primary, standby = replicated  # a cluster of this test's own: its database is the key store
    key_dsn = primary.dsn
    user, rest = key_dsn.split("@", 1)
    both = (f"{user}@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/"
            f"{rest.rsplit('/', 1)[1]}?target_session_attrs=read-write")
    env = key_store_env(tmp_path / "data", dsn=pg_dsn, key_dsn=both)
    with _open(env, monkeypatch) as store:
        sent = _deliver(store, 40)  # 8, 16, then 32 keys a refill: three KEKs
    assert len(keks(key_dsn)) >= 3
    os.kill(primary._proc.pid, signal.SIGKILL)  # noqa: SLF001 - the disk dies with it
    primary._proc.wait()  # noqa: SLF001
    remove_data(primary)
    standby.promote()
    every = [m for _, markers in sent.values() for m in markers]
    assert sorted(opened_by_a_fresh_reader(tmp_path / "data", every)) == sorted(every)
    with _open(env, monkeypatch) as store:  # and new mail goes on, on the promoted one
        later = _deliver(store, 3)
        for message_id, (raw, _) in {**sent, **later}.items():
            assert store.extract(message_id) == raw


def test_keys_migrate_moves_the_vault_file_into_the_key_cluster_once(
        tmp_path: Path, pg_dsn: str, key_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    env = key_store_env(data, dsn=pg_dsn, key_dsn=key_dsn)
    old = {k: v for k, v in env.items() if k != "LETTERLOG_KEY_STORE_DSN"}
    with _open(old, monkeypatch) as store:  # a store made before the key cluster
        sent = _deliver(store, 5)
    monkeypatch.delenv("LETTERLOG_KEY_STORE_DSN", raising=False)
    assert (data / "vault.sqlite").is_file()
    assert sql(key_dsn, "SELECT to_regclass('letterlog_keks')") == [(None,)]
    with _open(env, monkeypatch) as store:  # read through the file until migrated
        assert all(store.extract(i) == raw for i, (raw, _) in sent.items())
    first = cli(env, "--json", "keys", "migrate")
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["keks_copied"] == result["keks_in_file"] >= 1 and result["file_removed"]
    assert not list(data.glob("vault.sqlite*"))
    again = json.loads(cli(env, "--json", "keys", "migrate").stdout)
    assert again["keks_copied"] == 0 and not again["file_removed"]
    every = [m for _, markers in sent.values() for m in markers]
    assert sorted(opened_by_a_fresh_reader(data, every)) == sorted(every)


def test_keys_migrate_without_a_key_cluster_is_refused(tmp_path: Path, pg_dsn: str,
                                                       key_dsn: str) -> None:
    env = key_store_env(tmp_path / "data", dsn=pg_dsn, key_dsn=key_dsn)
    del env["LETTERLOG_KEY_STORE_DSN"]
    assert cli(env, "init").returncode == 0
    p = cli(env, "keys", "migrate")
    assert p.returncode == 2 and "LETTERLOG_KEY_STORE_DSN" in p.stderr, p.stderr
    assert (tmp_path / "data" / "vault.sqlite").is_file()  # nothing removed
