"""Stream workers follow the catalog on real HBase (the table store the workers write in
production): the scenarios of tests/unit/test_stream_catalog.py through happybase."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from tests.stream_support import (
    follows_a_switch,
    repairs_a_handover_gap,
    stops_at_a_handover_gap,
)

pytestmark = pytest.mark.services


@pytest.fixture
def hbase_tables(hbase_server: Any) -> Iterator[Any]:
    from adapters.tables.hbase import HBaseTableStore

    store = HBaseTableStore(hbase_server.thrift_host, hbase_server.thrift_port,
                            table_prefix=f"cat{secrets.token_hex(4)}")
    try:
        yield store
    finally:
        for table in store.list_tables():
            store.drop_table(table)
        store.close()


def test_a_running_worker_writes_the_tables_a_rebuild_switched_in_on_hbase(hbase_tables):
    follows_a_switch(hbase_tables, restarted=False)


def test_a_partition_past_the_switch_position_stops_until_a_rebuild_covers_it_on_hbase(
        hbase_tables):
    stops_at_a_handover_gap(hbase_tables)


def test_a_worker_given_the_log_replays_a_handover_gap_once_on_hbase(hbase_tables):
    repairs_a_handover_gap(hbase_tables)
