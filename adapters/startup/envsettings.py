"""The few settings a read of an embedded store depends on, read from the environment with
the standard library alone (importing pydantic-settings takes longer than a whole read).

``adapters.config.settings.Settings`` stays the one definition of every setting and takes these
fields' defaults from ``DEFAULTS``; ``read_settings`` answers only when the environment
holds nothing it cannot read exactly as ``Settings`` would (no other ``LETTERLOG_``
variable, only valid values), and otherwise returns None: the caller then loads
``Settings``, which validates everything (tests/unit/test_settings.py checks both agree).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PREFIX = "LETTERLOG_"
DEFAULTS: dict[str, str] = {
    "data": "letterlog-data",
    "event_store": "sqlite",
    "table_store": "embedded",
    "durability": "full",
}
CHOICES: dict[str, tuple[str, ...]] = {
    "event_store": ("sqlite", "postgres"),
    "table_store": ("embedded", "hbase"),
    "durability": ("full", "normal"),
}


@dataclass(frozen=True)
class ReadSettings:
    data: Path
    event_store: str
    table_store: str
    durability: str

    @property
    def embedded(self) -> bool:
        """An SQLite log beside the embedded table store, all in ``data``."""
        return self.event_store == "sqlite" and self.table_store == "embedded"


def read_settings(environ: Mapping[str, str] | None = None) -> ReadSettings | None:
    """The ``DEFAULTS`` fields from ``LETTERLOG_<NAME>`` (names in any case, as
    pydantic-settings reads them), or None when ``environ`` holds another ``LETTERLOG_``
    variable, a name twice, or a value ``Settings`` might refuse."""
    values = dict(DEFAULTS)
    seen: set[str] = set()
    for key, value in (os.environ if environ is None else environ).items():
        if not key.upper().startswith(PREFIX):
            continue
        name = key[len(PREFIX):].lower()
        if name not in DEFAULTS or name in seen or not value:
            return None
        if name in CHOICES and value not in CHOICES[name]:
            return None
        seen.add(name)
        values[name] = value
    return ReadSettings(Path(values["data"]), values["event_store"], values["table_store"],
                        values["durability"])
