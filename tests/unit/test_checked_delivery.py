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


def _big_checked(mail: Mailstore, n: int = 2) -> list:
    return [mail.check(build(Deliver, account="ada@example.org",
                             raw=make_mail(f"big {i}", body=f"{i} " * 8000 + "\r\n")))
            for i in range(n)] + [mail.check(_cmd("small"))]


def test_payloads_written_ahead_are_only_touched_by_the_append(
        mail: Mailstore, monkeypatch: pytest.MonkeyPatch) -> None:
    """ADR 0104: an importer's reading process writes a batch's large payloads; the items
    carry their addresses, and the append neither hashes nor writes them again: it touches
    them (their written_at refreshed, so no purge takes them before the events refer to
    them)."""
    checked = _big_checked(mail)
    ahead = mail.written_ahead(checked)
    assert [bool(c.stored) for c in ahead] == [True, True, False]
    assert all(c.matches() for c in ahead)  # still the checked bytes, without a hash
    touched: list[str] = []
    touch = mail.payloads.touch

    def no_put(_payloads: object) -> None:
        raise AssertionError("written again")

    def counted(address: str) -> bool:
        touched.append(address)
        return touch(address)

    monkeypatch.setattr(mail.payloads, "put_many", no_put)
    monkeypatch.setattr(mail.payloads, "touch", counted)
    delivered = mail.deliver_checked(ahead)
    assert touched == [ahead[0].stored, ahead[1].stored]
    assert [mail.message(d.message_id).address for d in delivered[:2]] == touched
    assert [b"".join(mail.extract(d.message_id)) for d in delivered] == [
        c.command.raw for c in checked]


def test_a_payload_written_ahead_and_gone_by_the_append_is_written_again(
        mail: Mailstore) -> None:
    checked = _big_checked(mail, 1)
    ahead = mail.written_ahead(checked)
    assert mail.payloads.delete(ahead[0].stored)  # a purge of orphans took it meanwhile
    [big, _small] = mail.deliver_checked(ahead)
    address = mail.message(big.message_id).address
    assert mail.payloads.exists(address)
    assert b"".join(mail.extract(big.message_id)) == checked[0].command.raw


def test_writing_ahead_through_another_payload_store(log, clock, tmp_path) -> None:
    """The reading process writes through a payload store it opened itself (after its
    fork); the append finds the payloads at the addresses the items carry."""
    from adapters.payloads.files import FilePayloadStore

    mail = Mailstore(log, FilePayloadStore(tmp_path / "payloads"), clock=clock)
    other = FilePayloadStore(tmp_path / "payloads", durable=False)
    ahead = mail.written_ahead(_big_checked(mail), other)
    assert all(mail.payloads.exists(c.stored) for c in ahead[:2])
    delivered = mail.deliver_checked(ahead)
    assert [mail.message(d.message_id).address for d in delivered[:2]] == [
        c.stored for c in ahead[:2]]
    assert len(list(mail.payloads.list())) == 2
    assert [b"".join(mail.extract(d.message_id)) for d in delivered[:2]] == [
        c.command.raw for c in ahead[:2]]
