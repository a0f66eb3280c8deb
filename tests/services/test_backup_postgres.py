"""The scale-out backup procedure of docs/operations.md ("Backup and restore"), run once end
to end on the real PostgreSQL: a base backup with ``pg_basebackup``, the vault and the
payloads copied after it, a second PostgreSQL started on the copy, letterlog opened on it; with the
payloads in local files, the KEKs in the key cluster, and the payloads in HBase."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from devtools.devservers._common import free_port
from devtools.devservers.postgres import _os_user
from domain.errors import MessageNotFound
from tests.erasure_support import marked_mail
from tests.factories import database, until
from tests.services.support import drop_tables

ACCOUNT = "pitr@example.org"


def cli(data: Path, dsn: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``letterlog`` on the scale-out log (PostgreSQL at ``dsn``), tables embedded unless
    ``env`` says otherwise."""
    p = subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), *args],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "LETTERLOG_EVENT_STORE": "postgres",
                            "LETTERLOG_POSTGRES_DSN": dsn, "LETTERLOG_TABLE_STORE": "embedded",
                            **env})
    assert p.returncode == 0, (p.stdout, p.stderr)
    return p


def _as_server_account() -> dict[str, Any]:
    """PostgreSQL's programs run as its own account when we are root (it refuses root)."""
    account = _os_user()
    return {"user": account.pw_uid, "group": account.pw_gid} if account else {}


@pytest.fixture
def server_dir() -> Iterator[Path]:
    """A directory the PostgreSQL account may write (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="letterlog-pg-copy-"))
    account = _os_user()
    if account is not None:
        os.chown(path, account.pw_uid, account.pw_gid)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def served(pg: Any, base: Path, server_dir: Path, pg_dsn: str) -> Iterator[str]:
    """A second PostgreSQL on the base backup ``base``, on a free port: its DSN."""
    port = free_port()
    server = subprocess.Popen(
        [str(pg.bindir / "postgres"), "-D", str(base), "-h", "127.0.0.1", "-p", str(port),
         "-k", "", "-c", "logging_collector=off", "-c", "archive_mode=off"],
        stdout=subprocess.DEVNULL, stderr=open(server_dir / "copy.log", "wb"),  # noqa: SIM115
        env={"LC_ALL": "C", "PATH": f"{pg.bindir}:/usr/bin:/bin"}, **_as_server_account())
    try:
        copied_dsn = pg_dsn.replace(f":{pg.port}/", f":{port}/")

        def answers() -> bool:
            import psycopg

            assert server.poll() is None, (server_dir / "copy.log").read_text()
            try:
                with psycopg.connect(copied_dsn, connect_timeout=2) as conn:
                    return conn.execute("select 1").fetchone() == (1,)
            except psycopg.OperationalError:
                return False

        until(answers, timeout=120, what="the PostgreSQL started on the base backup")
        yield copied_dsn
    finally:
        server.send_signal(2)  # fast shutdown
        server.wait(timeout=60)


def base_backup(pg: Any, base: Path) -> None:
    """``pg_basebackup`` of the log's server: a self-contained copy (``-X stream``)."""
    subprocess.run([str(pg.bindir / "pg_basebackup"), "-d", pg.admin_dsn, "-D", str(base),
                    "-X", "stream", "-c", "fast", "--no-sync"], check=True, timeout=300,
                   capture_output=True, **_as_server_account())


@pytest.mark.services
def test_a_base_backup_with_the_vault_and_payloads_opens_on_a_second_server(
        postgres_server, pg_dsn, tmp_path, server_dir):
    pg = postgres_server
    data, copy = tmp_path / "data", tmp_path / "copy"
    settings = {"event_store": "postgres", "postgres_dsn": pg_dsn}
    with Letterlog.open(data, **settings) as store:
        before = {}
        for i in range(4):
            raw, _ = marked_mail("p", attachment=i % 2 == 0)  # some with a payload file
            before[store.deliver(account=ACCOUNT, raw=raw).message_id] = raw
    # 1. the base backup: the log and the wrapped data keys (a self-contained copy, -X stream)
    base = server_dir / "base"
    subprocess.run([str(pg.bindir / "pg_basebackup"), "-d", pg.admin_dsn, "-D", str(base),
                    "-X", "stream", "-c", "fast", "--no-sync"], check=True, timeout=300,
                   capture_output=True, **_as_server_account())
    # 2. after it, `letterlog backup`: the vault and the payloads (not the log)
    files = tmp_path / "files"
    manifest = json.loads(cli(data, pg_dsn, "--json", "backup", str(files)).stdout)
    assert manifest["log"] is None and "events.sqlite" not in manifest["order"]
    assert {"vault.sqlite", "payloads"} <= set(manifest["order"])
    with Letterlog.open(data, **settings) as store:  # the live store goes on
        later = store.deliver(account=ACCOUNT, raw=marked_mail("q", attachment=False)[0])
        gone = next(iter(before))
        store.erase_message(gone)  # erased after the backup: must stay erased
    record = tmp_path / "erasures.json"
    cli(data, pg_dsn, "erase", "export", str(record))
    # 3. a second PostgreSQL on the copy, on a free port
    with served(pg, base, server_dir, pg_dsn) as copied_dsn:
        restored = json.loads(cli(copy, copied_dsn, "--json", "restore-backup", str(files),
                                  "--reapply-erasures", str(record)).stdout)
        assert restored["messages_erased_again"] == [str(gone)]
        del before[gone]
        # 4. letterlog on the copy: every message of the backup, byte for byte; not the later
        with Letterlog.open(copy, event_store="postgres", postgres_dsn=copied_dsn) as store:
            listed = {r.message_id for r in store.messages(ACCOUNT, "INBOX", limit=100)}
            assert listed == set(before)
            for message_id, raw in before.items():
                assert store.extract(message_id) == raw
                assert store.show(message_id)["envelope"]["subject"]  # the sealed part opens
            assert later.message_id not in listed
            assert all(r.identical for r in store.verify())


def keyed(data: Path, dsn: str, key_dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``letterlog`` on the scale-out log with its KEKs in the key cluster (``key_dsn``)."""
    return subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LETTERLOG_EVENT_STORE": "postgres",
                               "LETTERLOG_POSTGRES_DSN": dsn, "LETTERLOG_KEY_STORE_DSN": key_dsn,
                               "LETTERLOG_TABLE_STORE": "embedded"})


@pytest.mark.services
def test_the_log_and_the_key_clusters_keks_restore_together_into_a_new_key_store(
        postgres_server, key_cluster, pg_dsn, tmp_path, server_dir):
    """docs/operations.md's scale-out procedure with the key cluster (ADR 0074): the base
    backup, then ``letterlog backup`` (the KEKs read last); the key cluster lost too: the
    restore into a new key store opens every message the backup holds, and the one erased
    after it stays erased, its KEK in no file of the new key cluster database."""
    pg = postgres_server
    data, copy = tmp_path / "data", tmp_path / "copy"
    with database(key_cluster) as live_keys, database(key_cluster) as new_keys:
        settings = {"event_store": "postgres", "postgres_dsn": pg_dsn,
                    "key_store_dsn": live_keys}
        with Letterlog.open(data, **settings) as store:
            before = {}
            for i in range(4):
                raw, _ = marked_mail("p", attachment=i % 2 == 0)
                before[store.deliver(account=ACCOUNT, raw=raw).message_id] = raw
        base = server_dir / "base"
        base_backup(pg, base)  # 1. the log
        files = tmp_path / "files"
        made = keyed(data, pg_dsn, live_keys, "--json", "backup", str(files))  # 2. the KEKs
        assert made.returncode == 0, made.stderr
        manifest = json.loads(made.stdout)
        assert manifest["keks_from_key_cluster"] >= 1 and "vault.sqlite" in manifest["order"]
        assert not (data / "vault.sqlite").exists()
        with Letterlog.open(data, **settings) as store:  # the live store goes on
            later = store.deliver(account=ACCOUNT, raw=marked_mail("q", attachment=False)[0])
            gone = next(iter(before))
            store.erase_message(gone)
        record = tmp_path / "erasures.json"
        assert keyed(data, pg_dsn, live_keys, "erase", "export", str(record)).returncode == 0
        with served(pg, base, server_dir, pg_dsn) as copied_dsn:
            done = keyed(copy, copied_dsn, new_keys, "--json", "restore-backup", str(files),
                         "--reapply-erasures", str(record))
            assert done.returncode == 0, done.stderr
            restored = json.loads(done.stdout)
            assert restored["messages_erased_again"] == [str(gone)]
            assert restored["keys_migrated"]["file_removed"]
            assert not list(copy.glob("vault.sqlite*"))  # the KEKs are the key cluster's
            erased_raw = before.pop(gone)
            with Letterlog.open(copy, event_store="postgres", postgres_dsn=copied_dsn,
                                key_store_dsn=new_keys) as store:
                listed = {r.message_id for r in store.messages(ACCOUNT, "INBOX", limit=100)}
                assert listed == set(before) and later.message_id not in listed
                for message_id, raw in before.items():
                    assert store.extract(message_id) == raw
                assert all(r.identical for r in store.verify())
            assert erased_raw not in (copy / "tables.sqlite").read_bytes()


@pytest.mark.services
def test_a_restore_whose_log_uses_a_kek_the_key_copy_lacks_is_refused_writing_nothing(
        postgres_server, key_cluster, pg_dsn, tmp_path, server_dir):
    """Issue 39's item 1: an erasure between the base backup and the key copy re-wraps its
    batch under a new KEK; the copied log still refers to the old one. The restore names
    it and refuses (exit 2) before writing: no target, no staging, no key table made."""
    pg = postgres_server
    data, copy = tmp_path / "data", tmp_path / "copy"
    with database(key_cluster) as live_keys, database(key_cluster) as new_keys:
        settings = {"event_store": "postgres", "postgres_dsn": pg_dsn,
                    "key_store_dsn": live_keys}
        with Letterlog.open(data, **settings) as store:
            ids = [store.deliver(account=ACCOUNT, raw=marked_mail("r", attachment=False)[0]
                                 ).message_id for _ in range(3)]  # one batch: one KEK
        base = server_dir / "base"
        base_backup(pg, base)
        with Letterlog.open(data, **settings) as store:
            store.erase_message(ids[0])  # between the two copies: the batch re-wrapped
        files = tmp_path / "files"
        assert keyed(data, pg_dsn, live_keys, "backup", str(files)).returncode == 0
        record = tmp_path / "erasures.json"
        assert keyed(data, pg_dsn, live_keys, "erase", "export", str(record)).returncode == 0
        with served(pg, base, server_dir, pg_dsn) as copied_dsn:
            refused = keyed(copy, copied_dsn, new_keys, "restore-backup", str(files),
                            "--reapply-erasures", str(record))
            assert refused.returncode == 2, refused.stderr
            assert "key-encryption key(s)" in refused.stderr and "Traceback" not in refused.stderr
            assert "Nothing was changed" in refused.stderr
            assert not copy.exists() and not list(tmp_path.glob(".copy.*"))
            import psycopg

            with psycopg.connect(new_keys) as conn:
                assert conn.execute("SELECT to_regclass('letterlog_keks')").fetchone() == (None,)


@pytest.mark.services
def test_a_scale_out_backup_carries_the_payloads_in_hbase_back_into_a_fresh_hbase(
        postgres_server, pg_dsn, hbase_server, tmp_path, server_dir):
    pg, tag = postgres_server, secrets.token_hex(4)
    data, copy = tmp_path / "data", tmp_path / "copy"
    hbase = {"LETTERLOG_TABLE_STORE": "hbase", "LETTERLOG_HBASE_HOST": hbase_server.thrift_host,
             "LETTERLOG_HBASE_PORT": str(hbase_server.thrift_port),
             "LETTERLOG_HBASE_TABLE_PREFIX": f"bk{tag}"}
    fresh = {**hbase, "LETTERLOG_HBASE_TABLE_PREFIX": f"bkr{tag}"}  # HBase lost as well
    settings = {"event_store": "postgres", "postgres_dsn": pg_dsn,
                **{k.removeprefix("LETTERLOG_").lower(): v for k, v in hbase.items()}}
    try:
        with Letterlog.open(data, **settings) as store:
            before = {}
            for i in range(4):
                raw, _ = marked_mail("h", attachment=i % 2 == 0)  # two with a payload
                before[store.deliver(account=ACCOUNT, raw=raw).message_id] = raw
        assert not (data / "payloads").exists()  # in HBase
        base = server_dir / "base"
        base_backup(pg, base)  # 1. the log first: every payload it names is stored already
        files = tmp_path / "files"
        manifest = json.loads(cli(data, pg_dsn, "--json", "backup", str(files),
                                  **hbase).stdout)  # 2. then the payloads, out of HBase
        assert manifest["payloads"]["from"] == "hbase"
        assert manifest["payloads"]["files"] == 2, manifest["payloads"]
        with Letterlog.open(data, **settings) as store:  # the live store goes on
            later = store.deliver(account=ACCOUNT, raw=marked_mail("q", attachment=True)[0])
            gone = next(iter(before))  # one with a payload
            store.erase_message(gone)
        record = tmp_path / "erasures.json"
        cli(data, pg_dsn, "erase", "export", str(record), **hbase)
        with served(pg, base, server_dir, pg_dsn) as copied_dsn:
            restored = json.loads(cli(copy, copied_dsn, "--json", "restore-backup", str(files),
                                      "--reapply-erasures", str(record), **fresh).stdout)
            assert restored["messages_erased_again"] == [str(gone)]
            moved = restored["payloads_moved"]
            assert (moved["files"], moved["copied"], moved["removed"]) == (2, 2, 2), moved
            assert list((copy / "payloads").glob("??/*")) == []  # all in the fresh HBase
            del before[gone]
            with Letterlog.open(copy, **{**settings, "postgres_dsn": copied_dsn,
                                         "hbase_table_prefix": fresh[
                                             "LETTERLOG_HBASE_TABLE_PREFIX"]}) as store:
                for message_id, raw in before.items():
                    assert store.extract(message_id) == raw
                with pytest.raises(MessageNotFound):
                    store.extract(later.message_id)
    finally:
        for prefix in (hbase, fresh):
            drop_tables(hbase_server, prefix["LETTERLOG_HBASE_TABLE_PREFIX"])
