"""check / deliver_checked: the batched path importers use (messages checked one by one,
delivered together)."""

from __future__ import annotations

import dataclasses

import pytest

from domain.commands import Deliver, build
from domain.errors import InvalidCommand, MessageRejected
from domain.service import Mailstore
from tests.factories import make_mail


def _cmd(subject: str, **kw: object) -> Deliver:
    return build(Deliver, account="ada@example.org", raw=make_mail(subject, message_id=None),
                 **kw)


def test_checked_deliveries_are_delivered_together(mail: Mailstore) -> None:
    checked = [mail.check(_cmd(f"m{n}")) for n in range(3)]
    delivered = mail.deliver_checked(checked)
    assert [d.uid for d in delivered] == [1, 2, 3]
    assert [d.sha256 for d in delivered] == [c.facts.sha256 for c in checked]
    assert mail.extract(delivered[1].message_id) is not None


def test_check_rejects_an_unfit_message_and_writes_nothing(mail: Mailstore) -> None:
    head = mail.app.recorder.max_notification_id()
    with pytest.raises(MessageRejected):
        mail.check(build(Deliver, account="ada@example.org", raw=b"\x00\x01 not mail"))
    assert mail.app.recorder.max_notification_id() == head


def test_facts_of_other_bytes_are_refused_and_nothing_is_written(mail: Mailstore) -> None:
    good = mail.check(_cmd("one"))
    other = mail.check(_cmd("another subject"))
    forged = dataclasses.replace(good, facts=other.facts)
    head = mail.app.recorder.max_notification_id()
    with pytest.raises(InvalidCommand, match="not a checked delivery"):
        mail.deliver_checked([good, forged])
    assert mail.app.recorder.max_notification_id() == head
    assert mail.deliver_checked([good])[0].uid == 1


def test_a_checked_delivery_from_another_process_is_recognised_without_hashing_again(
        mail: Mailstore, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import pickle

    import domain.delivery

    checked = pickle.loads(pickle.dumps([mail.check(_cmd(f"m{n}")) for n in range(2)]))
    sha256 = hashlib.sha256
    forged = dataclasses.replace(checked[0], command=checked[1].command)

    def no_hashing(_data: bytes) -> None:
        raise AssertionError("hashed again")

    monkeypatch.setattr(domain.delivery.hashlib, "sha256", no_hashing)
    assert all(c.matches() for c in checked)  # the pairing survives pickling
    with pytest.raises(AssertionError, match="hashed again"):
        forged.matches()  # other bytes: only their hash can tell
    monkeypatch.setattr(domain.delivery.hashlib, "sha256", sha256)
    assert not forged.matches()
    assert [d.uid for d in mail.deliver_checked(checked)] == [1, 2]


def test_large_messages_of_a_batch_are_stored_once_each(mail: Mailstore) -> None:
    big = make_mail("big", body="x" * 20000 + "\r\n")
    checked = [mail.check(build(Deliver, account="ada@example.org", raw=raw))
               for raw in (big, big, make_mail("small"))]
    delivered = mail.deliver_checked(checked)
    assert delivered[0].sha256 == delivered[1].sha256
    assert len(list(mail.payloads.list())) == 1
    assert b"".join(mail.extract(delivered[1].message_id)) == big
