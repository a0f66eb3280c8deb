"""Reading the log back as ``(position, domain event)`` pairs, fast.

``Mapper.to_domain_event`` (eventsourcing) resolves the topic, finds an id converter and goes
through the transcoder object for every event; the SQLite recorder builds a ``Notification``
and a ``UUID`` from the stored hex for every row. Catch-up, rebuild and verify read the
whole log this way, so here the same work is done once per page and once per topic:

* ``EventDecoder`` turns a stored event into the domain event exactly as the mapper does
  (topic resolved once per topic, msgpack state decoded, ``originator_id`` /
  ``originator_version`` set, upcast ``class_version`` by ``class_version``, the state set
  as the event's ``__dict__``). Only for letterlog's own stored form: msgpack, no cipher,
  no compressor (``plain_decoder`` says whether a mapper is that, else the mapper is used);
* ``read_events`` pages through the log: on SQLite with one plain ``SELECT`` per page
  through the recorder's own connection pool, elsewhere (PostgreSQL) through
  ``select_notifications``.

A row that cannot be decoded raises ``CorruptEvent`` naming its position, aggregate id,
version and topic, as ``Letterlog.events`` always did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder
from eventsourcing.utils import resolve_topic
from msgpack import unpackb as _unpackb

from adapters.eventlog.sealing import keys_read_ahead
from adapters.eventlog.transcoder import (
    MsgpackTranscoder,
    ext_hook,
    ext_hook_for,
    sealed_key_ids,
    uuid_from_int,
)
from domain.errors import CorruptEvent

Decode = Callable[..., Any]  # (originator id, version, topic, state[, ext hook]) -> event

_new = object.__new__
_set = object.__setattr__


def _uuid_of(stored: Any) -> UUID:
    """The aggregate id as stored: a UUID (PostgreSQL) or its 32 hex digits (SQLite)."""
    if type(stored) is str and len(stored) == 32 and stored.isalnum():
        return uuid_from_int(int(stored, 16))  # what UUID(stored) does, without its checks
    return stored if isinstance(stored, UUID) else UUID(stored)


class EventDecoder:
    """A stored event's fields to its domain event, as ``Mapper.to_domain_event`` does."""

    def __init__(self) -> None:
        self._classes: dict[str, tuple[type, int]] = {}
        self._ids: dict[Any, UUID] = {}  # an aggregate's events share its id (immutable)

    def __call__(self, originator_id: Any, version: int, topic: str, state: bytes,
                 hook: Callable[[int, bytes], Any] = ext_hook) -> Any:
        """``hook``: ``transcoder.ext_hook_for`` the keys read ahead for a batch, if any."""
        found = self._classes.get(topic)
        if found is None:
            cls = resolve_topic(topic)
            found = self._classes[topic] = (cls, getattr(cls, "class_version", 1))
        cls, class_version = found
        d = _unpackb(state, ext_hook=hook, raw=False, strict_map_key=False)
        aggregate = self._ids.get(originator_id)
        if aggregate is None:
            if len(self._ids) >= 65536:
                self._ids.clear()
            aggregate = self._ids[originator_id] = _uuid_of(originator_id)
        d["originator_id"] = aggregate
        d["originator_version"] = version
        from_version = d.pop("class_version", 1)
        while from_version < class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(d)
            from_version += 1
        event: Any = _new(cls)
        _set(event, "__dict__", d)
        return event

    def events(self, pages: Iterator[list[Row]]) -> Iterator[tuple[int, Any]]:
        """Every row of ``pages`` decoded as ``__call__`` decodes it (the same steps, inline;
        tests hold the two equal), as ``(position, event)``: one loop with its lookups bound
        once, no call per event (a rebuild reads the whole log so). A row that fails raises
        ``CorruptEvent`` when it is reached, after the events before it."""
        classes, ids, unpack, new, set_ = (self._classes, self._ids, _unpackb, _new, _set)
        for rows in pages:
            hook = page_hook([row[4] for row in rows])
            for position, originator_id, version, topic, state in rows:
                try:
                    found = classes.get(topic)
                    if found is None:
                        cls = resolve_topic(topic)
                        found = classes[topic] = (cls, getattr(cls, "class_version", 1))
                    cls, class_version = found
                    d = unpack(state, ext_hook=hook, raw=False, strict_map_key=False)
                    aggregate = ids.get(originator_id)
                    if aggregate is None:
                        if len(ids) >= 65536:
                            ids.clear()
                        aggregate = ids[originator_id] = _uuid_of(originator_id)
                    d["originator_id"] = aggregate
                    d["originator_version"] = version
                    from_version = d.pop("class_version", 1)
                    while from_version < class_version:
                        getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(d)
                        from_version += 1
                    event: Any = new(cls)
                    set_(event, "__dict__", d)
                except Exception as e:
                    raise _corrupt(position, originator_id, version, topic, e) from e
                yield position, event


def page_hook(states: list[bytes]) -> Callable[[int, bytes], Any]:
    """The ``ext_hook`` for a page of stored states: their sealed parts' keys read in one
    query per key store (ADR 0117), held by the hook, for this page only."""
    return ext_hook_for(keys_read_ahead(sealed_key_ids(states)))


def plain_decoder(mapper: Any) -> EventDecoder | None:
    """An ``EventDecoder`` if ``mapper`` stores letterlog's plain form, else None."""
    if getattr(mapper, "cipher", None) or getattr(mapper, "compressor", None):
        return None
    if type(getattr(mapper, "transcoder", None)) is not MsgpackTranscoder:
        return None
    return EventDecoder()


def _corrupt(position: int, originator_id: Any, version: Any, topic: Any,
             error: Exception) -> CorruptEvent:
    with contextlib.suppress(TypeError, ValueError):
        originator_id = _uuid_of(originator_id)
    return CorruptEvent(
        f"event at position {position} (aggregate {originator_id}, version {version}, "
        f"topic {topic!r}) cannot be decoded: {error}"
    )


Row = tuple[int, Any, int, str, bytes]  # position, originator id, version, topic, state


def _sqlite_pages(recorder: Any, start: int, stop: int | None, batch: int) -> Iterator[list[Row]]:
    sql = (f"SELECT rowid, originator_id, originator_version, topic, state "
           f"FROM {recorder.events_table_name} WHERE rowid >= ?"
           + (" AND rowid <= ?" if stop is not None else "") + " ORDER BY rowid LIMIT ?")
    pos = start
    while True:
        with recorder.datastore.transaction(commit=False) as c:
            cursor = c.sqlite_cursor
            cursor.row_factory = None  # plain tuples, not sqlite3.Row
            cursor.execute(sql, (pos, stop, batch) if stop is not None else (pos, batch))
            rows = cursor.fetchall()
        if not rows:
            return
        yield rows
        pos = rows[-1][0] + 1


def _notification_pages(recorder: Any, start: int, stop: int | None,
                        batch: int) -> Iterator[list[Row]]:
    pos = start
    while True:
        found = recorder.select_notifications(start=pos, limit=batch, stop=stop)
        if not found:
            return
        yield [(n.id, n.originator_id, n.originator_version, n.topic, n.state) for n in found]
        pos = found[-1].id + 1
        if stop is not None and pos > stop:
            return


def _is_sqlite(recorder: Any) -> bool:
    return (isinstance(recorder, SQLiteApplicationRecorder)
            and getattr(recorder.datastore, "originator_id_type", "uuid") == "uuid")


def row_pages(log: Any, start: int = 1, stop: int | None = None,
              batch: int = 1000) -> Iterator[list[Row]]:
    """Pages of stored rows ``(position, originator id, version, topic, state)`` from
    ``start`` to ``stop`` (inclusive), undecoded (the Spark job decodes them elsewhere)."""
    recorder = log.recorder
    pages = _sqlite_pages if _is_sqlite(recorder) else _notification_pages
    return pages(recorder, start, stop, batch)


def row_decoder(log: Any) -> Callable[..., tuple[int, Any]]:
    """A function from a stored row to ``(position, domain event)`` as ``read_events``
    decodes it (``CorruptEvent`` naming position, aggregate, version and topic)."""
    mapper = log.mapper
    decode: Decode | None = plain_decoder(mapper)
    if decode is None:
        def decode(originator_id: Any, version: int, topic: str, state: bytes,
                   hook: Callable[[int, bytes], Any] = ext_hook) -> Any:
            return mapper.to_domain_event(StoredEvent(
                originator_id=_uuid_of(originator_id), originator_version=version,
                topic=topic, state=state))

    def decoded(row: Row, hook: Callable[[int, bytes], Any] = ext_hook) -> tuple[int, Any]:
        """``hook``: ``page_hook`` of the row's page, where the caller reads pages."""
        position, originator_id, version, topic, state = row
        try:
            return position, decode(originator_id, version, topic, state, hook)
        except Exception as e:
            raise _corrupt(position, originator_id, version, topic, e) from e

    return decoded


def read_events(log: Any, start: int = 1, stop: int | None = None,
                batch: int = 1000) -> Iterator[tuple[int, Any]]:
    """The events of ``log`` (an eventsourcing application) from ``start`` to ``stop``
    (inclusive), with their positions; a corrupt one raises ``CorruptEvent``."""
    recorder, mapper = log.recorder, log.mapper
    decode = plain_decoder(mapper)
    if decode is None:
        return _mapped(mapper, _notification_pages(recorder, start, stop, batch))
    pages = (_sqlite_pages if _is_sqlite(recorder) else _notification_pages)(
        recorder, start, stop, batch)
    return decode.events(pages)


def _mapped(mapper: Any, pages: Iterator[list[Row]]) -> Iterator[tuple[int, Any]]:
    for rows in pages:
        for position, originator_id, version, topic, state in rows:
            try:
                event = mapper.to_domain_event(StoredEvent(
                    originator_id=originator_id, originator_version=version, topic=topic,
                    state=state))
            except Exception as e:
                raise _corrupt(position, originator_id, version, topic, e) from e
            yield position, event
