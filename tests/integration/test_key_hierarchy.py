"""Data keys wrapped by key-encryption keys (ADR 0041): destroying a key rotates its batch's
KEK, so an old copy of the key table (a WAL, a backup) opens nothing; the key store grows
with the messages, not with the processes; keys written before the hierarchy get wrapped."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from uuid import UUID

import pytest
from cryptography.exceptions import InvalidTag

from adapters.embedded import Letterlog
from adapters.eventlog import sealing
from adapters.eventlog.keysqlite import SqliteKeyStore
from adapters.eventlog.keyvault import unwrap
from adapters.eventlog.sealing import new_keys
from tests.factories import make_mail


def rows(path: Path) -> dict[UUID, tuple[bytes | None, bytes | None]]:
    """What a copy of the key table holds (as a WAL or a backup would keep it)."""
    con = sqlite3.connect(path)
    try:
        return {UUID(bytes=k): (w, e) for k, w, e in
                con.execute("SELECT key_id, key, kek_id FROM data_keys")}
    finally:
        con.close()


def vault_keks(path: Path) -> list[bytes]:
    """Every KEK the vault file holds now (the attacker reads them all)."""
    con = sqlite3.connect(path)
    try:
        return [bytes(r[0]) for r in con.execute("SELECT kek FROM keks")]
    finally:
        con.close()


def opens(wrapped: bytes, key_id: UUID, keks: list[bytes]) -> bytes | None:
    for kek in keks:
        try:
            return unwrap(kek, key_id, wrapped)
        except InvalidTag:
            continue
    return None


def every_file(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_destroying_a_key_rotates_its_batch_so_an_old_copy_of_the_table_opens_nothing(
        tmp_path: Path) -> None:
    store = SqliteKeyStore(tmp_path / "keys.sqlite")
    taken = [store.new_key() for _ in range(5)]  # one refill: one KEK
    before = rows(tmp_path / "keys.sqlite")
    old_keks = vault_keks(tmp_path / "vault.sqlite")
    assert len(old_keks) == 1
    (doomed, doomed_key), kept = taken[0], taken[1:]
    wrapped, _ = before[doomed]
    assert wrapped is not None and opens(wrapped, doomed, old_keks) == doomed_key  # can fail
    assert store.destroy([doomed]) == 1 and store.destroy([doomed]) == 0
    store.close()

    again = SqliteKeyStore(tmp_path / "keys.sqlite")
    assert again.get(doomed) == sealing.DESTROYED
    assert [again.get(k) for k, _ in kept] == [key for _, key in kept]
    now = vault_keks(tmp_path / "vault.sqlite")
    assert old_keks[0] not in now
    assert opens(wrapped, doomed, now) is None  # the old wrapped copy is noise now
    files = every_file(tmp_path)
    assert doomed_key not in files and old_keks[0] not in files
    again.close()


def test_keys_never_handed_out_are_given_back_and_the_store_grows_with_the_messages(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    for i in range(12):  # twelve short-lived commands, one delivery each
        with Letterlog.open(data) as store:
            store.deliver(account="ada@example.org", raw=make_mail(f"Subject {i}"))
    with Letterlog.open(data) as store:
        count = store.log.keys.count()
    assert count["keys"] == 12 and count["destroyed"] == 0
    assert count["keks"] <= 12


def test_keys_written_before_the_hierarchy_are_wrapped_when_the_store_opens(
        tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    plain = new_keys(3)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE data_keys (key_id BLOB PRIMARY KEY, key BLOB) WITHOUT ROWID")
    con.executemany("INSERT INTO data_keys VALUES (?, ?)", [(k.bytes, v) for k, v in plain])
    con.commit()
    con.close()
    store = SqliteKeyStore(path)
    assert [store.get(k) for k, _ in plain] == [v for _, v in plain]
    held = rows(path)
    assert all(e is not None and w != v for (k, v) in plain for w, e in [held[k]])
    files = every_file(tmp_path)
    assert not any(v in files for _, v in plain)
    store.close()


def test_a_sealed_part_names_the_vault_it_needs_when_its_kek_is_missing(tmp_path: Path) -> None:
    store = SqliteKeyStore(tmp_path / "keys.sqlite")
    key_id, _ = store.new_key()
    store.close()
    (tmp_path / "vault.sqlite").unlink()  # another vault than the keys were wrapped with
    elsewhere = SqliteKeyStore(tmp_path / "keys.sqlite")
    with pytest.raises(sealing.KeyStoreMissing, match="vault"):
        elsewhere.get(key_id)
    elsewhere.close()


def test_a_key_read_while_another_process_rotates_its_batch_still_opens(tmp_path: Path) -> None:
    """The reader's row is wrapped under a KEK the other process removes before the reader
    looks it up in the vault (two purgers at once met this): the reader reads the row again."""
    writer = SqliteKeyStore(tmp_path / "keys.sqlite")
    (kept, key), (doomed, _) = writer.new_key(), writer.new_key()
    reader = SqliteKeyStore(tmp_path / "keys.sqlite")
    read_row = reader.table.row
    rotated = []

    def row_then_rotation(key_id: UUID):
        row = read_row(key_id)
        if not rotated:
            rotated.append(writer.destroy([doomed]))  # between the reader's two reads
        return row

    reader.table.row = row_then_rotation  # type: ignore[method-assign]
    assert reader.get(kept) == key and rotated == [1]
    assert reader.get(doomed) == sealing.DESTROYED
    reader.close()
    writer.close()
