"""Personal data in events: sealed on the way into the log, opened on the way out, shredded
when its key is destroyed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapters.eventlog import sealing
from adapters.eventlog.keysqlite import SqliteKeyStore
from adapters.eventlog.sealing import MemoryKeyStore
from adapters.eventlog.transcoder import MsgpackTranscoder
from domain.personal import Personal

SECRET = b"the subject nobody may read"


def personal() -> Personal:
    return Personal({"envelope": {"subject": SECRET.decode(), "sent_at": datetime.now(UTC)},
                     "attachment_names": ["x.pdf"], "body": SECRET})


def test_personal_data_is_stored_sealed_and_opens_with_its_key() -> None:
    keys = MemoryKeyStore()
    state = {"personal": personal(), "size": 3}
    stored = MsgpackTranscoder(keys).encode(state)
    assert SECRET not in stored
    opened = MsgpackTranscoder().decode(stored)
    assert opened["personal"] == state["personal"] and opened["size"] == 3
    assert opened["personal"].key_id == state["personal"].key_id


def test_one_message_keeps_one_key_for_all_its_events() -> None:
    keys, p = MemoryKeyStore(), personal()
    stored = MsgpackTranscoder(keys).encode({"personal": p})
    first = MsgpackTranscoder(keys).decode(stored)["personal"]
    MsgpackTranscoder(keys).encode({"personal": first})
    assert first.key_id == p.key_id and p.copy_for_another_message().key_id is None


def test_a_destroyed_key_opens_as_shredded() -> None:
    keys, p = MemoryKeyStore(), personal()
    stored = MsgpackTranscoder(keys).encode({"personal": p})
    assert keys.destroy([p.key_id]) == 1
    opened = MsgpackTranscoder().decode(stored)["personal"]
    assert opened.shredded and dict(opened) == {} and opened.get("body") is None


def test_personal_data_is_never_written_without_a_key_store_nor_shown_in_a_repr() -> None:
    with pytest.raises(TypeError, match="sealed"):
        MsgpackTranscoder().encode({"personal": personal()})
    assert SECRET.decode() not in repr(personal())


def test_sqlite_keys_survive_a_reopen_and_a_destroyed_one_is_gone(tmp_path) -> None:
    keys = SqliteKeyStore(tmp_path / "keys.sqlite")
    key_id, key = keys.new_key()
    keys.close()
    again = SqliteKeyStore(tmp_path / "keys.sqlite")
    assert again.get(key_id) == key
    assert again.destroy([key_id]) == 1 and again.get(key_id) == sealing.DESTROYED
    assert key not in (tmp_path / "keys.sqlite").read_bytes()
    again.close()


def test_a_key_no_open_store_ever_held_is_an_error_not_a_purge() -> None:
    elsewhere = MemoryKeyStore()
    stored = MsgpackTranscoder(elsewhere).encode({"personal": personal()})
    elsewhere.close()
    keep_one_open = MemoryKeyStore()
    with pytest.raises(sealing.KeyStoreMissing, match="no open key store"):
        MsgpackTranscoder().decode(stored)
    keep_one_open.close()


def test_reading_a_sealed_value_with_no_key_store_open_is_an_error() -> None:
    keys = MemoryKeyStore()
    stored = MsgpackTranscoder(keys).encode({"personal": personal()})
    open_stores = list(sealing._OPEN)
    for store in open_stores:
        sealing._OPEN.discard(store)
    try:
        with pytest.raises(sealing.KeyStoreMissing):
            MsgpackTranscoder().decode(stored)
    finally:
        for store in open_stores:
            sealing.register(store)


def test_a_broken_key_store_of_another_log_does_not_hide_the_key_in_this_one() -> None:
    """Every open key store is asked (a process may hold several logs); one whose server is
    gone (a dropped database) must not stop the lookup in the store that has the key."""

    class Gone:
        def get(self, key_id):
            raise ConnectionError("the server is gone")

    keys, p = MemoryKeyStore(), personal()
    stored = MsgpackTranscoder(keys).encode({"personal": p})
    gone = Gone()
    sealing.register(gone)  # type: ignore[arg-type]
    try:
        assert MsgpackTranscoder().decode(stored)["personal"] == p
        keys.close()
        with pytest.raises(ConnectionError):  # no store has it: the failure is said
            MsgpackTranscoder().decode(stored)
    finally:
        sealing._OPEN.discard(gone)
