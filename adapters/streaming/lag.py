"""``letterlog lag``: how far the read side is behind the log, from anywhere.

One snapshot asks each part on its own, each with a time limit (a frozen HBase or Kafka must
not freeze the report): the log's head (the event store), the relay's recorded position and
its lag (``OutboxRelay.lag``), the consumer group's lag per partition as Kafka sees it
(``worker.kafka_lag``: events and seconds), and each projection's tracked position per
partition (the stream table store's ``tracking`` table). A part that does not answer in time
is named in ``problems``; the verdict is one line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from adapters.probing import run_in_thread
from projections import names as n

__all__ = ["render", "snapshot"]


def _ask(what: str, fn: Callable[[], Any], timeout: float, problems: list[str]) -> Any:
    try:
        return run_in_thread(fn, timeout)
    except TimeoutError:
        problems.append(f"{what} not answering (no reply in {timeout:.0f} s)")
    except Exception as error:  # noqa: BLE001 - reported, the other parts still shown
        problems.append(f"{what}: {type(error).__name__}: {error}")
    return None


def _log_and_relay(settings: Any) -> dict[str, Any]:
    from adapters.bootstrap import event_log
    from adapters.bootstrap import relay as make_relay

    log = event_log(settings)
    try:
        head = int(log.recorder.max_notification_id() or 0)
        if not settings.kafka_bootstrap:
            return {"head": head, "relay": None}
        relay = make_relay(settings, log=log)
        try:
            position = relay.position.load()
            events, seconds = relay.lag()
        finally:
            relay.position.release()  # its database connection, if it opened one
        return {"head": head, "relay": {"position": position, "events": events,
                                        "seconds": round(seconds, 3)}}
    finally:
        log.close()


def _tracking(settings: Any) -> dict[str, dict[str, int]]:
    from adapters.bootstrap import stream_tables

    store = stream_tables(settings)
    try:
        if not store.table_exists(n.TRACKING):
            return {}
        found: dict[str, dict[str, int]] = {}
        for row, cells in store.scan(n.TRACKING, columns=[n.TR_POSITION]):
            name, _, partition = row.decode().partition("@")
            if partition:
                found.setdefault(name, {})[partition] = int(cells[n.TR_POSITION])
        return found
    finally:
        store.close()


def snapshot(settings: Any, group: str, timeout: float = 5.0) -> dict[str, Any]:
    """Everything ``letterlog lag`` shows, as a dict (see the module docstring)."""
    from adapters.streaming.worker import kafka_lag

    problems: list[str] = []
    started = time.monotonic()
    log = _ask("event store", lambda: _log_and_relay(settings), timeout, problems) or {}
    kafka = None
    if settings.kafka_bootstrap:
        kafka = _ask("kafka", lambda: kafka_lag(settings.kafka_bootstrap, settings.kafka_topic,
                                                group, timeout=timeout), timeout + 1, problems)
    store = "hbase" if settings.table_store == "hbase" else "stream table store"
    tracked = _ask(store, lambda: _tracking(settings), timeout, problems)
    report = {"at": datetime.now(UTC).isoformat(timespec="seconds"),
              "log_head": log.get("head"), "relay": log.get("relay"), "kafka": kafka,
              "projections": tracked, "problems": problems,
              "seconds_to_ask": round(time.monotonic() - started, 2)}
    report["verdict"] = verdict(report)
    return report


def verdict(report: dict[str, Any]) -> str:
    relay, kafka = report["relay"], report["kafka"]
    if report["problems"]:
        return "unknown: " + "; ".join(report["problems"])
    if relay is None or kafka is None:
        return "no scale-out path configured (LETTERLOG_KAFKA_BOOTSTRAP is not set)"
    behind = []
    if relay["events"]:
        behind.append(f"the relay {relay['events']} events ({relay['seconds']:.1f} s)")
    if kafka["events"]:
        behind.append(f"the workers {kafka['events']} events ({kafka['seconds']:.1f} s)")
    if not behind:
        return f"caught up: the read side has every event up to position {report['log_head']}"
    return "behind: " + ", ".join(behind)


def render(report: dict[str, Any]) -> list[str]:
    """The report as text lines."""
    lines = [f"log head      {report['log_head'] if report['log_head'] is not None else '?'}"]
    relay = report["relay"]
    if relay is not None:
        lines.append(f"relay         position {relay['position']}, behind {relay['events']} "
                     f"events, {relay['seconds']:.1f} s")
    kafka = report["kafka"]
    if kafka is not None:
        lines.append(f"consumers     group {kafka['group']}: {kafka['events']} events, "
                     f"{kafka['seconds']:.1f} s")
        for name, p in kafka["partitions"].items():
            lines.append(f"  {name:22} end {p['end']:<8} committed "
                         f"{p['committed'] if p['committed'] is not None else '-':<8} "
                         f"lag {p['events']} events, {p['seconds']:.1f} s")
    for name, parts in sorted((report["projections"] or {}).items()):
        where = "  ".join(f"{k}@{v}" for k, v in sorted(parts.items()))
        lines.append(f"projection    {name:14} {where}")
    lines.append(f"verdict: {report['verdict']}")
    return lines
