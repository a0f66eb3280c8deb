"""MULTIAPPEND all or nothing (RFC 3502, ADR 0091) where a delivery fails after the checks
passed: the session takes back what it delivered, through the user's face."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import pytest

from adapters.imap.session import Session
from adapters.imap.wire import No
from domain.errors import QuotaExceeded


@dataclass
class Delivered:
    message_id: UUID
    uid: int


class Face:
    """A user's face whose ``fail_at``-th delivery is refused (a quota used up meanwhile)."""

    def __init__(self, fail_at: int, quota: dict[str, Any] | None = None) -> None:
        self.fail_at, self._quota = fail_at, quota
        self.delivered: list[UUID] = []
        self.flagged: list[UUID] = []
        self.expunged: list[UUID] = []

    def check_delivery(self, **fields: Any) -> None:
        pass

    def quota(self, account: str) -> dict[str, Any]:
        return self._quota or {"bytes": {"limit": 0, "used": 0},
                               "messages": {"limit": 0, "used": 0}}

    def deliver(self, **fields: Any) -> Delivered:
        if len(self.delivered) + 1 == self.fail_at:
            raise QuotaExceeded("ada@example.org", "messages", 2, 2, 1)
        d = Delivered(uuid4(), len(self.delivered) + 1)
        self.delivered.append(d.message_id)
        return d

    def flag(self, message_id: UUID, flags: list[str], mode: str) -> None:
        self.flagged.append(message_id)

    def expunge(self, ids: list[UUID]) -> None:
        self.expunged += ids


class Server:
    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)


def session(face: Face) -> Session:
    s = Session.__new__(Session)
    s.server, s.caller, s.user = Server(), face, "ada@example.org"  # type: ignore[assignment]
    return s


MESSAGES = [{"raw": b"Subject: %d\r\n\r\nx\r\n" % i, "flags": []} for i in range(3)]


def test_a_delivery_refused_part_way_takes_back_the_ones_before() -> None:
    face = Face(fail_at=3)
    with pytest.raises(No) as refused:
        asyncio.run(session(face)._append_all("ada@example.org", "INBOX", MESSAGES))
    assert refused.value.code == "OVERQUOTA"
    assert len(face.delivered) == 2
    assert face.flagged == face.delivered and face.expunged == face.delivered


def test_a_batch_over_the_quota_is_refused_before_the_first_delivery() -> None:
    face = Face(fail_at=0, quota={"bytes": {"limit": 0, "used": 0},
                                  "messages": {"limit": 4, "used": 2}})
    with pytest.raises(No) as refused:
        asyncio.run(session(face)._append_all("ada@example.org", "INBOX", MESSAGES))
    assert refused.value.code == "OVERQUOTA" and face.delivered == []
    face = Face(fail_at=0, quota={"bytes": {"limit": 0, "used": 0},
                                  "messages": {"limit": 5, "used": 2}})
    delivered = asyncio.run(session(face)._append_all("ada@example.org", "INBOX", MESSAGES))
    assert len(delivered) == 3 and face.expunged == []
