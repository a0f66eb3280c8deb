"""An external vault (``LETTERLOG_KEY_VAULT``) is checked like the data directory (ADR
0064): its file, ``-wal``, ``-shm`` and directory open to other users are refused, as are a
part owned by another user and a ``-wal`` made before the vault; nothing is written then.
A private vault outside the data directory works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.embedded import Letterlog
from domain.errors import StoreNotPrivate
from tests.factories import make_mail

ADA = "ada@example.org"


def cli(data: Path, vault: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "LETTERLOG_KEY_VAULT": str(vault), "LETTERLOG_DURABILITY": "normal"}
    return subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), *args],
                          capture_output=True, env=env, timeout=120)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    data, keydir = tmp_path / "data", tmp_path / "keys"
    keydir.mkdir(mode=0o700)
    vault = keydir / "vault.sqlite"
    with Letterlog.open(data, key_vault=vault, durability="normal") as s:
        s.deliver(account=ADA, raw=make_mail())
    return data, vault


def snapshot(*dirs: Path) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_size, p.stat().st_mode) for d in dirs for p in d.rglob("*")}


@pytest.mark.parametrize("open_up", ["vault", "directory", "wal"])
def test_an_external_vault_open_to_others_is_refused(store: tuple[Path, Path],
                                                     open_up: str) -> None:
    data, vault = store
    target = {"vault": vault, "directory": vault.parent,
              "wal": Path(f"{vault}-wal")}[open_up]
    if open_up == "wal":
        target.write_bytes(b"")
    target.chmod(0o777 if target.is_dir() else 0o644)
    before = snapshot(data, vault.parent)
    with pytest.raises(StoreNotPrivate, match=str(target)):
        Letterlog.open(data, key_vault=vault)
    p = cli(data, vault, "list", ADA)
    err = p.stderr.decode()
    assert p.returncode == 2 and str(target) in err and "Traceback" not in err, err
    after = snapshot(data, vault.parent)
    assert {p: after[p] for p in before} == before  # nothing written, nothing chmodded
    new = {p.name: oct(m & 0o777) for p, (_, m) in after.items() if p not in before}
    assert set(new) <= {"events.sqlite-wal", "events.sqlite-shm"}, new  # the check's reader
    assert set(new.values()) <= {"0o600"}, new


def test_a_wal_made_before_the_vault_or_by_another_user_is_refused(
        tmp_path: Path, store: tuple[Path, Path]) -> None:
    data, vault = store
    fresh = tmp_path / "keys2" / "vault.sqlite"  # a vault not made yet, its -wal planted
    fresh.parent.mkdir(mode=0o700)
    planted = Path(f"{fresh}-wal")
    planted.write_bytes(b"")
    planted.chmod(0o600)
    with pytest.raises(StoreNotPrivate, match="without the key vault"):
        Letterlog.open(tmp_path / "new", key_vault=fresh)
    assert not fresh.exists()
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    wal = Path(f"{vault}-wal")
    wal.write_bytes(b"")
    wal.chmod(0o600)
    os.chown(wal, 65534, 65534)  # nobody's
    p = cli(data, vault, "list", ADA)
    assert p.returncode == 2 and "belongs to another user" in p.stderr.decode(), p.stderr


def test_a_private_external_vault_is_used(store: tuple[Path, Path]) -> None:
    data, vault = store
    p = cli(data, vault, "--json", "list", ADA)
    assert p.returncode == 0, p.stderr.decode()
    assert not (data / "vault.sqlite").exists() and vault.is_file()
