"""The administrator's event rules and their events: ``RulesAdmin`` (docs/event-rules.md)."""


from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

if TYPE_CHECKING:
    from domain.results import Change
    from domain.rules import Evaluation, RuleBook, RuleEvent


class RulesAdmin(Protocol):
    """Event rules and their events (docs/event-rules.md)."""

    def create_rule(self, name: str, *, secret: str | None = None,
                    **terms: Any) -> Change: ...

    def change_rule(self, name: str, **terms: Any) -> Change: ...

    def rotate_rule_secret(self, name: str, secret: str | None = None) -> Change:
        """A new HMAC secret (None: random, shown once in ``extra["secret"]``)."""

    def enable_rule(self, name: str) -> Change: ...

    def disable_rule(self, name: str) -> Change: ...

    def delete_rule(self, name: str) -> Change: ...

    def rules(self) -> list[dict[str, Any]]: ...

    def rule(self, name: str) -> dict[str, Any]: ...

    def rule_book(self) -> RuleBook | None: ...

    def rule_evaluation(self) -> Evaluation:
        """A fresh evaluation as a delivery makes one (the bounded matcher, its limits)."""

    def rule_events(self, *, message: UUID | None = None, rule: str | None = None,
                    status: str | None = None,
                    since: datetime | None = None) -> list[dict[str, Any]]: ...

    def rule_event(self, event_id: UUID) -> dict[str, Any]: ...

    def rule_event_record(self, event_id: UUID) -> RuleEvent:
        """The log's word on a rule event (not the read model's)."""

    def rule_event_counts(self) -> dict[str, int]: ...

    def rule_event_processing(self, event_id: UUID, where: str) -> Change: ...

    def rule_event_completed(self, event_id: UUID, attempts: int, where: str) -> Change: ...

    def rule_event_failed(self, event_id: UUID, attempts: int, reason: str,
                          where: str) -> Change: ...

    def discard_rule_events(self, event_ids: Sequence[UUID], reason: str, *,
                            queue: str = "", since: Sequence[datetime | None] = (),
                            check: Callable[[RuleEvent], bool] = ...) -> Change: ...

    def resend(self, event_ids: Sequence[UUID] = (), *,
               status: str | None = None) -> list[str]: ...

    def dispatch_pending(self, applications: Mapping[str, Any] | None = None
                         ) -> dict[str, int]: ...

    def purge_rule_events(self, now: datetime | None = None, *,
                          dry_run: bool = False) -> dict[str, Any]: ...
