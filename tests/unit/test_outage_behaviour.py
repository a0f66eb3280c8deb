"""What the long-running processes do while a server is down, without the servers: the stall's
reminders, the rate limit on the client libraries' lines, the jittered backoff, the purger
that waits an outage out (and exits on a mistake), the supervisord configuration of
letterlog's processes, and ``lag``'s verdict with dead letters open. The real outages are in
tests/services/test_outages.py."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from adapters.lifecycle.scheduled import run_purger
from adapters.operations.outages import dependency_of
from adapters.operations.supervision import write_config
from adapters.streaming.lag import verdict
from adapters.streaming.processes import programs
from adapters.streaming.telemetry import LibraryRateLimit, Stall, backoff_wait
from domain.errors import SettingsError, StoreUnavailable
from projections.tablestore import TableStoreUnavailable


class Lines:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))

    def warning(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))


def test_a_stall_reminds_at_a_bounded_rate_while_it_lasts(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("adapters.streaming.telemetry.time.monotonic", lambda: now[0])
    log = Lines()
    stall = Stall("kafka", log, after=5.0, remind_every=60.0)
    for _ in range(600):  # ten minutes of failures, ten a second
        stall.failed(ConnectionError("refused"))
        now[0] += 1.0
    stall.ok()
    events = [e for e, _ in log.lines]
    assert events[0] == "kafka not answering"
    assert events[1:-1] == ["kafka still not answering"] * 9
    assert events[-1] == "kafka answering again"


def record(name: str, msg: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, ("127.0.0.1", 9092), None)


def test_library_lines_are_rate_limited_per_message_and_ours_never():
    now = [0.0]
    limit = LibraryRateLimit(window=60.0, clock=lambda: now[0])
    passed = []
    for _ in range(1000):  # aiokafka reconnecting ten times a second for 100 s
        r = record("aiokafka", 'Unable connect to "%s:%s"')
        if limit.filter(r):
            passed.append(r.getMessage())
        now[0] += 0.1
    assert len(passed) == 2
    assert "[599 more like it in the last 60 s]" in passed[1]
    assert all(limit.filter(record("letterlog.relay", "progress")) for _ in range(100))
    assert limit.filter(record("aiokafka.conn", "another message"))


def test_backoff_grows_with_jitter_and_stays_under_its_cap():
    from types import SimpleNamespace

    waits = []
    for _ in range(20):
        wait = backoff_wait(0.2, 30.0)  # tenacity's wait, as the relay and the purger use it
        waits.append([wait(SimpleNamespace(attempt_number=n)) for n in range(1, 13)])
    assert all(0.2 <= w <= 30.0 for row in waits for w in row)
    assert len({row[-1] for row in waits}) > 1  # not in step
    assert max(row[0] for row in waits) <= 0.4 and max(row[-1] for row in waits) > 10


class FlakyStore:
    """A store whose purge fails like a server that is down, ``failures`` times."""

    def __init__(self, failures: list[BaseException], stop: threading.Event) -> None:
        self.failures = failures
        self.stop = stop
        self.runs = 0
        self.settings = type("S", (), {"table_store": "hbase", "purge_interval_seconds": 0})()
        self.completion = None

    def purge(self, now: Any, queues: Any) -> Any:
        if self.failures:
            raise self.failures.pop(0)
        self.runs += 1
        self.stop.set()
        report = dict.fromkeys(("purged", "expired", "kept", "payloads_freed",
                                "payload_bytes_freed"), 0)
        return type("R", (), {"as_dict": lambda self: report})()

    def close(self) -> None:
        pass


def test_the_purger_waits_out_an_outage_and_says_so_once(tmp_path: Path, caplog):
    import psycopg

    stop = threading.Event()
    down = psycopg.OperationalError("connection refused")
    failures: list[BaseException] = [down] * 3 + [TableStoreUnavailable("HBase ...")] * 3
    opened: list[FlakyStore] = []

    def open_store(data: Path) -> FlakyStore:
        if len(opened) == 1 and failures and isinstance(failures[0], psycopg.Error):
            raise failures.pop(0)  # the log's database refuses the connection too
        opened.append(FlakyStore(failures, stop))
        return opened[-1]

    with caplog.at_level(logging.INFO, logger="letterlog.purger"):
        run_purger(tmp_path, None, None, stop, open_store=open_store, first_backoff=0.01,
                   max_backoff=0.02)
    assert not failures and opened[-1].runs == 1 and len(opened) > 1
    text = caplog.text
    assert "purge run: purged=0" in text and "purger stopped" in text
    assert "Traceback" not in text


def test_a_purger_stalled_for_long_warns_and_says_when_the_server_is_back(
        tmp_path: Path, caplog, monkeypatch):
    stop = threading.Event()
    now = [0.0]
    monkeypatch.setattr("adapters.streaming.telemetry.time.monotonic", lambda: now[0])
    monkeypatch.setattr("adapters.lifecycle.scheduled.time.monotonic", lambda: now[0])
    failures: list[BaseException] = [TableStoreUnavailable("HBase Thrift server at x:1 is "
                                                           "not answering")] * 5

    class Clocked(FlakyStore):
        def purge(self, when: Any, queues: Any) -> Any:
            now[0] += 3.0  # each failed run hangs 3 s
            return super().purge(when, queues)

    with caplog.at_level(logging.INFO, logger="letterlog.purger"):
        run_purger(tmp_path, None, None, stop, open_store=lambda d: Clocked(failures, stop),
                   first_backoff=0.001, max_backoff=0.002)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert warnings[0].startswith("hbase not answering")
    assert warnings[1].startswith("hbase answering again")


def test_the_purger_exits_on_a_mistake_no_retry_fixes(tmp_path: Path):
    def open_store(data: Path) -> Any:
        raise SettingsError("LETTERLOG_POSTGRES_DSN: missing")

    with pytest.raises(SettingsError):
        run_purger(tmp_path, None, None, threading.Event(), open_store=open_store)



class Waits(threading.Event):
    """A stop event whose waits are recorded and do not block (what tenacity sleeps on)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        return self.is_set()


def test_the_purger_retries_with_growing_capped_waits_and_stops_when_told(tmp_path: Path):
    stop = Waits()
    opened: list[Any] = []

    class Down(FlakyStore):
        closed = False

        def purge(self, now: Any, queues: Any) -> Any:
            if len(opened) == 6:
                stop.set()  # told to stop in the middle of an outage
            raise TableStoreUnavailable("HBase Thrift server at x:1 is not answering")

        def close(self) -> None:
            self.closed = True

    def open_store(data: Path) -> Down:
        opened.append(Down([], stop))
        return opened[-1]

    run_purger(tmp_path, None, None, stop, open_store=open_store, first_backoff=0.5,
               max_backoff=2.0)  # returns: an outage never ends the purger, stop does
    assert len(opened) == 6 and all(s.closed for s in opened)  # no attempt after stop
    assert len(stop.waits) == 5  # one wait between two attempts, none after the last
    bounds = [min(2.0, 0.5 * 2 ** i) for i in range(5)]
    assert all(0.5 <= w <= b for w, b in zip(stop.waits, bounds, strict=True))


def test_the_purger_never_retries_a_mistake_and_raises_it_as_it_is(tmp_path: Path):
    stop, opened = Waits(), []

    def open_store(data: Path) -> Any:
        opened.append(data)
        raise StoreUnavailable(f"{data}: no store here")

    with pytest.raises(StoreUnavailable, match="no store here"):
        run_purger(tmp_path, None, None, stop, open_store=open_store)
    assert opened == [tmp_path] and stop.waits == []


def _relay(passes: list[Any], stop: threading.Event) -> Any:
    """An outbox relay whose passes over the log are ``passes`` (a count, or an error to
    raise), without Kafka or a log; it records each producer it closes."""
    from adapters.streaming.relay import OutboxRelay

    class Relay(OutboxRelay):
        stopped_producers = 0

        def _pump(self, max_events: Any, stop_event: Any) -> int:
            step = passes.pop(0)
            if not passes:
                stop.set()
            if isinstance(step, BaseException):
                raise step
            return int(step)

        def _check_broker(self) -> None:
            pass

        def _stop_producer(self) -> None:
            self.stopped_producers += 1

        def _reporting(self, *args: Any) -> None:
            pass

    return Relay(lambda start, limit: [], "kafka:9092", "t", position=None)  # type: ignore[arg-type]


def test_the_relay_retries_an_outage_with_growing_capped_waits_then_resumes():
    from aiokafka.errors import KafkaConnectionError

    stop = Waits()
    passes: list[Any] = [KafkaConnectionError("down")] * 4 + [3, 0]
    relay = _relay(passes, stop)
    relay.run(stop, poll_interval=0.25, max_backoff=1.0, report_every=3600)
    assert passes == [] and relay.stopped_producers == 4  # closed after each failed pass
    retries, idle = stop.waits[:4], stop.waits[4:]
    bounds = [min(1.0, 0.25 * 2 ** i) for i in range(4)]
    assert all(0.25 <= w <= b for w, b in zip(retries, bounds, strict=True))
    assert idle == [0.25]  # the pass that found nothing waits the poll interval, not more


def test_the_relay_stops_in_an_outage_when_told_and_raises_what_no_retry_fixes():
    from aiokafka.errors import KafkaConnectionError

    from adapters.streaming.relay import RelayError

    stop = Waits()
    relay = _relay([KafkaConnectionError("down")] * 3, stop)
    relay.run(stop, poll_interval=0.01, report_every=3600)  # returns: stop ends the retries
    assert relay.stopped_producers == 3 and len(stop.waits) == 2

    stop = Waits()
    relay = _relay([RelayError("topic cannot be created"), 1], stop)
    with pytest.raises(RelayError, match="cannot be created"):
        relay.run(stop, poll_interval=0.01, report_every=3600)
    assert relay.stopped_producers == 0 and stop.waits == []

def test_which_server_a_failure_names():
    import psycopg

    assert dependency_of(psycopg.OperationalError("x")) == "the event store"
    assert dependency_of(TableStoreUnavailable("x")) == "hbase"
    assert dependency_of(TableStoreUnavailable("x"), "embedded") == "the table store"
    assert dependency_of(RuntimeError("x")) == "the purge run"


def test_letterlogs_processes_are_never_given_up_on_and_their_logs_rotate(tmp_path: Path):
    conf = write_config(tmp_path / "sup", programs(tmp_path, workers=2), autostart=True)
    text = conf.read_text()
    sections = text.split("[program:")[1:]
    assert len(sections) == 4
    for section in sections:
        assert "startretries=1000000" in section
        assert "stdout_logfile_maxbytes=10485760" in section
        assert "stdout_logfile_backups=5" in section


def test_the_verdict_counts_open_dead_letters():
    report = {"log_head": 10, "relay": {"position": 10, "events": 0, "seconds": 0.0},
              "kafka": {"group": "g", "events": 0, "seconds": 0.0, "partitions": {}},
              "projections": {}, "problems": [], "dead_letters": 3}
    assert verdict(report).startswith("caught up, 3 dead letters open")
    report["dead_letters"] = 1
    assert verdict(report).startswith("caught up, 1 dead letter open")
    report["kafka"]["events"] = 2
    assert verdict(report).startswith("behind: the workers 2 events")
    assert verdict(report).endswith("1 dead letter open (`letterlog dead-letters list`)")
    report["dead_letters"] = 0
    assert "dead letter" not in verdict(report)


def test_a_key_store_that_does_not_answer_is_no_reason_to_call_an_event_corrupt():
    import psycopg

    from adapters.eventlog.records import _unavailable

    try:
        try:
            raise psycopg.OperationalError("the connection is closed")
        except psycopg.OperationalError as error:
            raise LookupError("no key") from error
    except LookupError as wrapped:
        assert _unavailable(wrapped)
    assert not _unavailable(ValueError("bad msgpack"))
