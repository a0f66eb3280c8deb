"""What the crash tests of erasure share (ADR 0063): the step boundaries, the CLI run with the
test fault point ``LETTERLOG_TEST_CRASH_AT`` (``adapters/operations/faults.py``), the store they
erase,
and the cases themselves -- kill -9 at a step, what docs/lifecycle.md says to run, then what
an attacker finds. Each deployment says how it is examined (``Examine``): the embedded store
in tests/integration/test_erasure_crash.py, the log in PostgreSQL in
tests/services/test_erasure_crash_scaleout.py."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

from adapters.embedded import Letterlog
from tests.erasure_support import (
    ACCOUNT,
    any_opens,
    around,
    deliver_marked,
    killed,
    marked_mail,
    opened_by_a_fresh_reader,
)
from tests.factories import BIN

BYSTANDER = "bystander@example.org"
ERASE_STEPS = ["erase:intent", "erase:appended", "keys:rotated", "erase:keys",
               "erase:payloads", "erase:completed"]
PURGE_STEPS = ["purge:intent", "purge:appended", "keys:rotated", "purge:keys",
               "purge:completed"]

#: (scratch directory, the erased ids, their data keys, their markers) -> what is left:
#: intents, purged (in the log), keys_open, stale_keks, files_with_markers
Examine = Callable[[Path, list[UUID], list[UUID], list[bytes]], dict[str, Any]]
#: the killed-step table: (command, killed at, what was left, what repaired it)
Table = list[tuple[str, str, str, str]]
NOTHING_LEFT = {"intents": 0, "keys_open": 0, "stale_keks": 0, "files_with_markers": []}
#: after the documented repair, what else a deployment checks: (the erased ids, markers)
Then = Callable[[list[UUID], list[bytes]], None]


def letterlog(data: Path, *args: str, crash_at: str | None = None, timeout: float = 120,
              **env: str) -> subprocess.CompletedProcess[bytes]:
    environ = {**os.environ, "LETTERLOG_DURABILITY": "normal",
               "LETTERLOG_ERASE_WAIT_SECONDS": "5", **env}
    environ.pop("LETTERLOG_TEST_CRASH_AT", None)
    if crash_at is not None:
        environ["LETTERLOG_TEST_CRASH_AT"] = crash_at
    return subprocess.run([*BIN, "--data", str(data), *args], capture_output=True,
                          env=environ, timeout=timeout)


def key_opens(key_id: UUID, key_files: list[bytes], vault_files: list[bytes],
              keks: set[bytes], wrapped: set[bytes] | None = None) -> bool:
    """Whether an attacker opens the data key ``key_id``: every wrapped copy of it (``wrapped``
    and every 60-byte window near the key id in ``key_files``: live rows, free pages, WAL)
    tried with every KEK (``keks``, and every 32-byte window within 64 bytes of any 16 bytes
    found both near a copy of the key id and in ``vault_files``: a deleted KEK's row)."""
    wrapped = set(wrapped or ())
    near: set[bytes] = set()
    for blob in key_files:
        wrapped |= around(blob, key_id.bytes, 96, 96, 60)
        near |= around(blob, key_id.bytes, 96, 96, 16)
    candidates = set(keks)
    # a KEK id is a version-4 UUID (``sealing.new_keys``): other 16-byte windows are no id
    near = {c for c in near if c[6] >> 4 == 4 and c[8] & 0xC0 == 0x80}
    for kek_id in near:
        for blob in vault_files:
            if kek_id in blob:
                candidates |= around(blob, kek_id, 64, 64, 32)
    return any_opens(candidates, key_id, wrapped)


def describe(left: dict[str, Any], n: int) -> str:
    files = left["files_with_markers"]
    return (f"{left['purged']}/{n} purged in the log, {left['keys_open']}/{n} data keys "
            f"recoverable, {left['stale_keks']} rotated-away KEK(s) in the key store, "
            f"intent files {left['intents']}, marker in "
            f"{', '.join(files) if files else 'no file'}")


Delivered = tuple[list[UUID], list[UUID], list[bytes], list[bytes]]


def a_store(data: Path) -> Delivered:
    """Two marked messages of ACCOUNT (one inline, one with a payload and an attachment)
    and one marked message of BYSTANDER; the ids, their data keys, the markers of ACCOUNT's
    and of the bystander's."""
    with Letterlog.open(data) as store:
        return deliver_case(store, ACCOUNT)


def deliver_case(store: Letterlog, account: str) -> Delivered:
    """``a_store``'s messages, for ``account``, into an open store."""
    ids, markers = deliver_marked(store, account)
    raw, kept = marked_mail("k", attachment=True)
    store.deliver(account=BYSTANDER, raw=raw)
    key_ids = [store.log.repository.get(i).personal.key_id for i in ids]
    assert all(k is not None for k in key_ids)
    return ids, key_ids, markers, kept


def erase_target(command: str, account: str, ids: list[UUID], key_ids: list[UUID],
                 markers: list[bytes]) -> tuple[list[str], list[UUID], list[UUID],
                                                list[bytes]]:
    """The command line erasing ``a_store``'s messages (erase-message: the large one, with
    its copies; erase-account: both), and the ids, data keys and markers it erases."""
    if command == "erase-account":
        return ["erase-account", account], ids, key_ids, markers
    return (["erase-message", "--with-copies", str(ids[1])], ids[1:], key_ids[1:],
            [m for m in markers if m.startswith((b"subjl", b"froml", b"bodyl", b"namel",
                                                 b"blobl"))])


def left_by_a_killed_erasure(step: str, left: dict[str, Any], n: int) -> None:
    """What a crash at ``step`` of an erasure of ``n`` messages must have left (``left``,
    from ``Examine``): its intent, whatever the step; the messages purged in the log once
    the append is done; every key opening before the keys' step (the attack works)."""
    assert left["intents"] == 1, left
    assert left["purged"] == (0 if step == "erase:intent" else n), left
    if step in ("erase:intent", "erase:appended"):
        assert left["keys_open"] == n, left


def left_by_a_killed_purge_run(step: str, left: dict[str, Any], n: int) -> None:
    """``left_by_a_killed_erasure`` for a purge run of ``n`` deleted messages (how many
    its first batch purged varies: not asserted)."""
    assert left["intents"] == 1, left
    if step in ("purge:intent", "purge:appended"):
        assert left["keys_open"] == n, left


def after_repair(data: Path, examine: Examine, scratch: Path, ids: list[UUID],
                 key_ids: list[UUID], markers: list[bytes], kept: list[bytes]) -> None:
    """What the attacker finds once the documented command has run: nothing."""
    left = examine(scratch, ids, key_ids, markers)
    assert left == {**NOTHING_LEFT, "purged": len(ids)}, left
    assert opened_by_a_fresh_reader(data, markers) == []  # the live path, every key it has
    assert kept[0] in opened_by_a_fresh_reader(data, kept)  # the bystander's subject opens
    status = letterlog(data, "erase", "status")
    assert status.returncode == 0 and status.stdout == b"no erasure pending\n", status


def erase_case(data: Path, examine: Examine, tmp_path: Path, command: str, step: str,
               table: Table, *, repair: list[str] | None = None,
               settle: Callable[[], None] | None = None, then: Then | None = None,
               timeout: float = 120) -> None:
    """``command`` (erase-message or erase-account) killed at ``step``, then the commands
    the docs name (``repair``: one command line each; embedded: ``erase complete`` or any
    command, ``erase status`` here); nothing left. ``settle``: what a deployment waits for
    once the messages are delivered (the workers); ``then``: its own checks after;
    ``timeout``: the bound of each repair command (HBase's compaction takes minutes)."""
    ids, key_ids, markers, kept = a_store(data)
    if settle is not None:
        settle()
    args, ids, key_ids, markers = erase_target(command, ACCOUNT, ids, key_ids, markers)
    killed(letterlog(data, *args, crash_at=step))
    left = examine(tmp_path / "left", ids, key_ids, markers)
    left_by_a_killed_erasure(step, left, len(ids))
    # what the docs say: any command that opens the store finishes it
    repair = repair or ["erase complete" if command == "erase-account" else "erase status"]
    for line in repair:
        p = letterlog(data, *line.split(), timeout=timeout)
        assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr.decode()
    after_repair(data, examine, tmp_path / "after", ids, key_ids, markers, kept)
    if then is not None:
        then(ids, markers)
    table.append((command, step, describe(left, len(ids)),
                  ", then ".join(f"`letterlog {line}`" for line in repair)))


def purge_case(data: Path, examine: Examine, tmp_path: Path, step: str,
               table: Table, *, repair: list[str] | None = None,
               settle: Callable[[], None] | None = None, then: Then | None = None,
               timeout: float = 120, **env: str) -> None:
    """A purge run of two deleted messages killed at ``step``; the next run, nothing named,
    leaves nothing (its payloads deleted too: ADR 0071). ``repair``, ``settle``, ``then``
    as for ``erase_case``; ``env``: the settings of every command run here."""
    ids, key_ids, markers, kept = a_store(data)
    with Letterlog.open(data) as store:
        for i in ids:
            store.delete(i)
    if settle is not None:
        settle()
    due = {"LETTERLOG_DELETED_RETENTION_DAYS": "0", **env}  # payload grace: default, 12 h
    killed(letterlog(data, "purge", "run", crash_at=step, **due))
    left = examine(tmp_path / "left", ids, key_ids, markers)
    left_by_a_killed_purge_run(step, left, len(ids))
    repair = repair or ["purge run"]  # the next run, nothing named
    for line in repair:
        p = letterlog(data, *line.split(), timeout=timeout, **due)
        assert p.returncode == 0, p.stderr.decode()
    after_repair(data, examine, tmp_path / "after", ids, key_ids, markers, kept)
    if then is not None:
        then(ids, markers)
    table.append(("purge run", step, describe(left, len(ids)),
                  ", then ".join(f"`letterlog {line}`" for line in repair)))


def print_table(table: Table) -> None:
    """The killed-step table (``pytest -s`` shows it)."""
    for row in table:
        print(" | ".join(row))
