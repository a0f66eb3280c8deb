"""A message's extraction policy (Sterling Global Mailbox's extraction limits): extracted
without limit, a number of times, or until a date."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from domain.errors import InvalidCommand

PolicyKind = Literal["indefinite", "count", "until"]


@dataclass(frozen=True)
class ExtractionPolicy:
    """Sterling Global Mailbox extraction limits."""

    kind: PolicyKind = "indefinite"
    limit: int | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.kind == "count" and (self.limit is None or self.limit < 1):
            raise InvalidCommand("extract_limit: must be a whole number ≥ 1")
        if self.kind == "until" and (self.until is None or self.until.tzinfo is None):
            raise InvalidCommand("extract_until: must be a timezone-aware date-time")
        if self.kind not in ("indefinite", "count", "until"):
            raise InvalidCommand(f"policy: unknown kind {self.kind!r}")

    @classmethod
    def of(cls, limit: int | None = None, until: datetime | None = None) -> ExtractionPolicy:
        if limit is not None and until is not None:
            raise InvalidCommand("policy: give an extraction limit or an until date, not both")
        if limit is not None:
            return cls("count", limit=limit)
        if until is not None:
            return cls("until", until=until)
        return cls()

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "limit": self.limit, "until": self.until}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> ExtractionPolicy:
        until = d.get("until")
        limit = d.get("limit")
        return cls(
            str(d.get("kind", "indefinite")),  # type: ignore[arg-type]
            limit=int(limit) if isinstance(limit, int) else None,
            until=until if isinstance(until, datetime) else None,
        )
