"""ADR 0014: an event's personal part is stored zstd-compressed, and an inline body is stored
once (in the log; the messages row points at its event). Events written before it (a plain
map) still decode, extract and project."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgpack

from adapters.embedded import Letterlog
from adapters.eventlog.keysqlite import SqliteKeyStore
from adapters.eventlog.transcoder import pack_state, packb, unpackb
from domain.personal import Personal
from tests.factories import make_mail

ADA = "ada@example.org"


def _body(i: int) -> bytes:
    return make_mail(f"subject {i}", message_id=f"<{i}@x>") + b"the same words again\r\n" * 80


def test_the_personal_part_is_stored_compressed_and_decodes_to_the_same_map() -> None:
    state = {"uid": 7, "personal": {"envelope": {"subject": "hello"}, "attachment_names": [],
                                    "body": _body(1)}}
    stored = pack_state(state)
    assert _body(1) not in stored and len(stored) < len(_body(1)) / 3
    assert type(msgpack.unpackb(stored)["personal"]) is msgpack.ExtType
    assert unpackb(stored) == state == unpackb(packb(state))  # the old, plain form too
    assert state["personal"]["body"] == _body(1)  # the caller's state is left as it was


def _rewrite_log_in_the_old_form(events_db: Path) -> int:
    """Every stored event's state as letterlog wrote it before ADR 0014: plain maps."""
    con = sqlite3.connect(events_db)
    keys = SqliteKeyStore(events_db.parent / "keys.sqlite")  # personal parts are sealed
    with con:
        rows = con.execute("SELECT rowid, state FROM stored_events").fetchall()
        for rowid, state in rows:
            d = unpackb(state)
            if isinstance(d.get("personal"), Personal):  # sealed today: the old form is plain
                d["personal"] = dict(d["personal"])
            con.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (packb(d), rowid))
    con.close()
    keys.close()
    return len(rows)


def test_events_written_before_compression_still_extract_list_and_rebuild(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Letterlog.open(data, durability="normal") as store:
        ids = [store.deliver(account=ADA, raw=_body(i)).message_id for i in range(3)]
    assert _rewrite_log_in_the_old_form(data / "events.sqlite") > 3
    with sqlite3.connect(data / "events.sqlite") as con:
        assert any(_body(0) in state for (state,) in con.execute("SELECT state FROM stored_events"))
    with Letterlog.open(data, durability="normal") as store:
        assert [store.extract(m) for m in ids] == [_body(i) for i in range(3)]
        store.rebuild()
        assert b"".join(store.body(ADA, "INBOX", 2)) == _body(1)
        assert [m.subject for m in store.messages(ADA, limit=5)] == [
            "subject 2", "subject 1", "subject 0"]
        assert all(r.identical for r in store.verify())


def test_an_inline_body_is_stored_once_and_read_from_its_event(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Letterlog.open(data, durability="normal") as store:
        store.deliver(account=ADA, raw=_body(5))
        assert b"".join(store.body(ADA, "INBOX", 1)) == _body(5)
    for name in ("events.sqlite", "tables.sqlite"):
        with sqlite3.connect(data / name) as con:
            tables = [t for (t,) in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")]
            for table in tables:
                for row in con.execute(f'SELECT * FROM "{table}"'):
                    assert not any(type(v) is bytes and b"the same words again" in v for v in row)
