"""``letterlog lag``: how far the read side is behind the log, from anywhere.

One snapshot asks each part on its own, each with a time limit (a frozen HBase or Kafka must
not freeze the report): the log's head (the event store), the relay's recorded position and
its lag (``OutboxRelay.lag``), the consumer group's lag per partition as Kafka sees it
(``kafka_lag``: events and seconds), and each projection's tracked position per
partition (the stream table store's ``tracking`` table). A part that does not answer in time
is named in ``problems``; the verdict is one line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from adapters.lifecycle.scaleout import pending_records
from adapters.operations.probing import run_in_thread
from projections import names as n
from projections.tracking import Tracking

__all__ = ["exit_status", "kafka_lag", "render", "snapshot", "wait_until_applied"]


def _ask(what: str, fn: Callable[[], Any], timeout: float, problems: list[str]) -> Any:
    try:
        return run_in_thread(fn, timeout)
    except TimeoutError:
        problems.append(f"{what} not answering (no reply in {timeout:.0f} s)")
    except Exception as error:  # noqa: BLE001 - reported, the other parts still shown
        problems.append(f"{what}: {type(error).__name__}: {error}")
    return None


def kafka_lag(bootstrap: str, topic: str, group: str, *,
              timeout: float = 30.0) -> dict[str, Any]:
    """A consumer group's lag as Kafka sees it (any process can ask; no worker needed):
    per partition ``events`` = end offset - committed offset (from the log start when the
    group never committed), ``seconds`` = age of the oldest record not yet committed
    (its Kafka timestamp; 0 when caught up)."""
    return asyncio.run(asyncio.wait_for(_kafka_lag(bootstrap, topic, group), timeout))


async def _kafka_lag(bootstrap: str, topic: str, group: str) -> dict[str, Any]:
    import aiokafka.admin  # local: embedded lifecycle commands import lag.py, no Kafka

    admin = aiokafka.admin.AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                group_id=None)
    await consumer.start()
    try:
        await consumer.topics()  # fetches the cluster's metadata
        numbers = consumer.partitions_for_topic(topic) or set()
        tps = [aiokafka.TopicPartition(topic, p) for p in sorted(numbers)]
        ends = await consumer.end_offsets(tps) if tps else {}
        starts = await consumer.beginning_offsets(tps) if tps else {}
        parts: dict[str, dict[str, Any]] = {}
        now = time.time()
        for tp in tps:
            found = committed.get(tp)
            done = found.offset if found is not None and found.offset >= 0 else None
            events = ends[tp] - (done if done is not None else starts[tp])
            seconds = 0.0
            if events > 0:
                consumer.assign([tp])
                consumer.seek(tp, done if done is not None else starts[tp])
                fetched = await consumer.getmany(tp, timeout_ms=5000, max_records=1)
                for message in fetched.get(tp, [])[:1]:
                    seconds = max(0.0, now - message.timestamp / 1000)
            parts[f"{topic}/{tp.partition}"] = {"end": ends[tp], "committed": done,
                                                "events": events, "seconds": round(seconds, 3)}
    finally:
        await consumer.stop()
    return {"group": group, "topic": topic,
            "events": sum(p["events"] for p in parts.values()),
            "seconds": max((p["seconds"] for p in parts.values()), default=0.0),
            "partitions": parts}


class Parts(Protocol):
    """What lag needs built (``adapters.bootstrap`` is one): the entry point hands it over."""

    def event_log(self, settings: Any) -> Any: ...

    def relay(self, settings: Any, log: Any = None, **options: Any) -> Any: ...

    def stream_tables(self, settings: Any) -> Any: ...


def _log_and_relay(settings: Any, parts: Parts) -> dict[str, Any]:
    log = parts.event_log(settings)
    try:
        head = int(log.recorder.max_notification_id() or 0)
        if not settings.kafka_bootstrap:
            return {"head": head, "relay": None}
        relay = parts.relay(settings, log=log)
        try:
            position = relay.position.load()
            events, seconds = relay.lag()
        finally:
            relay.position.release()  # its database connection, if it opened one
        return {"head": head, "relay": {"position": position, "events": events,
                                        "seconds": round(seconds, 3)}}
    finally:
        log.close()


def _tracking(settings: Any, parts: Parts) -> tuple[dict[str, dict[str, int]], int]:
    """Each projection's tracked position per partition, and how many dead letters are open
    (records the workers set aside: the read side lacks their events until a redrive)."""
    store = parts.stream_tables(settings)
    try:
        dead = 0
        if store.table_exists(n.DEAD_LETTERS):
            dead = sum(1 for _ in store.scan(n.DEAD_LETTERS, columns=[n.DL_TIMES]))
        if not store.table_exists(n.TRACKING):
            return {}, dead
        return Tracking(store).by_partition(), dead
    finally:
        store.close()


def snapshot(settings: Any, group: str, parts: Parts, timeout: float = 5.0) -> dict[str, Any]:
    """Everything ``letterlog lag`` shows, as a dict (see the module docstring); ``parts``
    builds the log, the relay and the table store (``adapters.bootstrap``)."""
    problems: list[str] = []
    started = time.monotonic()
    log = _ask("event store", lambda: _log_and_relay(settings, parts), timeout, problems) or {}
    kafka = None
    if settings.kafka_bootstrap:
        kafka = _ask("kafka", lambda: kafka_lag(settings.kafka_bootstrap, settings.kafka_topic,
                                                group, timeout=timeout), timeout + 1, problems)
    store = "hbase" if settings.table_store == "hbase" else "stream table store"
    tracked, dead = (_ask(store, lambda: _tracking(settings, parts), timeout, problems)
                     or (None, None))
    report = {"at": datetime.now(UTC).isoformat(timespec="seconds"),
              "log_head": log.get("head"), "relay": log.get("relay"), "kafka": kafka,
              "projections": tracked, "dead_letters": dead, "problems": problems,
              "erasures_pending": _erasures_pending(settings),
              "seconds_to_ask": round(time.monotonic() - started, 2)}
    report["verdict"] = verdict(report)
    return report


def _erasures_pending(settings: Any) -> dict[str, Any]:
    """The scale-out erasures that ``letterlog erase complete`` has not finished yet: how
    many, and the log position the read side must reach for all of them."""
    records = [r for _, r in pending_records(settings).records()]
    return {"count": len(records),
            "position": max((int(r["position"]) for r in records), default=None)}


def verdict(report: dict[str, Any]) -> str:
    """One line: ``caught up``, ``behind``, ``unknown`` (a part did not answer), and the
    dead letters open, if any (``caught up, 3 dead letters open: ...``)."""
    relay, kafka = report["relay"], report["kafka"]
    dead = report.get("dead_letters") or 0
    letters = (f"{dead} dead letter{'s' if dead != 1 else ''} open (`letterlog dead-letters "
               "list`)") if dead else ""
    if report["problems"]:
        return "unknown: " + "; ".join(report["problems"] + ([letters] if letters else []))
    if relay is None or kafka is None:
        return ("no scale-out path configured (LETTERLOG_KAFKA_BOOTSTRAP is not set)"
                + (f"; {letters}" if letters else ""))
    behind = []
    if relay["events"]:
        behind.append(f"the relay {relay['events']} events ({relay['seconds']:.1f} s)")
    if kafka["events"]:
        behind.append(f"the workers {kafka['events']} events ({kafka['seconds']:.1f} s)")
    if not behind:
        if dead:
            return (f"caught up, {letters}: the read side has every event up to position "
                    f"{report['log_head']} but the {dead} set aside")
        return f"caught up: the read side has every event up to position {report['log_head']}"
    return "behind: " + ", ".join(behind) + (f"; {letters}" if letters else "")


EXIT_BEHIND = 3
EXIT_UNKNOWN = 1


def exit_status(verdict: str) -> int:
    """``letterlog lag``'s exit status for its verdict (docs/operations.md): 0 caught up
    (dead letters aside) or no scale-out path, 3 behind, 1 unknown (a part did not answer:
    the machine, as the CLI's other status 1)."""
    if verdict.startswith("unknown"):
        return EXIT_UNKNOWN
    if verdict.startswith("behind"):
        return EXIT_BEHIND
    return 0


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
    if report.get("dead_letters"):
        lines.append(f"dead letters  {report['dead_letters']} open")
    pending = report.get("erasures_pending") or {}
    if pending.get("count"):
        lines.append(f"erasures      {pending['count']} pending completion (up to position "
                     f"{pending['position']}): `letterlog erase complete`")
    lines.append(f"verdict: {report['verdict']}")
    return lines


# -- waiting for the read side (`letterlog erase complete` on scale-out) ---------------------
def relay_position(settings: Any, log: Any, parts: Parts) -> int:
    """The log position up to which the relay has published (its recorded position)."""
    relay = parts.relay(settings, log=log)
    try:
        return int(relay.position.load())
    finally:
        relay.position.release()


def wait_until_applied(settings: Any, log: Any, target: int, *, parts: Parts, deadline: float,
                       progress: Callable[[str], None]) -> str:
    """Waits until the relay has published up to ``target`` and then the workers' consumer
    group has committed every record Kafka held at that moment (a worker commits a record
    only after its cells and tracking are written). '' when reached, else why not."""
    if not settings.kafka_bootstrap:
        return "LETTERLOG_KAFKA_BOOTSTRAP is not set: no relay and workers to wait for"
    said = 0.0
    while True:
        published = relay_position(settings, log, parts)
        if published >= target:
            break
        if time.monotonic() >= deadline:
            return (f"the relay has published up to position {published}, not yet {target} "
                    "(is `letterlog relay` running?)")
        if time.monotonic() - said >= 2.0:
            progress(f"waiting for the relay: position {published} of {target}")
            said = time.monotonic()
        time.sleep(0.5)  # a position in a file or a table: nothing to wait on
    group, topic = settings.stream.group, settings.kafka_topic
    ends = {name: p["end"] for name, p in
            kafka_lag(settings.kafka_bootstrap, topic, group)["partitions"].items()}
    while True:
        partitions = kafka_lag(settings.kafka_bootstrap, topic, group)["partitions"]
        behind = sum(max(0, end - (partitions.get(name, {}).get("committed") or 0))
                     for name, end in ends.items() if end)
        if behind == 0:
            return ""
        if time.monotonic() >= deadline:
            return (f"the workers (group {group}) are {behind} events behind position "
                    f"{target} (are `letterlog worker`s running? `letterlog lag`)")
        if time.monotonic() - said >= 2.0:
            progress(f"waiting for the workers: {behind} events behind position {target}")
            said = time.monotonic()
        time.sleep(0.5)
