"""``letterlog dead-letters list|show|discard`` as an operator runs them (subprocess), on the
stream workers' SQLite table store (``<data>/stream-tables.sqlite``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.streaming.projector import StreamProjector
from adapters.tables.sqlite import SqliteTableStore
from tests.factories import jrun, run
from tests.stream_support import TOPIC, poison


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory whose stream table store holds two dead letters."""
    data = tmp_path / "d"
    data.mkdir()
    store = SqliteTableStore(data / "stream-tables.sqlite")
    try:
        projector = StreamProjector(store, [TOPIC], attempts=2, sleep=lambda s: None)
        projector.create_tables()
        projector.apply([poison(5), poison(6, b"\xc1 garbage")])
    finally:
        store.close()
    return data


def test_list_show_and_discard_one_then_all(data: Path):
    letters = jrun(data, "dead-letters", "list")
    assert [d["id"] for d in letters] == [f"{TOPIC}/0@5", f"{TOPIC}/0@6"]
    shown = run(data, "dead-letters", "show", f"{TOPIC}/0@6").stdout.decode()
    assert "value_hex    c120676172626167" in shown
    assert "attempt" in shown and "worker  tries=2" in shown
    [discarded] = jrun(data, "dead-letters", "discard", f"{TOPIC}/0@5", "--reason", "junk")
    assert discarded["discarded"] is True
    [closed] = jrun(data, "dead-letters", "list", "--closed")
    assert (closed["id"], closed["outcome"], closed["reason"]) == (
        f"{TOPIC}/0@5", "discarded", "junk")
    assert [d["id"] for d in jrun(data, "dead-letters", "discard", "--all")] == [
        f"{TOPIC}/0@6"]
    assert jrun(data, "dead-letters", "list") == []
    assert len(jrun(data, "dead-letters", "list", "--closed")) == 2


@pytest.mark.parametrize(("args", "says"), [
    (["show", "nonsense"], "is not a dead letter id"),
    (["show", f"{TOPIC}/3@9"], "no dead letter"),
    (["discard"], "give dead letter IDs or --all"),
    (["discard", f"{TOPIC}/0@5", "--all"], "give dead letter IDs or --all"),
    (["discard", f"{TOPIC}/0@5", f"{TOPIC}/0@77"], "no open dead letter"),
])
def test_mistakes_are_one_clear_line_and_discard_nothing(data: Path, args, says):
    p = run(data, "dead-letters", *args, ok=False)
    err = p.stderr.decode()
    assert p.returncode == 2 and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert len(jrun(data, "dead-letters", "list")) == 2
