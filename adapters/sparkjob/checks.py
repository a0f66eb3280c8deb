"""What the CLI checks before it starts a Spark job: a store in the data directory
(``require_store``), a master that answers (``check_master``), ``--conf`` options that are
``KEY=VALUE`` (``parse_conf``); each failure is one line."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.files.datadir import check_data_dir
from adapters.sparkjob.outcome import SparkJobFailed
from domain.errors import SettingsError


def require_store(settings: Any, *, read_only: bool = False) -> None:
    """``StoreUnavailable`` (exit 2) unless ``settings.data`` holds a store: a rebuild or an
    export never makes one (a mistyped ``--data`` is not an empty store at position 0).
    ``read_only``: the export, which only reads, takes a data directory it cannot write."""
    check_data_dir(Path(settings.data), settings.event_store == "sqlite", False,
                   allow_shared=settings.allow_shared_keys, vault=settings.key_vault,
                   writable=not read_only)


def check_master(master: str, timeout: float = 5.0) -> None:
    """``SparkJobFailed`` unless one of a ``spark://`` master's addresses answers a TCP
    connection within ``timeout`` (Spark itself retries for about a minute, then logs only
    that the masters are unresponsive); other masters are not checked."""
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as e:
            errors.append(f"{address}: {getattr(e, 'strerror', None) or e}")
    raise SparkJobFailed(f"the Spark master {master} is unreachable ({'; '.join(errors)})")



def parse_conf(items: Sequence[str]) -> list[tuple[str, str]]:
    """``--conf K=V`` options as pairs; ``SettingsError`` naming a malformed one."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or key != key.strip():
            raise SettingsError(f"--conf: {item!r} is not KEY=VALUE (e.g. "
                                "spark.executor.memory=4g)")
        pairs.append((key, value))
    return pairs
