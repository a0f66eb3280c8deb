"""Nothing derived from a message's bytes outside the seal but a fixed vocabulary (ADR 0081,
ADR 0099).

An attacker who holds the log (SQLite, PostgreSQL, Kafka, a backup) after an erasure used
to read the message's own media type (``application/x-acme-...``) and its SHA-256, with
which a low-entropy message (a login code) is found by guessing. Here every stored event is
read back as stored, its sealed part left out, and searched: for the media types, for the
digest of every message, and for any 64-hex string that is not the address of a stored
payload. The guess itself is made too, on small and on large (stored) messages: before the
change it found the code. And dedup, idempotency keys and the payload references keep
working; old events keep reading, their payloads under the addresses they name.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

import domain.delivery
from adapters.embedded import Letterlog
from adapters.eventlog.reader import row_pages
from adapters.eventlog.transcoder import unpackb
from domain.errors import IdempotencyKeyReused
from domain.message import Message
from domain.sealed_facts import is_reduced
from tests.factories import make_mail

ADA = "ada@example.org"
VENDOR = "application/x-acme-invoice"


def vendor_mail(code: str, padding: int = 0) -> bytes:
    """A message of a vendor's media type carrying a 4-digit code: small (inline), or with
    ``padding`` bytes of a fixed template, stored as a payload."""
    return (f"From: login@acme.example\r\nTo: {ADA}\r\nSubject: your code\r\n"
            f"MIME-Version: 1.0\r\nContent-Type: {VENDOR}\r\n\r\n"
            f"Your code is {code}.\r\n" + "Terms and conditions. " * (padding // 22)
            ).encode()


def large_mail(tag: str) -> bytes:
    return make_mail(f"large {tag}", message_id=f"<{tag}@x>", body="x" * 20_000 + "\r\n")


def unsealed_text(state: Any) -> Any:
    """Every string of a stored event's state but its sealed ``personal`` part and the topic
    of its aggregate's class."""
    if isinstance(state, dict):
        for name, value in state.items():
            if name not in ("personal", "originator_topic"):
                yield from unsealed_text(value)
    elif isinstance(state, list | tuple):
        for value in state:
            yield from unsealed_text(value)
    elif isinstance(state, str):
        yield state


def stored_states(store: Letterlog) -> list[tuple[str, dict[str, Any]]]:
    return [(row[3], unpackb(row[4])) for rows in row_pages(store.log) for row in rows]


def hex_strings(state: Any) -> set[str]:
    return {s for s in unsealed_text(state) if len(s) == 64
            and all(c in "0123456789abcdef" for c in s)}


def guess_code(states: list[tuple[str, dict[str, Any]]], padding: int = 0) -> list[str]:
    """The attacker: every 4-digit code tried against every digest outside the seal."""
    digests = set().union(*(hex_strings(s) for _, s in states))
    return [code for code in (f"{n:04d}" for n in range(10_000))
            if hashlib.sha256(vendor_mail(code, padding)).hexdigest() in digests]


def files_named_by(root: Path, digests: set[str]) -> list[Path]:
    return [p for p in root.rglob("*") if p.name in digests]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with Letterlog.open(tmp_path / "data", durability="normal") as s:
        s.create_mailbox(ADA, "Archive", create_account=True)
        yield s


def test_outside_the_seal_are_only_payload_addresses_and_the_vocabulary(store):
    code = vendor_mail("4712")
    inline = store.deliver(account=ADA, raw=code, idempotency_key="q1")
    big = store.deliver(account=ADA, raw=large_mail("a"))
    store.move(inline.message_id, "Archive")
    store.copy(inline.message_id, "INBOX")
    store.erase_message(inline.message_id)
    states = stored_states(store)
    payloads = {ref for ref, _, _ in store.payloads.list()}
    big_address = store.mail.message(big.message_id).address
    assert big_address in payloads and big.sha256 not in payloads | {big_address}
    for topic, state in states:
        media = (state.get("facts") or {}).get("content_type")
        assert media is None or is_reduced(media), (topic, media)
        assert hex_strings(state) <= payloads, topic  # the only 64-hex: payload addresses
        assert big.sha256 not in hex_strings(state), topic
        assert VENDOR not in "\n".join(unsealed_text(state)), topic
    assert guess_code(states) == []


def test_an_erased_stored_message_cannot_be_guessed_from_the_log_or_the_payload_store(
        store, tmp_path):
    """A large message of low entropy (a 20 KiB template around a code): its payload's
    address says nothing of it, and once it is erased the payload store keeps nothing named
    by its digest (ADR 0099)."""
    raw = vendor_mail("4712", padding=20_000)
    d = store.deliver(account=ADA, raw=raw)
    assert not store.mail.message(d.message_id).inline
    digest = hashlib.sha256(raw).hexdigest()
    assert files_named_by(tmp_path / "data", {digest})  # while it lives: the content's link
    store.erase_message(d.message_id)
    assert guess_code(stored_states(store), padding=20_000) == []
    assert files_named_by(tmp_path / "data", {digest}) == []
    assert list(store.payloads.list()) == []


def test_the_guess_that_worked_before_finds_nothing_now(store, monkeypatch):
    """The search is real: with the digest outside the seal (as before), it finds the code,
    small or stored."""
    from dataclasses import replace

    def plain(*args: Any, **kwargs: Any) -> Any:
        return replace(_DELIVERY_FIELDS(*args, **kwargs), sha256=args[5].sha256)

    monkeypatch.setattr(domain.delivery, "delivery_fields", plain)
    store.deliver(account=ADA, raw=vendor_mail("4712"))
    store.deliver(account=ADA, raw=vendor_mail("0815", padding=20_000))
    assert guess_code(stored_states(store)) == ["4712"]
    assert guess_code(stored_states(store), padding=20_000) == ["0815"]


def test_a_live_message_shows_its_digest_and_media_type_an_erased_one_neither(store):
    d = store.deliver(account=ADA, raw=vendor_mail("0042"))
    shown = store.show(d.message_id)
    assert shown["sha256"] == hashlib.sha256(vendor_mail("0042")).hexdigest() == d.sha256
    assert shown["facts"]["content_type"] == VENDOR
    (row,) = store.messages(ADA, "INBOX")
    assert row.sha256 == d.sha256
    moved = store.move(d.message_id, "Archive")
    assert moved.changed and store.show(d.message_id)["sha256"] == d.sha256
    store.erase_message(d.message_id)
    gone = store.show(d.message_id)
    assert gone["sha256"] == "" and gone["facts"]["content_type"] == "application/other"


def test_idempotency_keys_dedup_and_payload_references_keep_working(store):
    first = store.deliver(account=ADA, raw=vendor_mail("1111"), idempotency_key="k")
    again = store.deliver(account=ADA, raw=vendor_mail("1111"), idempotency_key="k")
    assert again.duplicate and again.message_id == first.message_id
    assert again.sha256 == first.sha256
    with pytest.raises(IdempotencyKeyReused):
        store.deliver(account=ADA, raw=vendor_mail("2222"), idempotency_key="k")
    a = store.deliver(account=ADA, raw=large_mail("shared"))
    b = store.deliver(account=ADA, raw=large_mail("shared"))
    address = store.mail.message(a.message_id).address
    assert a.sha256 == b.sha256 and address == store.mail.message(b.message_id).address
    assert [p for p, _, _ in store.payloads.list()] == [address]  # one payload, shared
    store.erase_message(a.message_id)
    assert store.payloads.exists(address)  # b still refers to it
    store.erase_message(b.message_id)
    assert not store.payloads.exists(address)
    c = store.deliver(account=ADA, raw=large_mail("shared"))  # the same content, later
    assert store.mail.message(c.message_id).address != address


def _old_arrival(*args: Any, **kwargs: Any) -> Any:
    """``delivery_fields`` as before ADR 0081: the digest and the media type in plain text."""
    from dataclasses import replace

    arrival = _DELIVERY_FIELDS(*args, **kwargs)
    facts = args[5]
    personal = arrival.personal
    for name in ("sha256", "content_type"):
        personal.data.pop(name, None)
    return replace(arrival, sha256=facts.sha256,
                   facts={**arrival.facts, "content_type": facts.content_type})


_DELIVERY_FIELDS = domain.delivery.delivery_fields


def test_events_stored_before_read_reduced_and_new_events_of_old_messages_are_sealed(
        tmp_path, monkeypatch):
    data = tmp_path / "data"
    with monkeypatch.context() as old:
        old.setattr(domain.delivery, "delivery_fields", _old_arrival)
        for event_class in (Message.Delivered, Message.UploadCompleted, Message.Moved):
            old.setattr(event_class, "class_version", 2)
        with Letterlog.open(data) as s:
            s.create_mailbox(ADA, "Archive", create_account=True)
            d = s.deliver(account=ADA, raw=vendor_mail("7777"), idempotency_key="old")
        (_, stored), = [(t, st) for t, st in stored_states_of(data) if t.endswith("Delivered")]
        assert stored["facts"]["content_type"] == VENDOR and stored["sha256"] == d.sha256
    with Letterlog.open(data) as s:
        events = [e for _, e in s.events() if isinstance(e, Message.Delivered)]
        assert events[0].facts["content_type"] == "application/other"  # both readers upcast
        (position, _), = [(p, e) for p, e in s.events() if isinstance(e, Message.Delivered)]
        (note,) = s.log.recorder.select_notifications(position, 1)
        assert s.log.mapper.to_domain_event(note).facts["content_type"] == "application/other"
        assert s.show(d.message_id)["sha256"] == d.sha256  # the old plain digest still reads
        again = s.deliver(account=ADA, raw=vendor_mail("7777"), idempotency_key="old")
        assert again.duplicate and again.message_id == d.message_id
        s.move(d.message_id, "Archive")
        moved = [st for t, st in stored_states(s) if t.endswith("Moved")][-1]
        assert moved["class_version"] == 4 and moved["sha256"] == ""
        assert moved["facts"]["content_type"] == "application/other"
        assert s.show(d.message_id)["sha256"] == d.sha256  # from the seal now
        assert all(r.differences == [] for r in s.verify())


def stored_states_of(data: Path) -> list[tuple[str, dict[str, Any]]]:
    with Letterlog.open(data) as s:
        return stored_states(s)


def test_a_stored_message_of_before_adr_0099_keeps_its_payload_under_its_sha256(
        tmp_path, monkeypatch):
    """Version 3 named a stored message's payload by its SHA-256 in ``sha256``: read as
    version 4, that is its ``address``; its body reads, a move keeps it, an erasure deletes
    it, and the digest is sealed in what is written from now on."""
    from dataclasses import replace

    data = tmp_path / "data"
    raw = large_mail("old")
    digest = hashlib.sha256(raw).hexdigest()

    def old_arrival(*args: Any, **kwargs: Any) -> Any:
        arrival = _DELIVERY_FIELDS(*args, **kwargs)
        arrival.personal.data.pop("sha256", None)
        return replace(arrival, sha256=args[5].sha256, address="")

    with monkeypatch.context() as old:
        old.setattr(domain.delivery, "delivery_fields", old_arrival)
        for event_class in (Message.Delivered, Message.UploadCompleted, Message.Moved):
            old.setattr(event_class, "class_version", 3)
        with Letterlog.open(data) as s:
            s.create_mailbox(ADA, "Archive", create_account=True)
            s.payloads.put_stream([raw], address=digest)  # where version 3 kept it
            d = s.deliver(account=ADA, raw=raw)
    with Letterlog.open(data) as s:
        m = s.mail.message(d.message_id)
        assert (m.address, m.sha256) == (digest, digest)
        (row,) = s.messages(ADA, "INBOX")
        assert b"".join(s.body(ADA, "INBOX", row.uid)) == raw
        s.move(d.message_id, "Archive")
        moved = [st for t, st in stored_states(s) if t.endswith("Moved")][-1]
        assert moved["sha256"] == "" and moved["address"] == digest
        assert s.show(d.message_id)["sha256"] == digest  # from the seal now
        s.erase_message(d.message_id)
        assert not s.payloads.exists(digest)
