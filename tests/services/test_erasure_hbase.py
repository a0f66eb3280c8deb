"""The erasure test on HBase: after a purge, no byte of a purged message is left anywhere
under HBase's root directory (store files, their archive, write-ahead logs), once the purge
has flushed and major-compacted the tables it deleted from and the region server has rolled
and cleaned its write-ahead logs on the schedule ``ERASURE_SITE`` sets (the settings
docs/lifecycle.md names; HBase's defaults stretch this to about an hour).

A server of its own: the shorter schedules must not change the other tests' server."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from adapters.tables.hbase import HBaseTableStore
from devtools.devservers import HBaseServer
from projections import names as pn
from tests.erasure_support import deliver_marked, files_holding
from tests.services.servers import _fixture
from tests.services.support import ERASURE_SITE, project_into

pytestmark = pytest.mark.services

DEADLINE_S = 240.0


@pytest.fixture(scope="module")
def erasure_hbase() -> Iterator[HBaseServer]:
    yield from _fixture("hbase-erasure", lambda: HBaseServer(extra_site=ERASURE_SITE))  # type: ignore[misc]


@pytest.fixture
def store(tmp_path: Path, erasure_hbase: Any) -> Iterator[Letterlog]:
    """An embedded log whose read models are kept in the server's HBase tables (as the
    stream workers keep them), written through the Thrift2 gateway (flush needs it)."""
    assert erasure_hbase.thrift2_port, "the dev server starts a Thrift2 gateway"
    store = Letterlog.open(tmp_path / "data")
    project_into(store, HBaseTableStore(erasure_hbase.thrift_host, erasure_hbase.thrift_port,
                                        thrift2_port=erasure_hbase.thrift2_port,
                                        table_prefix=f"erase{secrets.token_hex(4)}"))
    try:
        yield store
    finally:
        store.close()


def wait_until_clean(root: Path, markers: list[bytes]) -> dict[str, list[bytes]]:
    """The files under ``root`` still holding a marker, polled until none or the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        left = files_holding(root, markers)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1.0)  # polling files for a background cleaner; no event to wait on


def test_a_purged_message_leaves_nothing_in_hbase_root_directory(store, erasure_hbase):
    root = Path(erasure_hbase.workdir) / "data" / "hbase"
    ids, markers = deliver_marked(store)
    tables = store.projections.tables
    assert tables.flush([store.projections.physical(pn.MESSAGES)])
    held = files_holding(root, markers)
    assert held, "the read model's rows (envelope: subject, From) are in HBase's files"
    for message_id in ids:
        store.erase_message(message_id)  # purge now: rows deleted, flushed, compacted
    assert store.show(ids[0])["envelope"] == {}

    left = wait_until_clean(root, markers)
    assert left == {}, f"still holding a purged message's bytes after {DEADLINE_S} s: {left}"



def test_an_erasure_deletes_a_saved_views_rows_in_hbase(store, erasure_hbase):
    """A view saved into HBase (tables of its own) holds the message's envelope; the erasure
    deletes the view's rows and counts there at once, and the view still reads. (Its store
    files lose them when the view's tables are major-compacted, as the live tables' do:
    ``erased_view_tables`` names them for that.)"""
    from adapters.readside.views import erased_view_tables
    from tests.erasure_support import ACCOUNT, marked_mail

    root = Path(erasure_hbase.workdir) / "data" / "hbase"
    raw, markers = marked_mail("h", attachment=True)
    markers = [markers[0], markers[1], markers[3]]  # subject, From, attachment name: the rows'
    erased = store.deliver(account=ACCOUNT, raw=raw, labels=["work"])
    store.build_view("snap", None, store.max_position())
    tables = store.projections.tables
    assert tables.flush(["messages__v_snap"])
    assert any("messages__v_snap" in name for name in files_holding(root, markers))
    view = store.reading(view="snap")
    assert [m.message_id for m in view.messages(ACCOUNT, "INBOX")] == [erased.message_id]
    store.erase_message(erased.message_id)
    view = store.reading(view="snap")
    assert view.messages(ACCOUNT, "INBOX") == [] and view.label_messages(ACCOUNT, "work") == []
    assert view.counters(ACCOUNT)["mailboxes"]["INBOX"]["messages"] == 0
    fresh = HBaseTableStore(erasure_hbase.thrift_host, erasure_hbase.thrift_port,
                            table_prefix=tables.table_prefix)
    try:  # what another client of the server reads: no cell of the view's rows is left
        assert list(fresh.scan("messages__v_snap")) == []
        assert list(fresh.scan("threads__v_snap")) == []
    finally:
        fresh.close()
    assert {"messages__v_snap", "label_index__v_snap", "counters__v_snap"} <= set(
        erased_view_tables(tables))
