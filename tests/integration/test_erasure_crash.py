"""Erasure as an intent that completes (ADR 0063): ``kill -9`` at every step boundary of
``erase-message``, ``erase-account`` and ``purge run`` (a real CLI subprocess, killed by the
test fault point ``LETTERLOG_TEST_CRASH_AT``, ``adapters/faults.py``), then what
docs/lifecycle.md says to run; then an attacker with a copy of the data directory tries
every key the deployment holds, and every KEK-sized window next to a KEK id in the vault's
files, on every wrapped copy of the erased messages' data keys it can find: nothing opens,
no marker of the messages is in any file, and a message beside them still opens.

``KILLED`` records, per case, what the crash left and what repaired it (the killed-step
table: ``pytest -s`` prints it)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from adapters.embedded import Letterlog
from tests.erasure_support import (
    ACCOUNT,
    around,
    deliver_marked,
    files_holding_any_form,
    killed,
    marked_mail,
    opened_by_a_fresh_reader,
    opens,
)
from tests.factories import BIN

BYSTANDER = "bystander@example.org"
ERASE_STEPS = ["erase:intent", "erase:appended", "keys:rotated", "erase:keys",
               "erase:payloads", "erase:completed"]
PURGE_STEPS = ["purge:intent", "purge:appended", "keys:rotated", "purge:keys",
               "purge:completed"]
KILLED: list[tuple[str, str, str, str]] = []  # (command, killed at, left, repaired by)


def letterlog(data: Path, *args: str, crash_at: str | None = None,
              **env: str) -> subprocess.CompletedProcess[bytes]:
    environ = {**os.environ, "LETTERLOG_DURABILITY": "normal",
               "LETTERLOG_ERASE_WAIT_SECONDS": "5", **env}
    environ.pop("LETTERLOG_TEST_CRASH_AT", None)
    if crash_at is not None:
        environ["LETTERLOG_TEST_CRASH_AT"] = crash_at
    return subprocess.run([*BIN, "--data", str(data), *args], capture_output=True,
                          env=environ, timeout=120)


# -- the attacker ------------------------------------------------------------------------------
def attacker_copy(data: Path, into: Path) -> Path:
    """A copy of every file under ``data`` as it is on disk (opening the live files with
    SQLite could checkpoint them: the copy is what a thief or a backup gets)."""
    shutil.copytree(data, into, symlinks=True)
    return into


def recoverable_keys(copy: Path, key_ids: list[UUID]) -> list[UUID]:
    """The data keys among ``key_ids`` an attacker opens from ``copy``: every KEK the vault
    holds (read with SQLite), plus every 32-byte window within 64 bytes of any 16 bytes found
    both near a copy of the key id and in a vault file (a deleted KEK's row); tried on every
    60-byte window near every copy of the key id in every file of the key store (live rows,
    free pages, WAL frames)."""
    key_files = [p.read_bytes() for p in copy.iterdir()
                 if p.name.startswith("keys.sqlite") and p.is_file()]
    vault_files = [p.read_bytes() for p in copy.iterdir()
                   if p.name.startswith("vault.sqlite") and p.is_file()]
    keks: set[bytes] = set()
    if (copy / "vault.sqlite").exists():
        con = sqlite3.connect(copy / "vault.sqlite")
        try:
            keks |= {bytes(r[0]) for r in con.execute("SELECT kek FROM keks")}
        finally:
            con.close()
    opened = []
    for key_id in key_ids:
        wrapped: set[bytes] = set()
        near: set[bytes] = set()
        for blob in key_files:
            wrapped |= around(blob, key_id.bytes, 96, 96, 60)
            near |= around(blob, key_id.bytes, 96, 96, 16)
        candidates = set(keks)
        for kek_id in near:
            for blob in vault_files:
                if kek_id in blob:
                    candidates |= around(blob, kek_id, 64, 64, 32)
        if any(opens(kek, key_id, w) for kek in candidates for w in wrapped):
            opened.append(key_id)
    return opened


def purged_in_log(copy: Path, ids: list[UUID]) -> int:
    con = sqlite3.connect(copy / "events.sqlite")
    try:
        rows = {str(UUID(str(r[0]))) for r in con.execute(
            "SELECT originator_id FROM stored_events WHERE topic = "
            "'domain.message:Message.Purged'")}
    finally:
        con.close()
    return sum(1 for i in ids if str(i) in rows)


def stale_keks(copy: Path) -> int:
    """KEKs in the vault that no data key refers to: a rotation's old KEK left behind opens
    every old copy of its batch's wrapped keys (PostgreSQL's WAL, a backup of the table)."""
    if not (copy / "vault.sqlite").exists():
        return 0
    vault, keys = sqlite3.connect(copy / "vault.sqlite"), sqlite3.connect(copy / "keys.sqlite")
    try:
        referenced = {bytes(r[0]) for r in keys.execute(
            "SELECT DISTINCT kek_id FROM data_keys WHERE kek_id IS NOT NULL")}
        return sum(1 for (k,) in vault.execute("SELECT kek_id FROM keks")
                   if bytes(k) not in referenced)
    finally:
        vault.close()
        keys.close()


def state_of(data: Path, scratch: Path, ids: list[UUID], key_ids: list[UUID],
             markers: list[bytes]) -> dict[str, Any]:
    copy = attacker_copy(data, scratch)
    try:
        return {"intents": len(list((copy / "erasures-intent").glob("*.json")))
                if (copy / "erasures-intent").is_dir() else 0,
                "purged": purged_in_log(copy, ids),
                "keys_open": len(recoverable_keys(copy, key_ids)),
                "stale_keks": stale_keks(copy),
                "files_with_markers": sorted(files_holding_any_form(copy, markers))}
    finally:
        shutil.rmtree(copy)


def describe(left: dict[str, Any], n: int) -> str:
    files = left["files_with_markers"]
    return (f"{left['purged']}/{n} purged in the log, {left['keys_open']}/{n} data keys "
            f"recoverable, {left['stale_keks']} rotated-away KEK(s) in the vault, "
            f"intent files {left['intents']}, marker in "
            f"{', '.join(files) if files else 'no file'}")


# -- the store ---------------------------------------------------------------------------------
def a_store(data: Path) -> tuple[list[UUID], list[UUID], list[bytes], list[bytes]]:
    """Two marked messages of ACCOUNT (one inline, one with a payload and an attachment)
    and one marked message of BYSTANDER; the ids, their data keys, the markers of ACCOUNT's
    and of the bystander's."""
    with Letterlog.open(data) as store:
        ids, markers = deliver_marked(store)
        raw, kept = marked_mail("k", attachment=True)
        store.deliver(account=BYSTANDER, raw=raw)
        key_ids = [store.log.repository.get(i).personal.key_id for i in ids]
    assert all(k is not None for k in key_ids)
    return ids, key_ids, markers, kept


def after_repair(data: Path, tmp_path: Path, ids: list[UUID], key_ids: list[UUID],
                 markers: list[bytes], kept: list[bytes]) -> dict[str, Any]:
    """What the attacker finds once the documented command has run: must be nothing."""
    left = state_of(data, tmp_path / "after", ids, key_ids, markers)
    assert left == {"intents": 0, "purged": len(ids), "keys_open": 0, "stale_keks": 0,
                    "files_with_markers": []}, left
    assert opened_by_a_fresh_reader(data, markers) == []  # the live path, every key it has
    assert kept[0] in opened_by_a_fresh_reader(data, kept)  # the bystander's subject opens
    status = letterlog(data, "erase", "status")
    assert status.returncode == 0 and status.stdout == b"no erasure pending\n", status
    return left


@pytest.mark.slow  # subprocesses: not in make test-fast
@pytest.mark.parametrize("step", ERASE_STEPS)
@pytest.mark.parametrize("command", ["erase-message", "erase-account"])
def test_an_erasure_killed_at_any_step_is_finished_by_the_next_command(
        tmp_path: Path, command: str, step: str) -> None:
    data = tmp_path / "data"
    ids, key_ids, markers, kept = a_store(data)
    args = (["erase-message", "--with-copies", str(ids[1])] if command == "erase-message"
            else ["erase-account", ACCOUNT])
    if command == "erase-message":
        ids, key_ids = ids[1:], key_ids[1:]
        markers = [m for m in markers if m.startswith((b"subjl", b"froml", b"bodyl",
                                                       b"namel", b"blobl"))]
    killed(letterlog(data, *args, crash_at=step))
    left = state_of(data, tmp_path / "left", ids, key_ids, markers)
    assert left["intents"] == 1  # the crash left its intent, whatever the step
    if step == "erase:intent":
        assert left["purged"] == 0  # nothing appended yet: still to be done
    else:
        assert left["purged"] == len(ids)
    # what the docs say: `erase status` (any command that opens the store finishes it)
    repair = "erase complete" if command == "erase-account" else "erase status"
    p = letterlog(data, *repair.split())
    assert p.returncode == 0, p.stderr.decode()
    assert "Traceback" not in p.stderr.decode()
    after_repair(data, tmp_path, ids, key_ids, markers, kept)
    KILLED.append((command, step, describe(left, len(ids)), f"`letterlog {repair}`"))


@pytest.mark.slow  # subprocesses: not in make test-fast
@pytest.mark.parametrize("step", PURGE_STEPS)
def test_a_purge_run_killed_at_any_step_is_finished_by_the_next_run(
        tmp_path: Path, step: str) -> None:
    data = tmp_path / "data"
    ids, key_ids, markers, kept = a_store(data)
    with Letterlog.open(data) as store:
        for i in ids:
            store.delete(i)
    due = {"LETTERLOG_DELETED_RETENTION_DAYS": "0"}  # the payload grace: its default, 12 h
    killed(letterlog(data, "purge", "run", crash_at=step, **due))
    left = state_of(data, tmp_path / "left", ids, key_ids, markers)
    assert left["intents"] == 1
    p = letterlog(data, "purge", "run", **due)  # the next run, nothing named
    assert p.returncode == 0, p.stderr.decode()
    # the run alone, exit 0: its payloads deleted too (ADR 0071), nothing left
    after_repair(data, tmp_path, ids, key_ids, markers, kept)
    KILLED.append(("purge run", step, describe(left, len(ids)), "`letterlog purge run`"))


@pytest.mark.slow
def test_an_intent_a_live_process_holds_is_left_to_it(tmp_path: Path) -> None:
    """Finishing is for abandoned intents only: one whose writer still runs (its lock held)
    is listed by ``erase status`` as running, and not taken over."""
    from adapters.lifecycle.intents import Intents

    data = tmp_path / "data"
    a_store(data)
    intents = Intents(data)
    mine = intents.begin("purge", 0)
    try:
        assert intents.any() and Intents(data).abandoned() == []  # held: not abandoned
        p = letterlog(data, "--json", "erase", "status")
        assert p.returncode == 3, p.stderr.decode()
        assert b'"running": true' in p.stdout
    finally:
        mine.release()
    [taken] = Intents(data).abandoned()  # the writer gone (its lock let go): taken over
    taken.finish()
    assert not intents.any()


@pytest.fixture(autouse=True, scope="module")
def _killed_step_table() -> Any:
    """Prints the killed-step table once the module's tests have run (``pytest -s``)."""
    yield
    for row in KILLED:
        print(" | ".join(row))
