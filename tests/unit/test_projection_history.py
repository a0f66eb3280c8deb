"""``tests.history.History``, the builder of event logs the projection tests use, emits
events as the command side would."""

from __future__ import annotations

from domain.account import Account
from domain.mailbox import Mailbox
from tests.history import History


def test_positions_are_consecutive_and_versions_count_per_aggregate() -> None:
    h = History()
    m = h.deliver("ada@example.org", flags=["\\Seen"], labels=["work"])
    h.flag(m, ["\\Flagged"])
    h.flag(m, ["\\Flagged"])  # no change, no event
    assert [p for p, _ in h.events] == list(range(1, len(h.events) + 1))
    versions = [e.originator_version for _, e in h.events if e.originator_id == m]
    assert versions == [1, 2]


def test_an_account_opens_with_its_inbox() -> None:
    h = History()
    h.account("ada@example.org")
    kinds = [type(e) for _, e in h.events]
    assert kinds == [Account.Opened, Account.MailboxRegistered, Mailbox.Created]
