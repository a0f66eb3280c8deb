"""The scale-out backup procedure of docs/operations.md ("Backup and restore"), run end to
end on the real PostgreSQL: a base backup with ``pg_basebackup``, the vault and the payloads
copied after it, a second PostgreSQL started on the copy, letterlog opened on it; with the
payloads in local files, and with the payloads in HBase (ADR 0072: the backup copies them out
of HBase, the restore puts them back into a fresh HBase table)."""

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

from adapters.devservers._common import free_port
from adapters.devservers.postgres import _os_user
from adapters.embedded import Letterlog
from domain.errors import MessageNotFound
from tests.erasure_support import marked_mail
from tests.factories import until
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
    base_backup(pg, base)
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
    with copy_server(pg, pg_dsn, base, server_dir) as copied_dsn:
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


@contextlib.contextmanager
def copy_server(pg: Any, pg_dsn: str, base: Path, server_dir: Path) -> Iterator[str]:
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


def base_backup(pg: Any, target: Path) -> None:
    """``pg_basebackup`` of the server: the log and the wrapped data keys (self-contained)."""
    subprocess.run([str(pg.bindir / "pg_basebackup"), "-d", pg.admin_dsn, "-D", str(target),
                    "-X", "stream", "-c", "fast", "--no-sync"], check=True, timeout=300,
                   capture_output=True, **_as_server_account())


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
        with copy_server(pg, pg_dsn, base, server_dir) as copied_dsn:
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
