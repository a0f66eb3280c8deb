"""The Kafka wire form: keys found without building the event, values decoded as the event
store's mapper decodes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from aiokafka.partitioner import DefaultPartitioner

from adapters.eventlog.records import (
    account_key,
    account_of,
    decode_record,
    mapper,
    record_from_notification,
)
from adapters.eventlog.store import MailLog
from domain.errors import CorruptEvent
from domain.service import Mailstore
from tests.factories import make_mail


def _history(mail: Mailstore) -> None:
    d = mail.deliver(account="ada@example.org", raw=make_mail("one"), labels=["work"])
    mail.deliver(account="ada@example.org", raw=make_mail("two", message_id="<m2@x>"),
                 extract_until=datetime.now(UTC) + timedelta(days=1))
    mail.create_mailbox("ada@example.org", "Archive")
    mail.move(d.message_id, "Archive")
    mail.flag(d.message_id, ["\\Seen"])
    mail.subscribe("ada@example.org", "Archive")
    mail.deliver(account="bob@example.org", raw=make_mail("three", message_id="<m3@x>"))
    mail.delete(d.message_id)


def _notifications(log: MailLog) -> list:
    return list(log.recorder.select_notifications(start=1, limit=1000))


def test_the_key_read_from_the_state_is_the_account_of_the_decoded_event(
        mail: Mailstore, log: MailLog) -> None:
    _history(mail)
    notifications = _notifications(log)
    assert len({n.topic for n in notifications}) >= 8  # accounts, mailboxes, messages
    keys = set()
    for n in notifications:
        key = account_key(n.originator_id, n.topic, n.state)
        assert key == account_of(mapper().to_domain_event(n)).bytes
        keys.add(key)
    assert len(keys) == 2  # ada's events and bob's


def test_a_record_decodes_to_the_event_the_mapper_gives(mail: Mailstore, log: MailLog) -> None:
    _history(mail)
    for n in _notifications(log):
        position, event = decode_record(record_from_notification(n).encode())
        expected = mapper().to_domain_event(n)
        assert position == n.id
        assert type(event) is type(expected) and event.__dict__ == expected.__dict__


@pytest.mark.parametrize(("state", "topic"), [
    (b"\xc1 not msgpack", "domain.account:Account.Opened"),
    (b"\x93\x01\x02\x03", "domain.account:Account.Opened"),  # an array, not a map
    (b"\x80", "domain.nowhere:Gone"),  # an empty map of an unknown class
])
def test_a_state_that_is_not_an_event_has_no_key(state: bytes, topic: str,
                                                  mail: Mailstore, log: MailLog) -> None:
    _history(mail)
    n = _notifications(log)[0]
    with pytest.raises(Exception):  # noqa: B017 -- the relay wraps any of them in CorruptEvent
        account_key(n.originator_id, topic, state)


def test_a_malformed_value_is_a_corrupt_event() -> None:
    with pytest.raises(CorruptEvent, match="not a letterlog event"):
        decode_record(b"\xc1")


def test_the_relay_partition_cache_chooses_as_kafka_default_partitioner() -> None:
    import asyncio

    from adapters.streaming.relay import FilePosition, OutboxRelay

    class _Producer:
        async def partitions_for(self, topic: str) -> set[int]:
            return {3, 0, 2, 1}

    relay = OutboxRelay(lambda start, limit: [], "127.0.0.1:9", "t", FilePosition("/dev/null"))
    choose = asyncio.run(relay._sender.partitions(_Producer()))
    keys = [bytes([i]) * 16 for i in range(64)]
    expected = [DefaultPartitioner()(k, [0, 1, 2, 3], [0, 1, 2, 3]) for k in keys]
    assert [choose(k) for k in keys] == expected
    assert [choose(k) for k in keys] == expected  # from the cache
    assert len(set(expected)) > 1
