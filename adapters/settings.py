"""One settings object for every letterlog process (env prefix ``LETTERLOG_``).

Invalid settings fail at start-up with a ``SettingsError`` that names the setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from domain.errors import SettingsError

if TYPE_CHECKING:
    from domain.rfc5322 import MessageLimits


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LETTERLOG_", extra="ignore")

    data: Path = Field(Path("letterlog-data"), description="data directory (embedded stores)")
    event_store: Literal["sqlite", "postgres"] = "sqlite"
    durability: Literal["full", "normal"] = Field(
        "full", description="full: a delivery survives power loss; normal: a process crash"
    )
    postgres_dsn: str | None = Field(None, description="postgresql://user:pw@host:port/db")
    table_store: Literal["embedded", "hbase"] = "embedded"
    hbase_host: str = "127.0.0.1"
    hbase_port: int = Field(9090, ge=1, le=65535)
    hbase_thrift2_port: int | None = Field(None, ge=1, le=65535,
                                           description="Thrift2 port: per-cell timestamps")
    hbase_table_prefix: str = Field("letterlog", pattern=r"^[A-Za-z0-9]{1,40}$")
    kafka_bootstrap: str | None = None
    kafka_topic: str = Field("letterlog-events", pattern=r"^[A-Za-z0-9._-]{1,200}$")
    inline_limit: int = Field(10 * 1024, ge=0, le=1024 * 1024)
    max_message_size: int = Field(50 * 1024 * 1024, ge=1024,
                                  description="bytes; a larger message is rejected")
    # The parse limits: a message beyond one is still stored and extracted byte-exact, only
    # its parse stops there (its facts name the limit: facts.truncated).
    max_header_bytes: int = Field(256 * 1024, ge=1, description="header block bytes parsed")
    max_parts: int = Field(1000, ge=1, description="MIME parts parsed")
    max_depth: int = Field(32, ge=1, le=10_000, description="MIME nesting parsed")
    max_line_length: int = Field(1024 * 1024, ge=1,
                                 description="bytes; the parse stops before a longer line")
    parse_seconds: float = Field(10.0, gt=0, description="time budget of one message's parse")
    deleted_retention_days: float = Field(30.0, ge=0)
    expired_ttl_days: float = Field(30.0, ge=0, description="expired messages purged after")
    incomplete_ttl_days: float = Field(2.0, ge=0, description="unfinished uploads purged after")
    payload_grace_hours: float = Field(12.0, ge=0,
                                       description="an unreferenced payload is kept this long")
    purge_peek_back_minutes: int = Field(60, ge=0, description="buckets re-read before a pointer")
    purge_interval_seconds: float = Field(600.0, gt=0, description="letterlog purger's period")
    purge_threads: int = Field(4, ge=1, le=16, description="shards purged at once per queue")

    def message_limits(self) -> MessageLimits:
        from domain.rfc5322 import MessageLimits

        return MessageLimits(max_size=self.max_message_size,
                             max_header_bytes=self.max_header_bytes, max_parts=self.max_parts,
                             max_depth=self.max_depth, max_line_length=self.max_line_length,
                             parse_seconds=self.parse_seconds)

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        if self.event_store == "postgres" and not self.postgres_dsn:
            raise ValueError("event_store=postgres needs LETTERLOG_POSTGRES_DSN")
        return self


def load_settings(**overrides: object) -> Settings:
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as e:
        parts = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"])
            name = f"LETTERLOG_{loc.upper()}" if loc else "settings"
            parts.append(f"{name}: {str(err['msg']).removeprefix('Value error, ')}")
        raise SettingsError("invalid settings: " + "; ".join(parts)) from None
