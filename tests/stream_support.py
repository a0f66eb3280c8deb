"""Stream-worker test helpers: an event log to publish (`Log`), a story of mail commands to fill
it, records that poison a worker, and the check that tables equal a fold of the log."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from adapters.eventlog.records import account_of, record_from_notification
from adapters.eventlog.store import MailLog
from adapters.payloads.memory import InMemoryPayloadStore
from adapters.readside.host import Catalog, ProjectionHost
from adapters.readside.verification import verify_tables
from adapters.streaming.projector import HandoverGap, Record, StreamProjector
from adapters.tables.memory import InMemoryTableStore
from domain.service import Mailstore
from projections import messages
from projections import names as n
from projections.registry import ALL
from projections.runner import identity
from projections.tablestore import TableStore, table_digest
from tests.factories import make_mail

TOPIC = "letterlog-events"


PEOPLE = ["ada@example.org", "grace@example.org", "alan@example.org"]


class Log:
    """A real command history and its notification log as Kafka records."""

    def __init__(self, partitions: int = 3) -> None:
        self.app = MailLog(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
        self.mail = Mailstore(self.app, InMemoryPayloadStore())
        self.partitions = partitions

    def events(self, start: int = 1, stop: int | None = None) -> Iterator[tuple[int, Any]]:
        for item in self.app.recorder.select_notifications(start=start, limit=1_000_000,
                                                           stop=stop):
            yield item.id, self.app.mapper.to_domain_event(item)

    @property
    def head(self) -> int:
        return int(self.app.recorder.max_notification_id() or 0)

    def records(self) -> list[Record]:
        """Every event as the relay publishes it: keyed by account, partition by key hash,
        offsets counted per partition."""
        offsets = [0] * self.partitions
        out = []
        for item in self.app.recorder.select_notifications(start=1, limit=1_000_000):
            key = account_of(self.app.mapper.to_domain_event(item)).bytes
            partition = zlib.crc32(key) % self.partitions
            out.append(Record(TOPIC, partition, offsets[partition],
                              record_from_notification(item).encode(), key, 1.0))
            offsets[partition] += 1
        return out


def story(mail: Any, rounds: int = 2, first: int = 0) -> None:
    """Rounds ``first .. first + rounds - 1`` of a little of everything, for three people
    (``mail``: a ``Mailstore`` or the embedded ``Letterlog``)."""
    if first == 0:
        for person in PEOPLE:
            mail.create_mailbox(person, "Archive", create_account=True)
    for r in range(first, first + rounds):
        for i, person in enumerate(PEOPLE):
            a = mail.deliver(account=person, raw=make_mail(f"Plan {r}", message_id=f"<{r}{i}a@x>"),
                             labels=["work"]).message_id
            b = mail.deliver(account=person,
                             raw=make_mail(f"Re: Plan {r}", message_id=f"<{r}{i}b@x>",
                                           in_reply_to=f"<{r}{i}a@x>",
                                           references=f"<{r}{i}a@x>")).message_id
            c = mail.deliver(account=person, raw=make_mail("Big", message_id=f"<{r}{i}c@x>",
                                                           body="x" * 20_000)).message_id
            mail.flag(a, ["\\Seen"])
            mail.label(b, add=["urgent"])
            mail.move(a, "INBOX")  # within one mailbox: a new UID
            mail.move(b, "Archive")
            commands = getattr(mail, "mail", mail)  # the Letterlog's Mailstore, or it
            commands.deliver(account=person, raw=make_mail(f"Once {r}"),
                             idempotency_key=f"once-{r}-{i}")  # a key claimed, and a retry
            commands.deliver(account=person, raw=make_mail(f"Once {r}"),
                             idempotency_key=f"once-{r}-{i}")
            commands.release_extraction(commands.reserve_extraction(b), "failed")
            b"".join(commands.extract(b))
            mail.delete(a)
            if r:
                mail.restore(a)
            mail.delete(c)
            mail.expunge([c])
        mail.subscribe(PEOPLE[r % 3], "Archive")
        # a mailbox tree renamed, its top left \\Noselect, a leaf deleted with its message
        commands, person, top = getattr(mail, "mail", mail), PEOPLE[r % 3], f"Tree {r}"
        for name in (top, f"{top}/x"):
            mail.create_mailbox(person, name)
        mail.deliver(account=person, mailbox=f"{top}/x", raw=make_mail("kept"))
        mail.acl_set(person, f"{top}/x", "anyone", "lr")  # goes with its mailbox, below
        mail.rename_mailbox(person, top, f"Old {r}")
        commands.delete_mailbox(person, f"Old {r}")
        commands.delete_mailbox(person, f"Old {r}/x")  # expunges its one message
        # rights (RFC 4314) and virtual roots: an entry set, widened and narrowed, a group's,
        # a negative one, one deleted; a root set, and every other round deleted
        other = PEOPLE[(r + 1) % 3]
        mail.acl_set(person, "Archive", other, "lr")
        mail.acl_set(person, "Archive", other, "+wi")
        mail.acl_set(person, "Archive", "$team", "lrs")
        mail.acl_set(person, "Archive", "-" + other, "w")
        mail.acl_set(person, "Archive", other, "-i")
        mail.acl_delete(person, "Archive", "$team")
        mail.set_root(other, f"{person}/Archive")
        if r % 2:
            mail.delete_root(other)


def assert_equal_to_fold(store: InMemoryTableStore, history: Log) -> None:
    reports = verify_tables(store, identity, history.events, ALL, history.head)
    assert [r.table for r in reports if not r.identical] == [], [
        r.differences for r in reports if not r.identical]


def poison(offset: int, value: bytes = b"\x93not a record", topic: str = TOPIC) -> Record:
    return Record(topic, 0, offset, value, b"k" * 16, 2.0)


def failing_at(position: int) -> tuple[Any, ...]:
    """ALL, with the messages projector failing on the event at ``position``."""

    def project(event, at, read):
        if at == position:
            raise ValueError("malformed event")
        return messages.project(event, at, read)

    return tuple(replace(p, project=project) if p.name == "messages" else p for p in ALL)


def messages_event(history: Log, after: int = 40) -> int:
    """The position of the first event after ``after`` that the messages table projects."""
    return next(p for p, e in history.events(start=after) if type(e) in messages.HANDLED)


class Interrupted(RuntimeError):
    """A worker killed on purpose."""


def worker(store: TableStore, replay: Any = None) -> StreamProjector:
    projector = StreamProjector(store, [TOPIC], sleep=lambda s: None, catalog=Catalog(store),
                                replay=replay)
    projector.create_tables()
    return projector


def rebuild(store: TableStore, history: Log, head: int | None = None) -> dict[str, Any]:
    """A blue/green rebuild of every projection (the HBase way: the host is not live) that
    sees the log only up to ``head`` (default: all of it), as if that were its head then."""
    cut = history.head if head is None else head

    def events(start: int = 1, stop: int | None = None) -> Iterator[tuple[int, Any]]:
        return history.events(start, cut if stop is None else min(stop, cut))

    host = ProjectionHost(store, events, None, lambda: cut, live=False)
    return host.rebuild(fold=host._fold)


def assert_switched_tables_equal_a_fold(store: TableStore, history: Log) -> None:
    catalog = Catalog(store)
    catalog.refresh()
    reports = verify_tables(store, catalog.physical, history.events, ALL, history.head)
    assert [r.table for r in reports if not r.identical] == [], [
        r.differences for r in reports if not r.identical]


def follows_a_switch(store: TableStore, restarted: bool) -> None:
    history = Log()
    story(history.mail)
    before = history.records()
    projector = worker(store)
    projector.apply(before)
    result = rebuild(store, history)
    assert result["position"] == history.head
    old = {t: table_digest(store, t).sha256 for t in (n.MESSAGES, n.COUNTERS)}
    story(history.mail, rounds=1, first=2)  # more mail after the switch
    after = history.records()[len(before):]
    if restarted:
        projector = worker(store)  # a worker started after the switch
    projector.apply(after)
    assert projector.physical(n.MESSAGES) == result["tables"][n.MESSAGES]
    assert_switched_tables_equal_a_fold(store, history)
    # the old tables got nothing more
    assert {t: table_digest(store, t).sha256 for t in old} == old


def stops_at_a_handover_gap(store: TableStore) -> None:
    history = Log()
    story(history.mail)
    cut = history.head - 12
    projector = worker(store)
    projector.apply(history.records())  # the old tables, up to the head
    rebuild(store, history, head=cut)  # its catch-up read the log before the last 12 events
    story(history.mail, rounds=1, first=2)
    with pytest.raises(HandoverGap) as caught:
        projector.apply(history.records())
    assert f"start from position {cut}" in str(caught.value)
    assert f"positions {cut + 1}.." in str(caught.value)
    rebuild(store, history)  # a later rebuild catches up past them
    projector.apply(history.records())
    assert_switched_tables_equal_a_fold(store, history)


def repairs_a_handover_gap(store: TableStore) -> None:
    history = Log()
    story(history.mail)
    cut = history.head - 12
    replayed: list[tuple[int, int]] = []
    crash = {"after": 5}  # the first replay dies after 5 events (a killed worker)

    def replay(first: int, last: int) -> Iterator[tuple[int, Any]]:
        replayed.append((first, last))
        for i, item in enumerate(history.events(first, last)):
            if crash["after"] is not None and i == crash["after"]:
                crash["after"] = None
                raise Interrupted("killed mid-replay")
            yield item

    projector = worker(store, replay)
    projector.apply(history.records())  # the old tables, up to the head
    result = rebuild(store, history, head=cut)  # its catch-up missed the last 12 events
    story(history.mail, rounds=1, first=2)
    with pytest.raises(Interrupted):
        projector.apply(history.records())
    restarted = worker(store, replay)  # repairs it again, then dies before its tracking

    def die(result: Any) -> None:
        raise Interrupted("killed after the batch's data, before its tracking")

    restarted.after_write = die
    with pytest.raises(Interrupted):
        restarted.apply(history.records())
    assert len(replayed) >= 2 and all(r[0] == cut + 1 for r in replayed)  # once per gap
    repairs = len(replayed)
    worker(store, replay).apply(history.records())  # the repairs were recorded: none again
    assert len(replayed) == repairs
    assert_switched_tables_equal_a_fold(store, history)  # nothing lost, counters not doubled
    catalog = Catalog(store)
    catalog.refresh()
    stamps = {cells[n.TR_GENERATION] for row, cells in store.scan(catalog.physical(n.TRACKING))
              if b"@" in row}
    assert stamps == {b"%d" % result["generation"]}
