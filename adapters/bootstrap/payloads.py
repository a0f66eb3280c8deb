"""The payload store ``Settings`` name: ``<data>/payloads``, or, with payloads in HBase
(``payload_store``, by default on the scale-out path), HBase's payload table, then this
host's payload files (ADR 0072)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from adapters.config.settings import Settings
from adapters.files import datadir
from adapters.payloads.files import FilePayloadStore
from domain.ports import PayloadStore

if TYPE_CHECKING:
    from adapters.payloads.layered import LayeredPayloadStore


def payload_store(settings: Settings) -> PayloadStore:
    """``<data>/payloads``; or, with payloads in HBase, the table ``<prefix>_payloads``
    through the table store's connection settings, connected on first use, with this host's
    payload files (if any are left from before) read where they are until ``letterlog
    payloads migrate``."""
    if not settings.payloads_in_hbase():
        return FilePayloadStore(Path(settings.data) / datadir.PAYLOADS)
    return layered_payloads(settings)


def layered_payloads(settings: Settings) -> LayeredPayloadStore:
    """HBase's payload table (connected on first use), then this host's payload files."""
    from adapters.bootstrap import hbase  # local: happybase, thriftpy2: HBase's clients only

    return hbase.layered_payloads(settings)
