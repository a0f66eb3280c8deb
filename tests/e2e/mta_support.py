"""What the MTA tests share: running letterlog as an MTA would (a fresh process, no command
server of the user's, no LETTERLOG_* of the caller's), a small filesystem to fill or make
read-only, a lock held on one of the store's files, and reading the store back."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.factories import IN_CI


def environment(runtime: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("LETTERLOG_")}
    return {**env, "XDG_RUNTIME_DIR": str(runtime), **extra}


def letterlog(env: dict[str, str], data: Path, *args: str, stdin: bytes = b"",
              timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), *args],
                          input=stdin, capture_output=True, env=env, timeout=timeout,
                          check=False)


def listing(env: dict[str, str], data: Path, account: str) -> list[dict[str, Any]]:
    p = letterlog(env, data, "--json", "list", account, "--limit", "1000")
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def stored(env: dict[str, str], data: Path, account: str) -> list[bytes]:
    """Every message of ``account``'s INBOX, oldest first, as extracted."""
    found = []
    for row in reversed(listing(env, data, account)):
        p = letterlog(env, data, "extract", row["message_id"])
        assert p.returncode == 0, p.stderr
        found.append(p.stdout)
    return found


def shown(env: dict[str, str], data: Path, message_id: str) -> dict[str, Any]:
    p = letterlog(env, data, "--json", "show", message_id)
    assert p.returncode == 0, p.stderr
    return dict(json.loads(p.stdout))


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@contextmanager
def tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (root only), unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                        str(where)], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        unavailable(f"cannot mount a tmpfs (needs root): {p.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True,
                   capture_output=True)


def fill(where: Path) -> Path:
    """Fills the filesystem of ``where`` to the last byte; returns the filler file."""
    filler = where / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another writer holding ``path``'s write lock (SQLite ``BEGIN IMMEDIATE``)."""
    con = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        con.execute("BEGIN IMMEDIATE")
        yield
    finally:
        con.execute("ROLLBACK")
        con.close()
