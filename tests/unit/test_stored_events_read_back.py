"""Events as letterlog wrote them on 2026-11-28 (6b9ee51), kept as bytes: they read back as
the same events, and writing those events again gives the same bytes. A faster codec for the
same msgpack format (ADR 0100) must keep both: the log outlives the code."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent

from adapters.eventlog import sealing
from adapters.eventlog.transcoder import EventMapper, MsgpackTranscoder, packb, unpackb
from domain.delivery_key import DeliveryKey
from domain.mailbox import Mailbox
from domain.message import Message
from domain.personal import Personal

WHEN = datetime(2026, 11, 28, 8, 0, 1, 250, tzinfo=UTC)
KEY_ID, KEY = UUID(int=5), b"k" * 32  # the sealed part's data key (fixed, as its nonce)

STORED = [
    ("00000000-0000-0000-0000-000000000004", 1, "domain.message:Message.Delivered",
     bytes.fromhex(
        "de0013a974696d657374616d70d702000661519045c33ab06f726967696e61746f725f746f706963b664"
        "6f6d61696e2e6d6573736167653a4d657373616765aa6163636f756e745f6964d8010000000000000000"
        "0000000000000001aa6d61696c626f785f6964d80100000000000000000000000000000002a375696407"
        "ab75696476616c696469747909a473697a6578a6736861323536a0a6696e6c696e65c3ad696e7465726e"
        "616c5f64617465d7020006615190368000a5666c61677391a55c5365656ea66c6162656c7391a4776f72"
        "6ba6706f6c69637981a46b696e64aa696e646566696e697465a97468726561645f6964d8010000000000"
        "0000000000000000000003a5666163747383ac636f6e74656e745f74797065aa746578742f706c61696e"
        "a76465666563747390aa706172745f636f756e7401a8706572736f6e616cc76707000000000000000000"
        "000000000000050101010101010101010101017f5ad75715a99061443aa47df43f14690a7af081d522c1"
        "2a5aaafbf619c00136fb72dbcc9e123befa33b325aac5eb22c47a82343da95f68f4ef3308cd18349e123"
        "59b79872250b112b1476ab636f706965645f66726f6dc0a761646472657373a0ad636c6173735f766572"
        "73696f6e04")),
    ("e686cbbb-89c8-5724-b33a-7091efc28afd", 1, "domain.delivery_key:DeliveryKey.Claimed",
     bytes.fromhex(
        "85a974696d657374616d70d702000661519045c33ab06f726967696e61746f725f746f706963bf646f6d"
        "61696e2e64656c69766572795f6b65793a44656c69766572794b6579aa6163636f756e745f6964d80100"
        "000000000000000000000000000001a36b6579d9477368613235363a3932383362613961643664336436"
        "303136613931333461653532343332633939663636346136653566613563663262313832343937646637"
        "6364316434626366aa6d6573736167655f6964d80100000000000000000000000000000004")),
    ("00000000-0000-0000-0000-000000000002", 1, "domain.mailbox:Mailbox.Created",
     bytes.fromhex(
        "86a974696d657374616d70d702000661519045c33ab06f726967696e61746f725f746f706963b6646f6d"
        "61696e2e6d61696c626f783a4d61696c626f78aa6163636f756e745f6964d80100000000000000000000"
        "000000000001a46e616d65a5494e424f58a4726f6c65a5696e626f78ab75696476616c696469747909")),
    ("00000000-0000-0000-0000-000000000002", 2, "domain.mailbox:Mailbox.UidsAllocated",
     bytes.fromhex(
        "84a974696d657374616d70d702000661519045c33aaa6163636f756e745f6964d8010000000000000000"
        "0000000000000001ab6d6573736167655f69647391d80100000000000000000000000000000004a96669"
        "7273745f75696401")),
]

VALUES = bytes.fromhex(
    "88a475756964d80100000000000000000000000000000007a47768656ed702000661519045c33aa47461"
    "6773c7050392a161a162a666726f7a656ec70304920103a6616d6f756e74d605312e3530a66e65737465"
    "6492d8010000000000000000000000000000000881a174d702000661519045c33aa162c40200ffa16ec0")


@pytest.fixture
def mapper(monkeypatch: pytest.MonkeyPatch) -> EventMapper:
    monkeypatch.setattr(sealing.os, "urandom", lambda n: b"\x01" * n)  # the nonce it had
    keys = sealing.MemoryKeyStore()
    keys._keys[KEY_ID] = KEY
    return EventMapper(MsgpackTranscoder(keys))


def _stored() -> list[StoredEvent]:
    return [StoredEvent(originator_id=UUID(oid), originator_version=version, topic=topic,
                        state=state) for oid, version, topic, state in STORED]


def test_events_written_before_read_back_as_the_same_events(mapper: EventMapper) -> None:
    delivered, claimed, created, allocated = (mapper.to_domain_event(s) for s in _stored())
    assert type(delivered) is Message.Delivered and delivered.uid == 7
    assert (delivered.account_id, delivered.mailbox_id) == (UUID(int=1), UUID(int=2))
    assert delivered.timestamp == WHEN and delivered.labels == ["work"]
    assert isinstance(delivered.personal, Personal) and delivered.personal.key_id == KEY_ID
    assert delivered.personal["body"] == b"x" * 300
    assert delivered.personal["envelope"] == {"subject": "hi", "to": ["a@b.c"]}
    assert type(claimed) is DeliveryKey.Claimed and claimed.message_id == UUID(int=4)
    assert type(created) is Mailbox.Created and created.name == "INBOX"
    assert type(allocated) is Mailbox.UidsAllocated and allocated.message_ids == [UUID(int=4)]


def test_writing_them_again_gives_the_same_bytes(mapper: EventMapper) -> None:
    for stored in _stored():
        again = mapper.to_stored_event(mapper.to_domain_event(stored))
        assert (again.topic, again.state) == (stored.topic, stored.state)


def test_values_of_every_extension_type_keep_their_bytes() -> None:
    values = {"uuid": UUID(int=7), "when": WHEN, "tags": {"b", "a"}, "frozen": frozenset({3, 1}),
              "amount": Decimal("1.50"), "nested": [UUID(int=8), {"t": WHEN}],
              "b": b"\x00\xff", "n": None}
    assert packb(values) == VALUES
    assert unpackb(VALUES) == values
