"""The erasure record: what a store erased (message ids and destroyed key ids, no personal
data), exported beside the backups (``letterlog erase export``) and made again on a restored
store (``reapplying``): ADR 0046, ADR 0069.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from adapters.backup.common import RECORD_FORMAT, BackupError, OpenStore, _write_json
from adapters.backup.logfacts import _purged_topic

if TYPE_CHECKING:
    from adapters.face import Store

__all__ = ["ErasureRecord", "erasure_record", "export_erasures", "read_erasure_record"]


@dataclass
class ErasureRecord:
    """What a store erased: the messages purged (``Message.Purged``) and the data keys
    destroyed. Ids only, no personal data: kept apart from backups, it lets a restore make
    those erasures again (``letterlog erase export``)."""

    messages: set[UUID] = field(default_factory=set)
    destroyed_keys: set[UUID] = field(default_factory=set)
    position: int = 0
    sources: list[str] = field(default_factory=list)

    def merge(self, other: ErasureRecord) -> None:
        self.messages |= other.messages
        self.destroyed_keys |= other.destroyed_keys
        self.position = max(self.position, other.position)
        self.sources += other.sources

    def as_dict(self) -> dict[str, Any]:
        return {"format": RECORD_FORMAT, "position": self.position,
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "messages": sorted(str(m) for m in self.messages),
                "destroyed_keys": sorted(str(k) for k in self.destroyed_keys)}


def erasure_record(store: Store) -> ErasureRecord:
    """The erasures recorded in an open store: its log's ``Purged`` events (read by topic,
    nothing decoded) and its key store's destroyed ids."""
    recorder, topic = store.log.recorder, _purged_topic()
    head = store.max_position()
    messages: set[UUID] = set()
    start = 1
    while start <= head:
        page = recorder.select_notifications(start, 5000, head, topics=[topic])
        if not page:
            break
        messages.update(cast("UUID", n.originator_id) for n in page)
        start = page[-1].id + 1
    return ErasureRecord(messages, set(store.log.keys.destroyed_ids()), head,
                         [str(store.settings.data)])


def read_erasure_record(source: str | os.PathLike[str],
                        open_store: OpenStore) -> ErasureRecord:
    """The record in a file ``letterlog erase export`` wrote, or that of the store in the
    data directory ``source`` (opened read-only as far as it goes: no read models)."""
    path = Path(source)
    if path.is_dir():
        with open_store(path, create=False, read_models=False) as store:
            return erasure_record(store)
    try:
        obj = json.loads(path.read_text())
        if obj.get("format") != RECORD_FORMAT:
            raise ValueError(f"not {RECORD_FORMAT}")
        return ErasureRecord({UUID(m) for m in obj["messages"]},
                             {UUID(k) for k in obj["destroyed_keys"]},
                             int(obj.get("position", 0)), [str(path)])
    except FileNotFoundError:
        raise BackupError(f"{path}: no such file or data directory") from None
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
        raise BackupError(f"{path}: not an erasure record written by `letterlog erase "
                          f"export` nor a data directory ({e})") from None


def export_erasures(store: Store, target: str | os.PathLike[str]) -> ErasureRecord:
    """The store's erasure record written to ``target`` (0600, replaced in one step)."""
    record = erasure_record(store)
    _write_json(Path(target).absolute(), record.as_dict())
    return record
