"""The event rules' part of the ``Letterlog`` facade: rules, rule events, resend, dispatch.

Commands go through the command side (``domain.rulecommands``) and are projected like every
other command; reads come from the ``rules`` and ``rule_events`` read models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from domain.errors import InvalidCommand, RuleEventNotFound, RuleNotFound
from domain.results import Change
from domain.rules import FAILED, STATUSES, Evaluation, RuleBook, RuleEvent, parse_filter
from projections import rule_queries as rq

if TYPE_CHECKING:
    from adapters.face import Store


def _filters(items: Iterable[str | Mapping[str, str]]) -> list[dict[str, str]]:
    return [parse_filter(f) if isinstance(f, str) else dict(f) for f in items]


def definition(*, mailboxes: Iterable[str] = (), mailbox_pattern: str | None = None,
               include: Iterable[str | Mapping[str, str]] = (),
               exclude: Iterable[str | Mapping[str, str]] = (),
               webhook: str | None = None, kafka_topic: str | None = None,
               properties: Mapping[str, str] | None = None,
               run_as: str | None = None) -> dict[str, Any]:
    """A rule's definition from the API's (and the CLI's) terms."""
    if (webhook is None) == (kafka_topic is None):
        raise InvalidCommand("application: give a webhook URL or a Kafka topic (one of them)")
    application = ({"kind": "webhook", "url": webhook} if webhook is not None
                   else {"kind": "kafka", "topic": str(kafka_topic)})
    return {"mailboxes": list(mailboxes), "mailbox_pattern": mailbox_pattern,
            "include": _filters(include), "exclude": _filters(exclude),
            "application": application, "properties": dict(properties or {}),
            "run_as": run_as}


class RulesAPI:
    """Mixed into ``Letterlog`` (which provides ``mail``, ``_command`` and ``_read``)."""

    mail: Any
    settings: Any

    def _command(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _read(self) -> Any:
        raise NotImplementedError

    def _query(self, fn: Any) -> Any:
        raise NotImplementedError

    # -- rules ----------------------------------------------------------------------------
    def create_rule(self, name: str, *, secret: str | None = None, **terms: Any) -> Change:
        """A new rule (enabled). ``terms``: mailboxes, mailbox_pattern, include, exclude
        (``[sender:|subject:|name:|header:NAME:]REGEX`` or dicts), webhook or kafka_topic,
        properties. ``secret``: its HMAC secret; None: a new random one, in
        ``extra["secret"]`` (the one place it is shown)."""
        result: Change = self._command(self.mail.create_rule, name, secret=secret,
                                       **definition(**terms))
        return result

    def rotate_rule_secret(self, name: str, secret: str | None = None) -> Change:
        """Replaces the rule's HMAC secret with ``secret`` (None: a new random one, in
        ``extra["secret"]``: the one place it is shown). Events handed over from now on
        are signed with it."""
        result: Change = self._command(self.mail.rotate_rule_secret, name, secret)
        return result

    def change_rule(self, name: str, **terms: Any) -> Change:
        """Replaces the rule's definition (events raised before keep theirs)."""
        result: Change = self._command(self.mail.change_rule, name, **definition(**terms))
        return result

    def enable_rule(self, name: str) -> Change:
        result: Change = self._command(self.mail.enable_rule, name, True)
        return result

    def disable_rule(self, name: str) -> Change:
        result: Change = self._command(self.mail.enable_rule, name, False)
        return result

    def delete_rule(self, name: str) -> Change:
        result: Change = self._command(self.mail.delete_rule, name)
        return result

    def rules(self) -> list[dict[str, Any]]:
        host = self._read()
        found: list[dict[str, Any]] = self._query(lambda: rq.rules(host.tables, host.physical))
        return found

    def rule(self, name: str) -> dict[str, Any]:
        for rule in self.rules():
            if rule["name"] == name:
                return rule
        raise RuleNotFound(f"rule {name!r} does not exist")

    # -- rule events ------------------------------------------------------------------------
    def rule_events(self, *, message: UUID | None = None, rule: str | None = None,
                    status: str | None = None, since: datetime | None = None
                    ) -> list[dict[str, Any]]:
        if status is not None and status not in STATUSES:
            raise InvalidCommand(f"status: {status!r}; one of {', '.join(STATUSES)}")
        found = self._query(lambda: list(rq.rule_events(
            self._read().tables, message=message, rule=rule, status=status, since=since,
            physical=self._read().physical)))
        return sorted(found, key=lambda e: (e["raised_at"], e["id"]))

    def rule_event(self, event_id: UUID) -> dict[str, Any]:
        found: dict[str, Any] | None = self._query(lambda: rq.rule_event(
            self._read().tables, event_id, self._read().physical))
        if found is None:
            raise RuleEventNotFound(f"rule event {event_id} does not exist")
        return found

    def rule_event_counts(self) -> dict[str, int]:
        counts: dict[str, int] = self._query(lambda: rq.status_counts(self._read().tables,
                                                                     self._read().physical))
        return counts

    def resend(self, event_ids: Sequence[UUID] = (), *, status: str | None = None
               ) -> list[str]:
        """Sets the events (or every event of ``status``, e.g. failed) pending again: the
        dispatcher hands them over once more. Returns the ids that changed."""
        if status is not None and status not in (FAILED, "complete", "processing"):
            raise InvalidCommand(f"status: {status!r}; resend takes failed, complete or "
                                 "processing")
        ids = list(event_ids)
        for event_id in ids:
            self.rule_event(event_id)  # RuleEventNotFound before anything is written
        if status is not None:
            ids += [UUID(e["id"]) for e in self.rule_events(status=status)]
        changed = []
        for event_id in ids:
            if self._command(self.mail.resend_rule_event, event_id).changed:
                changed.append(str(event_id))
        return changed

    # -- the log's word on rules and their events (the dispatcher, the rule events' purge) ----
    def rule_book(self) -> RuleBook | None:
        """The rules as the log has them (their secrets included)."""
        book: RuleBook | None = self.mail.rule_book()
        return book

    def rule_evaluation(self) -> Evaluation:
        """A fresh evaluation as a delivery makes one: the bounded matcher, its time for one
        search and for the whole arrival (``domain.rules.Evaluation``)."""
        mail = self.mail
        return Evaluation(mail.rule_matcher, mail.rule_search_seconds,
                          mail.rule_budget_seconds)

    def rule_event_record(self, event_id: UUID) -> RuleEvent:
        """A rule event as the log has it (``RuleEventNotFound``), not the read model."""
        found: RuleEvent = self.mail.rule_event(event_id)
        return found

    def rule_event_processing(self, event_id: UUID, where: str) -> Change:
        result: Change = self._command(self.mail.rule_event_processing, event_id, where)
        return result

    def rule_event_completed(self, event_id: UUID, attempts: int, where: str) -> Change:
        result: Change = self._command(self.mail.rule_event_completed, event_id, attempts,
                                       where)
        return result

    def rule_event_failed(self, event_id: UUID, attempts: int, reason: str,
                          where: str) -> Change:
        result: Change = self._command(self.mail.rule_event_failed, event_id, attempts,
                                       reason, where)
        return result

    def discard_rule_events(self, event_ids: Sequence[UUID], reason: str, *,
                            queue: str = "", since: Sequence[datetime | None] = (),
                            check: Callable[[RuleEvent], bool] = lambda e: True) -> Change:
        """Discards the events ``check`` accepts (``domain.rulecommands``)."""
        result: Change = self._command(self.mail.discard_rule_events, event_ids, reason,
                                       queue=queue, since=since, check=check)
        return result

    # -- dispatch ---------------------------------------------------------------------------
    def dispatch_pending(self, applications: Mapping[str, Any] | None = None
                         ) -> dict[str, int]:
        """Hands every pending rule event to its application, in this process (what
        ``letterlog dispatcher --once`` does); returns how many ended complete or failed."""
        from adapters.rules import dispatcher as d  # local: httpx, Kafka clients (127 modules)

        dispatcher = d.Dispatcher(cast("Store", self), applications)
        try:
            return dispatcher.run_once()
        finally:
            dispatcher.close()

    # -- purge by status ----------------------------------------------------------------------
    def purge_rule_events(self, now: datetime | None = None, *, dry_run: bool = False
                          ) -> dict[str, Any]:
        """Rule events whose status is older than its TTL (LETTERLOG_RULE_EVENT_*_TTL_DAYS),
        and those of purged messages, discarded (``adapters.lifecycle.rule_events``)."""
        from adapters.lifecycle import rule_events as r  # local: rule events' purge only

        settings = self.settings
        job = r.RuleEventPurge(cast("Store", self), ttls=r.ttls(settings),
                               peek_back=timedelta(minutes=settings.purge_peek_back_minutes),
                               clock=lambda: datetime.now(UTC))
        return job.run(now or datetime.now(UTC), dry_run=dry_run)
