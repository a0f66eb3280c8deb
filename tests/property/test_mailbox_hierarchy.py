"""Stateful property test of the mailbox hierarchy ('/' as the delimiter, RFC 3501): random
create, rename, delete and deliver commands on a tree of names against a model.

Every command does what the model says or raises the error it predicts and writes nothing;
after every step the account's names, each mailbox's id, UIDVALIDITY and ``\\Noselect``
match the model; at the end the log projected live (event by event) and folded gives the
same tables, and ``counters`` holds a cell only for a mailbox that is selectable, with its
messages counted.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from adapters.eventlog.store import MailLog
from adapters.payloads.memory import InMemoryPayloadStore
from adapters.tables.memory import InMemoryTableStore
from domain.errors import (
    InvalidCommand,
    InvalidState,
    MailboxExists,
    MailboxHasInferiors,
    MailboxNotFound,
)
from domain.service import Mailstore
from projections import names as n
from projections.codec import decode_counters
from projections.keys import account_row
from projections.registry import TABLE_SPECS
from projections.runner import ProjectionRunner
from projections.tablestore import table_digest
from tests.factories import Clock, make_mail

ADA = "ada@example.org"
NAMES = st.sampled_from(["a", "b", "c", "a/b", "a/c", "b/a", "a/b/c", "c/a/b", "INBOX"])


class HierarchyMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mail = Mailstore(MailLog(env={"PERSISTENCE_MODULE": "eventsourcing.popo"}),
                              InMemoryPayloadStore(), clock=Clock())
        first = self.mail.deliver(account=ADA, raw=make_mail("first")).message_id
        inbox_id, _, uidvalidity = self.mail.account(ADA).mailbox("INBOX")
        # name -> {"id", "uidvalidity", "noselect"}; mailbox id -> its message ids
        self.names: dict[str, dict[str, Any]] = {
            "INBOX": {"id": inbox_id, "uidvalidity": uidvalidity, "noselect": False}}
        self.messages: dict[Any, set[Any]] = {inbox_id: {first}}
        self.n = 0

    def _head(self) -> int:
        return self.mail.uow.head()

    def _refused(self, error: type[Exception], command: Any) -> None:
        head = self._head()
        try:
            command()
        except error:
            pass
        else:
            raise AssertionError(f"expected {error.__name__}")
        assert self._head() == head  # nothing written

    def _inferiors(self, name: str) -> list[str]:
        return [x for x in self.names if x.startswith(name + "/")]

    @rule(name=NAMES)
    def create(self, name: str) -> None:
        if name in self.names:
            self._refused(MailboxExists, lambda: self.mail.create_mailbox(ADA, name))
            return
        c = self.mail.create_mailbox(ADA, name)
        assert all(c.extra["uidvalidity"] > e["uidvalidity"] for e in self.names.values())
        mailbox_id = self.mail.account(ADA).mailbox(name)[0]
        self.names[name] = {"id": mailbox_id, "uidvalidity": c.extra["uidvalidity"],
                            "noselect": False}
        self.messages[mailbox_id] = set()

    @rule(old=NAMES, new=NAMES)
    def rename(self, old: str, new: str) -> None:
        def command() -> Any:
            return self.mail.rename_mailbox(ADA, old, new)

        if old not in self.names:
            return self._refused(MailboxNotFound, command)
        if old == new or old == "INBOX" or new.startswith(old + "/"):
            return self._refused(InvalidCommand, command)
        tree = [old, *sorted(self._inferiors(old))]
        targets = [new + x[len(old):] for x in tree]
        if any(t in self.names for t in targets):
            return self._refused(MailboxExists, command)
        c = command()
        assert [(r["from"], r["to"]) for r in c.extra["renamed"]] == list(zip(tree, targets,
                                                                             strict=True))
        moved = {t: self.names.pop(x) for x, t in zip(tree, targets, strict=True)}
        self.names.update(moved)
        return None

    @rule(name=NAMES)
    def delete(self, name: str) -> None:
        def command() -> Any:
            return self.mail.delete_mailbox(ADA, name)

        if name not in self.names:
            return self._refused(MailboxNotFound, command)
        if name == "INBOX":
            return self._refused(InvalidCommand, command)
        entry, inferiors = self.names[name], self._inferiors(name)
        if entry["noselect"] and inferiors:
            return self._refused(MailboxHasInferiors, command)
        c = command()
        assert c.extra["expunged"] == len(self.messages[entry["id"]])
        self.messages[entry["id"]] = set()
        if inferiors:
            entry["noselect"] = True
        else:
            del self.names[name]
        return None

    @rule(name=NAMES)
    def deliver(self, name: str) -> None:
        self.n += 1

        def command() -> Any:
            return self.mail.deliver(account=ADA, mailbox=name, raw=make_mail(f"m{self.n}"))

        if name not in self.names:
            return self._refused(MailboxNotFound, command)
        entry = self.names[name]
        if entry["noselect"]:
            return self._refused(InvalidState, command)
        d = command()
        assert d.uidvalidity == entry["uidvalidity"]  # kept through renames
        self.messages[entry["id"]].add(d.message_id)
        return None

    @invariant()
    def the_account_matches_the_model(self) -> None:
        account = self.mail.account(ADA)
        assert set(account.mailboxes) == set(self.names)
        for name, entry in self.names.items():
            mailbox_id, _, uidvalidity = account.mailbox(name)
            assert (mailbox_id, uidvalidity) == (entry["id"], entry["uidvalidity"])
            assert self.mail.mailbox(mailbox_id).deleted == entry["noselect"]

    def teardown(self) -> None:
        app = self.mail.app
        events = [(x.id, app.mapper.to_domain_event(x))
                  for x in app.recorder.select_notifications(start=1, limit=100_000)]
        live, folded = InMemoryTableStore(), InMemoryTableStore()
        for store, fold in ((live, False), (folded, True)):
            runner = ProjectionRunner(store, batch_size=1)
            runner.create_tables()
            runner.apply_events(events, fold=fold)
        for spec in TABLE_SPECS:
            assert table_digest(live, spec.name) == table_digest(folded, spec.name), spec.name
        row = live.get(n.COUNTERS, account_row(self.mail.account(ADA).id), [n.CT_COUNTS])
        boxes, _ = decode_counters(row)
        selectable = {e["id"]: e for e in self.names.values() if not e["noselect"]}
        assert set(boxes) <= set(selectable)  # nothing of a deleted or \Noselect mailbox
        for mailbox_id, (messages, _, _) in boxes.items():
            assert messages == len(self.messages[mailbox_id])


TestHierarchy = HierarchyMachine.TestCase
TestHierarchy.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
