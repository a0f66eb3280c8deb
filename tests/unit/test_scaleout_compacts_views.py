"""Completing an erasure on scale-out flushes and major-compacts the saved views' tables a
purge deletes from, with the live ones (the erasure deleted the views' rows at once)."""

from __future__ import annotations

from types import SimpleNamespace

from adapters.lifecycle.scaleout import complete, record_erasure
from projections import names as n


class Tables:
    """One saved view, ``snap``, holding every projection; flushes recorded."""

    def __init__(self):
        self.flushed = []

    def get(self, table, row):
        return {}

    def scan(self, table, **_):
        if table != n.VIEWS:
            return iter(())
        return iter([(b"snap", {n.V_POSITION: b"7", n.V_ERASED: b"9",
                                n.V_PROJECTIONS: b"messages,mailboxes,counters"})])

    def list_tables(self):
        return ["counters__v_snap", "mailboxes__v_snap", "messages", "messages__v_snap",
                "tracking__v_snap"]

    def flush(self, names):
        self.flushed += list(names)
        return True

    def physical_name(self, name):
        return f"p_{name}"


def test_the_completion_compacts_the_views_tables_a_purge_deletes_from(tmp_path):
    tables = Tables()
    store = SimpleNamespace(
        settings=SimpleNamespace(data=tmp_path, event_store="sqlite", hbase_compactor="true",
                                 payloads_in_hbase=lambda: False),
        max_position=lambda: 9, payloads=None,
        projections=SimpleNamespace(tables=tables, physical=lambda t: t))
    record_erasure(store, [], 1000.0, 1)
    done = complete(store, wait=60, read_side=lambda t, d: "")
    assert done.complete
    assert {"messages__v_snap", "counters__v_snap"} <= set(tables.flushed)
    assert "mailboxes__v_snap" not in tables.flushed  # a purge writes no view mailbox row
    assert "p_messages__v_snap" in done.tables_compacted
