"""Purge and erasure commands: decide against the current state, then record.

A purge job hands ``Purging.act`` the entries of one bucket; each message is loaded and
checked (``domain.lifecycle.verdict``); the due ones are purged (or, in the expiring queue,
expired) in one atomic append. A concurrent purger that appended first makes the append
conflict: the batch is reloaded and decided again, and what is purged already is kept, so
each message is purged once. ``erase`` purges whatever the TTLs say (right to erasure).

After the append, ``on_purged`` runs with the purged messages (the adapters destroy their
data keys and release their payloads there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from domain.errors import MessageNotFound
from domain.lifecycle import Retention, verdict
from domain.message import Message
from domain.unit_of_work import UnitOfWork


@dataclass(frozen=True)
class QueueEntry:
    message_id: UUID
    since: datetime
    reason: str


@dataclass
class Outcome:
    purged: list[Message] = field(default_factory=list)
    expired: list[UUID] = field(default_factory=list)
    kept: list[UUID] = field(default_factory=list)

    @property
    def purged_bytes(self) -> int:
        return sum(m.size for m in self.purged)


class Purging:
    def __init__(self, uow: UnitOfWork, retention: Retention,
                 on_purged: Callable[[Sequence[Message]], None] | None = None) -> None:
        self.uow = uow
        self.retention = retention
        self.on_purged = on_purged

    def act(self, queue: str, entries: Sequence[QueueEntry], now: datetime, *,
            dry_run: bool = False) -> Outcome:
        """Double-checks every entry and purges (or expires) the due ones, in one append."""

        def attempt() -> Outcome:
            out = Outcome()
            changed: list[Message] = []
            for entry in entries:
                msg = self._message(entry.message_id)
                decision = "keep" if msg is None else verdict(msg, queue, now, self.retention)
                if msg is None or decision == "keep":
                    out.kept.append(entry.message_id)
                elif decision == "expire":
                    if dry_run or msg.expire(now):
                        changed.append(msg)
                    out.expired.append(msg.id)
                elif dry_run or msg.purge(entry.reason, queue, entry.since):
                    changed.append(msg)
                    out.purged.append(msg)
            if changed and not dry_run:
                self.uow.save(*changed)
            return out

        outcome = self.uow.run(attempt)
        if outcome.purged and not dry_run and self.on_purged is not None:
            self.on_purged(outcome.purged)
        return outcome

    def erase(self, message_ids: Sequence[UUID], reason: str = "erased") -> Outcome:
        """Purges these messages now, whatever their state and the TTLs."""

        already: list[Message] = []

        def attempt() -> Outcome:
            out = Outcome()
            already.clear()
            for msg in [self.uow.message(i) for i in message_ids]:
                if msg.purge(reason):
                    out.purged.append(msg)
                else:
                    already.append(msg)
                    out.kept.append(msg.id)
            if out.purged:
                self.uow.save(*out.purged)
            return out

        outcome = self.uow.run(attempt)
        if self.on_purged is not None:  # keys of the already purged too: idempotent
            self.on_purged([*outcome.purged, *already])
        return outcome

    def _message(self, message_id: UUID) -> Message | None:
        try:
            return self.uow.message(message_id)
        except MessageNotFound:
            return None
