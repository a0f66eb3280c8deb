"""Rule commands (create, change, enable, disable, delete), the rule events an arrival raises,
and the steps a dispatcher records (processing, complete, failed) and a resend.

``arrival_rule_events`` is called by deliver, copy and move before their one append: the
rule events it returns are saved with the message's own event, so what a rule raised is
decided once, by the command, from the rule book as the command found it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from email.parser import BytesHeaderParser
from email.policy import compat32
from typing import Any
from uuid import UUID, uuid4

from domain.errors import MailboxNotFound, RuleEventNotFound, RuleNotFound
from domain.message import Message
from domain.results import Change
from domain.rights import Caller, rights_of
from domain.root_names import parse_root, root_id_for
from domain.roots import VirtualRoot
from domain.rules import (
    RULEBOOK_ID,
    Evaluation,
    MessageView,
    RuleBook,
    RuleEvent,
    decide,
    rule_spec,
)
from domain.unit_of_work import Commands, UnitOfWork
from domain.values import DELIMITER, account_id_for, normalise_address


def rule_book(uow: UnitOfWork) -> RuleBook | None:
    try:
        return uow.get(RuleBook, RULEBOOK_ID, RuleNotFound, "the rule book")
    except RuleNotFound:
        return None


def _needs_headers(book: RuleBook) -> bool:
    return any(f["field"] == "header"
               for rule in book.rules.values() if rule["enabled"]
               for side in ("include", "exclude") for f in rule["spec"][side])


def header_view(raw: bytes | None) -> dict[str, tuple[str, ...]]:
    """Every header of ``raw`` by lower-case name (only parsed when a rule filters on one)."""
    if not raw:
        return {}
    head = BytesHeaderParser(policy=compat32).parsebytes(raw, headersonly=True)
    out: dict[str, list[str]] = {}
    for name, value in head.items():
        out.setdefault(name.lower(), []).append(str(value))
    return {k: tuple(v) for k, v in out.items()}


def view_of(sender: str, subject: str, names: Iterable[str],
            headers: Mapping[str, tuple[str, ...]] | None = None) -> MessageView:
    envelope = {"from": (sender,), "subject": (subject,)}
    return MessageView(sender=sender, subject=subject, names=tuple(names),
                       headers=dict(headers) if headers is not None else envelope)


def view_of_message(msg: Message) -> MessageView:
    """A stored message's attributes (its sealed part, in memory): the envelope headers
    stand for the named headers (the raw header block is not kept in memory)."""
    personal = msg.personal or {}
    env = personal.get("envelope") or {}
    return view_of(str(env.get("from") or ""), str(env.get("subject") or ""),
                   personal.get("attachment_names") or ())


def arrival_rule_events(cmds: Commands, arrivals: Sequence[tuple[Message, str, str,
                        MessageView | bytes | None]]) -> list[RuleEvent]:
    """The rule events of messages arriving: (message as it stands after the arrival, the
    mailbox's name, the trigger, a view of the message or its raw bytes)."""
    book = rule_book(cmds.uow)
    if book is None or not book.rules:
        return []
    headers = _needs_headers(book)
    out: list[RuleEvent] = []
    for msg, mailbox, trigger, seen in arrivals:
        if isinstance(seen, MessageView):
            view = seen
        else:
            base = view_of_message(msg)
            view = view_of(base.sender, base.subject, base.names,
                           header_view(seen) if headers else None)
        evaluation = Evaluation(cmds.rule_matcher, cmds.rule_search_seconds,
                                cmds.rule_budget_seconds)
        for verdict in decide(book, mailbox, view, evaluation,
                              _reader_check(cmds.uow, msg, mailbox)):
            assert msg.mailbox_id is not None
            out.append(RuleEvent.raise_for(
                verdict, account_id=msg.account_id, message_id=msg.id,
                mailbox_id=msg.mailbox_id, mailbox=mailbox, uid=msg.uid, trigger=trigger))
    return out


def _outside_root(uow: UnitOfWork, user: str, account_id: UUID, mailbox: str) -> bool:
    """Whether ``mailbox`` of the account is outside ``user``'s virtual root (above or
    beside its path, in the root's account): the user cannot name it, so reads nothing of
    it, as ``adapters.caller`` refuses it."""
    try:
        found = uow.get(VirtualRoot, root_id_for(user), KeyError, "root")
    except KeyError:
        return False
    if not found.root:
        return False
    account, path = parse_root(found.root)
    if account_id_for(account) != account_id or not path:
        return False
    return not (mailbox == path or mailbox.startswith(path + DELIMITER))


def _reader_check(uow: UnitOfWork, msg: Message, mailbox: str) -> Callable[[str], bool]:
    """Whether a user may read (``r``) the mailbox ``msg`` arrives in (named ``mailbox``):
    at or below the user's virtual root, and by its ACL as it stands (the user's own name,
    ``anyone`` and ``authenticated``; groups come from the directory, which a delivery does
    not ask)."""
    def may_read(user: str) -> bool:
        if msg.mailbox_id is None:
            return False
        if _outside_root(uow, user, msg.account_id, mailbox):
            return False
        if account_id_for(normalise_address(user)) == msg.account_id:
            return True  # the account's owner
        try:
            acl = getattr(uow.mailbox(msg.mailbox_id), "acl", {})
        except MailboxNotFound:  # made by this very command: no ACL yet
            return False
        return "r" in rights_of(Caller(user), "", acl)

    return may_read


class RuleCommands(Commands):
    """create_rule, change_rule, enable_rule, delete_rule; the dispatcher's steps; resend."""

    def rule_book(self) -> RuleBook | None:
        return rule_book(self.uow)

    def create_rule(self, name: str, *, secret: str | None = None, **definition: Any) -> Change:
        spec = rule_spec(name, self._matcher(), **definition)
        uow = self.uow

        made = None if secret else secrets.token_hex(32)  # shown once, in the result

        def attempt() -> Change:
            book = rule_book(uow) or RuleBook.start()
            rule_id = uuid4()
            book.create(name, rule_id, spec, secret or str(made))
            return Change.of(uow.save(book), {"rule_id": str(rule_id),
                                              **({"secret": made} if made else {})})

        return uow.run(attempt)

    def rotate_rule_secret(self, name: str, secret: str | None = None) -> Change:
        """The rule's secret replaced by ``secret`` (None: a new random one); the new secret
        is in ``extra["secret"]``, the one place it is shown."""
        new = secret or secrets.token_hex(32)

        def rotate(book: RuleBook) -> bool:
            book.rotate_secret(name, new)
            return True

        change = self._on_book(rotate)
        return replace(change, extra={"rule": name, **({} if secret else {"secret": new})})

    def change_rule(self, name: str, **definition: Any) -> Change:
        spec = rule_spec(name, self._matcher(), **definition)
        return self._on_book(lambda book: book.change(name, spec))

    def enable_rule(self, name: str, enabled: bool = True) -> Change:
        return self._on_book(lambda book: book.enable(name, enabled))

    def delete_rule(self, name: str) -> Change:
        def delete(book: RuleBook) -> bool:
            book.delete(name)
            return True

        return self._on_book(delete)

    def _on_book(self, change: Any) -> Change:
        uow = self.uow

        def attempt() -> Change:
            book = rule_book(uow)
            if book is None:
                raise RuleNotFound("no rule exists")
            return Change.of(uow.save(book)) if change(book) else Change()

        return uow.run(attempt)

    def _matcher(self) -> Any:
        if self.rule_matcher is None:
            raise RuleNotFound("rules: no pattern matcher is configured")
        return self.rule_matcher

    # -- rule events ------------------------------------------------------------------------
    def rule_event(self, event_id: UUID) -> RuleEvent:
        return self.uow.get(RuleEvent, event_id, RuleEventNotFound, f"rule event {event_id}")

    def _on_event(self, event_id: UUID, step: Any) -> Change:
        uow = self.uow

        def attempt() -> Change:
            event = self.rule_event(event_id)
            return Change.of(uow.save(event)) if step(event) is not False else Change()

        return uow.run(attempt)

    def rule_event_processing(self, event_id: UUID, where: str) -> Change:
        return self._on_event(event_id, lambda e: e.processing(where))

    def rule_event_completed(self, event_id: UUID, attempts: int, where: str) -> Change:
        return self._on_event(event_id, lambda e: e.completed(attempts, where))

    def rule_event_failed(self, event_id: UUID, attempts: int, reason: str,
                          where: str) -> Change:
        return self._on_event(event_id, lambda e: e.failed(attempts, reason, where))

    def resend_rule_event(self, event_id: UUID) -> Change:
        return self._on_event(event_id, lambda e: e.resend())

    def discard_rule_events(self, event_ids: Sequence[UUID], reason: str, *,
                            queue: str = "", since: Sequence[datetime | None] = (),
                            check: Callable[[RuleEvent], bool] = lambda e: True) -> Change:
        """Discards the events that ``check`` (the purge's double check, on the event as
        the log has it) accepts; ``queue`` and ``since`` (one per id): the purge queue
        entries that led to it. ``extra["discarded"]``: the ids discarded."""
        uow = self.uow

        def attempt() -> Change:
            events = []
            whens = list(since) or [None] * len(event_ids)
            for event_id, when in zip(event_ids, whens, strict=True):
                try:
                    event = self.rule_event(event_id)
                except RuleEventNotFound:
                    continue
                if check(event) and event.discard(reason, queue, when):
                    events.append(event)
            if not events:
                return Change()
            return Change.of(uow.save(*events), {"discarded": [str(e.id) for e in events]})

        return uow.run(attempt)
