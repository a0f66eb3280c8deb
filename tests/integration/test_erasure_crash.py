"""Erasure as an intent that completes (ADR 0063): ``kill -9`` at every step boundary of
``erase-message``, ``erase-account`` and ``purge run`` (a real CLI subprocess, killed by the
test fault point ``LETTERLOG_TEST_CRASH_AT``, ``adapters/operations/faults.py``), then what
docs/lifecycle.md says to run; then an attacker with a copy of the data directory tries
every key the deployment holds, and every KEK-sized window next to a KEK id in the vault's
files, on every wrapped copy of the erased messages' data keys it can find: nothing opens,
no marker of the messages is in any file, and a message beside them still opens.

``KILLED`` records, per case, what the crash left and what repaired it (the killed-step
table: ``pytest -s`` prints it)."""

from __future__ import annotations

import shutil
import sqlite3
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from tests.erasure_crash_support import (
    ERASE_STEPS,
    PURGE_STEPS,
    Table,
    a_store,
    erase_case,
    key_opens,
    letterlog,
    print_table,
    purge_case,
)
from tests.erasure_support import files_holding_any_form

KILLED: Table = []  # (command, killed at, left, repaired by)


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
    return [key_id for key_id in key_ids if key_opens(key_id, key_files, vault_files, keks)]


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


@pytest.mark.slow  # subprocesses: not in make test-fast
@pytest.mark.parametrize("step", ERASE_STEPS)
@pytest.mark.parametrize("command", ["erase-message", "erase-account"])
def test_an_erasure_killed_at_any_step_is_finished_by_the_next_command(
        tmp_path: Path, command: str, step: str) -> None:
    data = tmp_path / "data"
    erase_case(data, partial(state_of, data), tmp_path, command, step, KILLED)


@pytest.mark.slow  # subprocesses: not in make test-fast
@pytest.mark.parametrize("step", PURGE_STEPS)
def test_a_purge_run_killed_at_any_step_is_finished_by_the_next_run(
        tmp_path: Path, step: str) -> None:
    data = tmp_path / "data"
    purge_case(data, partial(state_of, data), tmp_path, step, KILLED)


@pytest.mark.slow
def test_an_intent_a_live_process_holds_is_left_to_it(tmp_path: Path) -> None:
    """Finishing is for abandoned intents only: one whose writer still runs (its lock held)
    is listed by ``erase status`` as running, and not taken over."""
    from adapters.lifecycle.intentfiles import Intents

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
    print_table(KILLED)
