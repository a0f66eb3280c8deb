"""The scale-out processes' door: the parts a stream worker (``letterlog worker``), the
outbox relay (``letterlog relay``) and ``letterlog lag`` are built from: the event log and
its keys, the tables the stream workers write, and the relay (``streaming``'s Protocols
``WorkerParts`` and ``Parts`` name what they take from this module)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.bootstrap.eventstore import event_log, key_store
from adapters.bootstrap.tables import stream_tables
from adapters.config.settings import Settings
from domain.errors import SettingsError

if TYPE_CHECKING:
    from adapters.streaming.relay import OutboxRelay

__all__ = ["event_log", "key_store", "relay", "stream_tables"]


def relay(settings: Settings, log: Any = None, **options: Any) -> OutboxRelay:
    """The outbox relay for ``settings``: Kafka bootstrap and topic, and the event store's
    log (``log``: an opened ``MailLog`` or ``Letterlog``; opened here when None, and closed
    with the relay). The position lives in the event store's database for PostgreSQL and in
    ``<data>/relay-<topic>.position`` for SQLite."""
    from adapters.streaming import relay as r  # local: Kafka's clients: not for a purge or lag

    if not settings.kafka_bootstrap:
        raise SettingsError("LETTERLOG_KAFKA_BOOTSTRAP: the relay needs the Kafka "
                            "bootstrap address (host:port)")
    on_close = None
    if log is None:
        log = event_log(settings)
        on_close = log.close
    recorder = log.recorder if hasattr(log, "recorder") else log.log.recorder

    def read(start: int, limit: int) -> list[Any]:
        return list(recorder.select_notifications(start=start, limit=limit))

    position: r.RelayPosition
    if settings.event_store == "postgres":
        position = r.PostgresPosition(settings.postgres_dsn or "", f"kafka:{settings.kafka_topic}")
    else:
        position = r.FilePosition(Path(settings.data) / f"relay-{settings.kafka_topic}.position")
    options.setdefault("partitions", getattr(settings, "kafka_partitions", None)
                       or r.DEFAULT_PARTITIONS)
    return r.OutboxRelay(read, settings.kafka_bootstrap, settings.kafka_topic, position,
                       head=recorder.max_notification_id, on_close=on_close, **options)
