"""Settings on the driver and in the executors.

The driver reads ``LETTERLOG_`` variables (``adapters.config.settings``) and ships them with the job
as plain JSON (``to_wire``); an executor rebuilds the same ``Settings`` from it, so a
cluster's executors need no environment of their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.bootstrap.spark import Settings, event_log, read_model_tables


def to_wire(settings: Settings) -> dict[str, Any]:
    wire = settings.model_dump(mode="json")
    wire["data"] = str(Path(settings.data).resolve())
    return wire


def from_wire(wire: dict[str, Any]) -> Settings:
    return Settings(**wire)


def open_event_log(wire: dict[str, Any]) -> Any:
    """The event log (an eventsourcing application) the settings name."""
    return event_log(from_wire(wire))


def open_tables(wire: dict[str, Any]) -> Any:
    """The table store the settings name: HBase, or the embedded ``tables.sqlite``."""
    return read_model_tables(from_wire(wire))
