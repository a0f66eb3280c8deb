"""Stateful property test: random command sequences against a simple model of a mailbox.

After every step: UIDs strictly increase per mailbox and are never reused, UIDVALIDITY
is kept on rename, MODSEQ strictly increases per mailbox, flags match the model, and no
message is extracted more often than its policy allows.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from adapters.eventlog.store import MailLog
from adapters.payloads.memory import InMemoryPayloadStore
from domain.errors import ExtractionRefused
from domain.service import Mailstore
from tests.factories import Clock, make_mail

ADA = "ada@example.org"
FLAGS = st.lists(st.sampled_from(["\\Seen", "\\Flagged", "\\Answered", "$Forwarded", "work"]),
                 max_size=3)


class MailboxMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mail = Mailstore(MailLog(env={"PERSISTENCE_MODULE": "eventsourcing.popo"}),
                              InMemoryPayloadStore(), clock=Clock())
        self.mail.create_mailbox(ADA, "A", create_account=True)
        self.names = ["INBOX", "A"]
        self.uidnext: dict[object, int] = {}
        self.modseq: dict[object, int] = {}
        self.uidvalidities: set[int] = {1, 2}
        self.live: dict[object, dict] = {}  # message id -> model
        self.n = 0

    def _mailbox_id(self, name):
        return self.mail.account(ADA).mailbox(name)[0]

    def _saw(self, mailbox_id, modseq):
        if modseq is None:
            return
        assert modseq > self.modseq.get(mailbox_id, 0)
        self.modseq[mailbox_id] = modseq

    @rule(box=st.integers(0, 1), flags=FLAGS, limit=st.one_of(st.none(), st.integers(1, 3)))
    def deliver(self, box, flags, limit):
        self.n += 1
        name = self.names[box]
        d = self.mail.deliver(account=ADA, mailbox=name, raw=make_mail(f"m{self.n}"),
                              flags=flags, extract_limit=limit)
        assert d.uid == self.uidnext.get(d.mailbox_id, 1)
        self.uidnext[d.mailbox_id] = d.uid + 1
        self._saw(d.mailbox_id, d.modseq)
        self.live[d.message_id] = {"flags": set(flags), "limit": limit, "extracted": 0,
                                   "mailbox": d.mailbox_id}

    def _pick(self, data):
        return data.draw(st.sampled_from(sorted(self.live, key=str)))

    @precondition(lambda self: self.live)
    @rule(data=st.data(), flags=FLAGS, mode=st.sampled_from(["add", "remove", "replace"]))
    def flag(self, data, flags, mode):
        mid = self._pick(data)
        m = self.live[mid]
        c = self.mail.flag(mid, flags, mode)
        new = (m["flags"] | set(flags) if mode == "add" else
               m["flags"] - set(flags) if mode == "remove" else set(flags))
        assert c.changed == (new != m["flags"])
        m["flags"] = new
        self._saw(m["mailbox"], c.modseq)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), box=st.integers(0, 1))
    def move(self, data, box):
        mid = self._pick(data)
        m = self.live[mid]
        target = self._mailbox_id(self.names[box])
        c = self.mail.move(mid, self.names[box])
        assert c.changed  # within one mailbox too: a move always gives a new UID
        assert c.extra["uid"] == self.uidnext.get(target, 1)
        self.uidnext[target] = c.extra["uid"] + 1
        m["mailbox"] = target
        self._saw(target, c.modseq)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def expunge(self, data):
        mid = self._pick(data)
        m = self.live.pop(mid)
        self._saw(m["mailbox"], self.mail.expunge([mid]).modseq)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def extract(self, data):
        mid = self._pick(data)
        m = self.live[mid]
        try:
            self.mail.extract(mid)
            m["extracted"] += 1
        except ExtractionRefused:
            assert m["limit"] is not None and m["extracted"] >= m["limit"]
        assert m["limit"] is None or m["extracted"] <= m["limit"]

    @precondition(lambda self: self.live)
    @rule(data=st.data(), limit=st.integers(1, 3))
    def set_policy(self, data, limit):
        mid = self._pick(data)
        m = self.live[mid]
        expired = m["limit"] is not None and m["extracted"] >= m["limit"]
        c = self.mail.set_policy(mid, extract_limit=limit)
        # The same policy on a message that is not expired changes nothing.
        assert c.changed == (limit != m["limit"] or expired)
        if c.changed:
            m.update(limit=limit, extracted=0)

    @rule()
    def rename(self):
        old = self.names[1]
        new = "B" if old == "A" else "A"
        before = self.mail.account(ADA).mailbox(old)[2]
        c = self.mail.rename_mailbox(ADA, old, new)
        assert c.extra["uidvalidity"] == before  # kept on rename
        self.names[1] = new

    @invariant()
    def flags_match_the_model(self):
        for mid, m in self.live.items():
            msg = self.mail.message(mid)
            assert set(msg.flags) == m["flags"]
            assert msg.mailbox_id == m["mailbox"]

    @invariant()
    def uidnext_matches(self):
        for mailbox_id, nxt in self.uidnext.items():
            assert self.mail.mailbox(mailbox_id).uidnext == nxt


TestMailboxModel = MailboxMachine.TestCase
TestMailboxModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
