"""Reads of the ``rules`` and ``rule_events`` tables (decoded rows; no client library)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

from projections import names as n
from projections.codec import decode_datetime, decode_int, decode_json, decode_uuid
from projections.tablestore import TableStore

Physical = Callable[[str], str]  # logical table -> the physical table readers use now


def _same(name: str) -> str:
    return name


def rule_row(row: bytes, cells: dict[bytes, bytes]) -> dict[str, Any]:
    spec = decode_json(cells[n.RU_SPEC])
    return {"name": cells[n.RU_NAME].decode(), "id": str(UUID(bytes=row)),
            "enabled": cells.get(n.RU_ENABLED) == b"1",
            "version": decode_int(cells.get(n.RU_VERSION)), **spec}


def rules(tables: TableStore, physical: Physical = _same) -> list[dict[str, Any]]:
    """Every rule, in name order."""
    found = [rule_row(row, cells) for row, cells in tables.scan(physical(n.RULES))
             if n.RU_SPEC in cells and n.RU_NAME in cells]
    return sorted(found, key=lambda r: r["name"])


def event_row(row: bytes, c: dict[bytes, bytes]) -> dict[str, Any]:
    return {
        "id": str(UUID(bytes=row)),
        "rule": c[n.RE_RULE].decode(),
        "rule_id": c[n.RE_RULE_ID].decode(),
        "rule_version": decode_int(c.get(n.RE_RULE_VERSION)),
        "message_id": str(decode_uuid(c[n.RE_MESSAGE])),
        "account_id": str(decode_uuid(c[n.RE_ACCOUNT])),
        "mailbox_id": str(decode_uuid(c[n.RE_MAILBOX_ID])),
        "mailbox": c[n.RE_MAILBOX].decode(),
        "uid": decode_int(c.get(n.RE_UID)),
        "trigger": c[n.RE_TRIGGER].decode(),
        "application": decode_json(c[n.RE_APPLICATION]),
        "properties": decode_json(c[n.RE_PROPERTIES]),
        "raised_at": decode_datetime(c[n.RE_RAISED_AT]).isoformat(),
        "status": c[n.RE_STATUS].decode(),
        "attempts": decode_int(c.get(n.RE_ATTEMPTS)),
        "reason": c.get(n.RE_REASON, b"").decode(),
        "where": c.get(n.RE_WHERE, b"").decode(),
        "updated_at": decode_datetime(c[n.RE_UPDATED_AT]).isoformat(),
    }


def rule_events(tables: TableStore, *, message: UUID | None = None, rule: str | None = None,
                status: str | None = None, since: datetime | None = None,
                physical: Physical = _same) -> Iterator[dict[str, Any]]:
    """Rule events (every row is read: the table holds what the purge by status left)."""
    for row, cells in tables.scan(physical(n.RULE_EVENTS)):
        if n.RE_RULE not in cells or n.RE_STATUS not in cells:
            continue
        if message is not None and cells.get(n.RE_MESSAGE) != message.bytes:
            continue
        if rule is not None and cells[n.RE_RULE].decode() != rule:
            continue
        if status is not None and cells[n.RE_STATUS].decode() != status:
            continue
        if since is not None and decode_datetime(cells[n.RE_RAISED_AT]) < since:
            continue
        yield event_row(row, cells)


def rule_event(tables: TableStore, event_id: UUID,
               physical: Physical = _same) -> dict[str, Any] | None:
    cells = tables.get(physical(n.RULE_EVENTS), event_id.bytes)
    return event_row(event_id.bytes, cells) if n.RE_RULE in cells else None


def status_counts(tables: TableStore, physical: Physical = _same) -> dict[str, int]:
    counts = {"pending": 0, "processing": 0, "complete": 0, "failed": 0}
    for _, cells in tables.scan(physical(n.RULE_EVENTS), columns=[n.RE_STATUS]):
        status = cells[n.RE_STATUS].decode()
        counts[status] = counts.get(status, 0) + 1
    return counts
