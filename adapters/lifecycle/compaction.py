"""HBase's files rid of what the stream workers deleted: the tables flushed, then
major-compacted with HBase's own ``MajorCompactor`` tool (``major_compact``), which requests
the compaction region by region and waits until no store file older than the request is
left (Thrift1's ``majorCompact`` only requests a minor compaction on HBase 2.6)."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from typing import Any

from adapters.payloads.hbase import TABLE as PAYLOADS
from adapters.readside.views import erased_view_tables
from projections import names as pn

Progress = Callable[[str], None]


class CompactionFailed(RuntimeError):
    """HBase's major compaction did not finish (the tool failed or timed out)."""


def major_compact(command: str, tables: list[str], *, deadline: float,
                  progress: Progress) -> None:
    """Major-compacts the HBase tables with HBase's ``MajorCompactor`` tool (``command``: how
    to run it, e.g. ``hbase org.apache.hadoop.hbase.util.compaction.MajorCompactor``), one
    process per table, all at once: every store holding a file older than the request is
    compacted region by region; the tool then waits for the region server to discharge the
    compacted files (``hbase.hfile.compaction.discharger.interval``, 2 min by default),
    checks that no older file is left, and exits 0. ``CompactionFailed`` if one fails or the
    deadline passes."""
    base = shlex.split(command)
    since = str(int(time.time() * 1000))
    progress(f"major-compacting {len(tables)} tables: {', '.join(tables)}")
    running: dict[str, subprocess.Popen[str]] = {}
    try:
        for table in tables:
            try:
                running[table] = subprocess.Popen(
                    [*base, "-table", table, "-servers", "1", "-sleep", "1000",
                     "-minModTime", since],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            except OSError as error:
                raise CompactionFailed(f"cannot run {base[0]!r} (LETTERLOG_HBASE_COMPACTOR): "
                                       f"{error.strerror}") from None
        for table, proc in running.items():
            try:
                _, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise CompactionFailed(f"compacting {table} did not finish in time") from None
            if proc.returncode != 0:
                tail = " | ".join((err or "").strip().splitlines()[-3:])
                raise CompactionFailed(f"compacting {table}: exit {proc.returncode}: {tail}")
            progress(f"compacted {table}")
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def purged_tables(settings: Any, host: Any) -> list[str]:
    """The tables a purge deletes from (``host``: the read models), the saved views (they
    lost the purged rows at the erasure: ``Shredding.erase_from_views``), and HBase's
    payload table when payloads are there (created on first use)."""
    names = [host.physical(t) for t in pn.PURGED_FROM] + erased_view_tables(host.tables)
    if settings.payloads_in_hbase() and host.tables.table_exists(PAYLOADS):
        names.append(PAYLOADS)  # the payloads deleted by the completion, and by purge runs
    return names


def flush_and_compact(settings: Any, tables: Any, names: list[str], deadline: float,
                      progress: Progress) -> list[str]:
    """``names`` flushed through the Thrift2 gateway, then major-compacted; their names in
    HBase. ``CompactionFailed`` if either cannot be done by ``deadline``."""
    progress(f"flushing {len(names)} tables")
    if not tables.flush(names):
        raise CompactionFailed("no Thrift2 gateway (LETTERLOG_HBASE_THRIFT2_PORT): the "
                               "memstores holding the deletes cannot be flushed")
    hbase_names = [tables.physical_name(name) for name in names]
    major_compact(settings.hbase_compactor, hbase_names, deadline=deadline, progress=progress)
    return hbase_names
