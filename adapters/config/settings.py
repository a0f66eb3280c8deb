"""One settings object for every letterlog process (env prefix ``LETTERLOG_``).

``Settings`` holds the store's settings (``LETTERLOG_DATA``, ``LETTERLOG_EVENT_STORE``, ...)
and, under ``stream``, how a stream worker consumes (``LETTERLOG_STREAM_<NAME>``, e.g.
``LETTERLOG_STREAM_BATCH``). ``adapters.bootstrap`` builds every process's parts from it.
Invalid settings fail at start-up with a ``SettingsError`` that names the variable.

The environment is read by pydantic-settings (prefix, names in any case,
``LETTERLOG_STREAM_<FIELD>`` or a JSON ``LETTERLOG_STREAM`` for the nested options, other
variables ignored). Importing it costs a command started without the command server about
40-55 ms of CPU (measured); with the server running (``letterlog server start``, ADR 0032)
commands start forked from a process that imported it once. The fast read path
(``adapters.startup.current``) reads its four settings with ``adapters.startup.envsettings`` and
is held to these settings by tests/unit/test_settings.py.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as EnvironmentUnreadable

from adapters.startup.envsettings import DEFAULTS, PREFIX
from domain.errors import SettingsError
from domain.lifecycle import Retention
from domain.quota import Limits, parse_size
from domain.rfc5322.limits import MessageLimits

if TYPE_CHECKING:
    from domain.lifecycle import Retention
    from domain.quota import Limits as QuotaLimits


class StreamOptions(BaseModel):
    """How a stream worker consumes (``LETTERLOG_STREAM_<FIELD>``)."""

    model_config = ConfigDict(frozen=True)

    group: str = "letterlog-projector"  # the Kafka consumer group
    batch: int = 5000  # records per batch at most (ADR 0038)
    within: float = 0.5  # seconds to wait for a batch to fill
    commit_interval: float = 1.0  # seconds between offset commits (of acknowledged records)
    session_timeout: float = 10.0  # a dead worker's partitions move after this long
    instance: str = ""  # static group membership: a restart under this id resumes at once
    web_port: int = 0  # the worker's web server (/metrics/, /lag/) on 127.0.0.1; 0: none
    threads: int = 4  # partitions of one batch applied concurrently
    attempts: int = 3  # tries before a poison record becomes a dead letter
    hbase_pool: int = 8  # Thrift connections
    hbase_thrift2_port: int = 0  # a Thrift2 gateway for writes (one call per batch); 0: none
    retry_delay: float = 0.2  # first backoff after a failed table store write (doubles, <= 30 s)
    test_hold: str = ""  # "<file>:<n>": after the n-th batch's writes, create file and hang

    @field_validator("batch", "threads", "attempts", "hbase_pool")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        if value < 1:
            raise ValueError("must be at least 1")
        return value


class Settings(BaseSettings):
    """Every setting (``load_settings`` reads them from ``LETTERLOG_<NAME>``)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore",
                                      env_nested_delimiter="_", env_nested_max_split=1)

    # these four defaults live in adapters.startup.envsettings (the fast read path reads them too)
    data: Path = Field(Path(DEFAULTS["data"]), description="data directory (embedded stores)")
    event_store: Literal["sqlite", "postgres"] = DEFAULTS["event_store"]  # type: ignore[assignment]
    durability: Literal["full", "normal"] = Field(
        DEFAULTS["durability"],  # type: ignore[arg-type]
        description="full: a delivery survives power loss; normal: a process crash"
    )
    lock_timeout: int = Field(30, ge=1, le=3600, description="seconds a writer waits for the "
                              "SQLite log's lock per attempt (lda, lmtp: their --timeout's share)")
    postgres_dsn: str | None = Field(None, description="postgresql://user:pw@host:port/db")
    key_vault: Path | None = Field(None, description="the key-encryption keys' file (default "
                                   "<data>/vault.sqlite); never inside the log's database")
    key_store_dsn: str | None = Field(None, description=(
        "the key store's PostgreSQL cluster (scale-out): the key-encryption keys there, "
        "reached by every host (ADR 0073); a multi-host DSN follows a promoted standby"))
    key_store_standbys: str = Field("", description=(
        "the key cluster's standbys' DSNs (space-separated): an erasure completes once "
        "each has dropped the removed keys' WAL"))
    table_store: Literal["embedded", "hbase"] = DEFAULTS["table_store"]  # type: ignore[assignment]
    hbase_host: str = "127.0.0.1"
    hbase_port: int = Field(9090, ge=1, le=65535)
    hbase_thrift2_port: int | None = Field(None, ge=1, le=65535,
                                           description="Thrift2 port: per-cell timestamps")
    hbase_thrift2_idl: Path | None = Field(
        None, description="HBase's thrift2/hbase.thrift (default: the dev-server jar cache's)")
    hbase_table_prefix: str = Field("letterlog", pattern=r"^[A-Za-z0-9]{1,40}$")
    payload_store: Literal["files", "hbase"] | None = Field(None, description=(
        "where payloads over the inline limit go: files (<data>/payloads, on this host's "
        "disk) or hbase (table <prefix>_payloads, every host reaches it); default: hbase "
        "with table_store=hbase, else files (ADR 0072)"))
    hbase_timeout: float = Field(10.0, gt=0, le=3600, description=(
        "seconds an HBase call waits for an answer, and retries a gateway that does not "
        "answer; then a read fails (exit 1). Stream workers wait at least 60 s"))
    postgres_timeout: float = Field(10.0, gt=0, le=3600, description=(
        "seconds a connection to the log's PostgreSQL may take (connecting, and waiting "
        "for one from the pool); then a command fails with one line (exit 1)"))
    kafka_bootstrap: str | None = None
    kafka_topic: str = Field("letterlog-events", pattern=r"^[A-Za-z0-9._-]{1,200}$")
    rebuild_workers: int = Field(0, ge=0, le=64, description=(
        "processes an embedded rebuild of a long log folds it with (ADR 0113); 0: the "
        "cores it may use, at most 4; 1: the rebuilding process alone"))
    spark_master: str | None = Field(None, description="Spark master URL for --engine spark "
                                     "(default: spark-defaults.conf's, else local[2,2])")
    metrics_port: int = Field(0, ge=-1, le=65535,
                              description="relay/worker Prometheus port on 127.0.0.1; "
                                          "0: a free one, -1: none")
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
    extraction_reservation_seconds: float = Field(
        600.0, gt=0, description="an extraction neither confirmed nor released lapses after")
    expired_ttl_days: float = Field(30.0, ge=0, description="expired messages purged after")
    # event rules (docs/event-rules.md)
    rule_search_seconds: float = Field(0.05, gt=0, le=10, description=(
        "time one rule filter's regular expression may take on one text"))
    rule_budget_seconds: float = Field(0.5, gt=0, le=60, description=(
        "time every rule filter of one arrival may take together"))
    dispatch_timeout_seconds: float = Field(10.0, gt=0, description=(
        "a webhook call's connect and read timeout"))
    dispatch_attempts: int = Field(5, ge=1, le=100, description=(
        "calls of a rule event's application per dispatch before it is recorded failed"))
    dispatch_backoff_seconds: float = Field(0.5, ge=0, description=(
        "first wait between two calls of an application (doubled each time, jittered)"))
    dispatch_interval_seconds: float = Field(2.0, gt=0, description=(
        "how often letterlog dispatcher looks for pending rule events"))
    rule_event_pending_ttl_days: float = Field(30.0, ge=0, description=(
        "a rule event still pending is purged after"))
    rule_event_processing_ttl_days: float = Field(30.0, ge=0, description=(
        "a rule event still processing is purged after"))
    rule_event_complete_ttl_days: float = Field(7.0, ge=0, description=(
        "a completed rule event is purged after"))
    rule_event_failed_ttl_days: float = Field(30.0, ge=0, description=(
        "a failed rule event is purged after"))
    incomplete_ttl_days: float = Field(2.0, ge=0, description="unfinished uploads purged after")
    payload_grace_hours: float = Field(12.0, ge=0,
                                       description="an unreferenced payload is kept this long")
    purge_peek_back_minutes: int = Field(60, ge=0, description="buckets re-read before a pointer")
    purge_interval_seconds: float = Field(600.0, gt=0, description="letterlog purger's period")
    purge_threads: int = Field(4, ge=1, le=16, description="shards purged at once per queue")
    erase_wait_seconds: float = Field(10.0, ge=0, le=3600, description=(
        "how long an erasure or purge run waits for readers of the SQLite files to let their "
        "write-ahead logs be truncated; then it exits 3, naming them"))
    erase_complete_wait_seconds: float = Field(900.0, gt=0, description=(
        "scale-out: how long `erase complete` waits for the relay and workers, then compacts"))
    hbase_compactor: str = Field(
        "hbase org.apache.hadoop.hbase.util.compaction.MajorCompactor", description=(
            "the command running HBase's MajorCompactor tool (`erase complete` on scale-out)"))
    allow_shared_keys: bool = Field(
        False, description="open a store whose data directory or key store (keys.sqlite) "
                           "group or others may read or write, with a warning (else refused)")
    # the user directory (docs/permissions.md "Users and the directory", ADR 0051)
    directory: Literal["passwd-file", "ldap"] = Field(
        "passwd-file", description="where users and groups come from")
    passwd_file: Path | None = Field(None, description=(
        "Dovecot-format passwd-file (default <data>/users.passwd; missing there: no users)"))
    ldap_url: str = Field("ldap://127.0.0.1:389", pattern=r"^ldaps?://",
                          description="LDAP server, ldap://host:port")
    ldap_base_dn: str = Field("", description="users: entries with a uid under this DN")
    ldap_group_base_dn: str = Field("", description="groups (groupOfNames, posixGroup) "
                                    "under this DN (default ldap_base_dn)")
    ldap_bind_dn: str = Field("", description="bind as (empty: anonymous)")
    ldap_password: str = Field("", description="the bind DN's password")
    ldap_timeout: float = Field(10.0, gt=0, le=600, description="seconds the LDAP server has "
                                "to connect and to answer each request")
    user_purge_interval_days: float = Field(7.0, gt=0, description=(
        "letterlog purger runs the user purge job this often"))
    user_purge_min_ratio: float = Field(0.5, ge=0, le=1, description=(
        "the user purge refuses a directory answering fewer users than this share of the "
        "last accepted answer"))
    # quotas (docs/permissions.md "Quotas", ADR 0050): an account's own quota wins
    quota_bytes: int = Field(0, ge=0, description=(
        "bytes an account may hold unless it has its own quota; 0: unlimited; 10M, 1G"))
    quota_messages: int = Field(0, ge=0, description=(
        "messages an account may hold unless it has its own quota; 0: unlimited"))
    quota_exceeded: Literal["temporary", "permanent"] = Field("temporary", description=(
        "what lda and lmtp answer over quota: temporary (4.2.2, exit 75: the MTA retries) "
        "or permanent (5.2.2, exit 77: it bounces)"))
    stream: StreamOptions = StreamOptions()

    @field_validator("quota_bytes", mode="before")
    @classmethod
    def _size(cls, value: Any) -> Any:
        return parse_size(value) if isinstance(value, str) else value

    def quota_limits(self) -> QuotaLimits:
        return Limits(self.quota_bytes, self.quota_messages)

    def payloads_in_hbase(self) -> bool:
        """Are payloads over the inline limit in HBase (``payload_store``, by default with
        the HBase tables) rather than in ``<data>/payloads``?"""
        if self.payload_store is None:
            return self.table_store == "hbase"
        return self.payload_store == "hbase"

    def retention(self) -> Retention:
        """How long each purge queue keeps what it holds (the purge jobs, ``purge-queue``)."""

        return Retention(expired=timedelta(days=self.expired_ttl_days),
                         deleted=timedelta(days=self.deleted_retention_days),
                         incomplete=timedelta(days=self.incomplete_ttl_days),
                         payloads=timedelta(hours=self.payload_grace_hours),
                         peek_back=timedelta(minutes=self.purge_peek_back_minutes))

    def message_limits(self) -> MessageLimits:
        return MessageLimits(max_size=self.max_message_size,
                             max_header_bytes=self.max_header_bytes, max_parts=self.max_parts,
                             max_depth=self.max_depth, max_line_length=self.max_line_length,
                             parse_seconds=self.parse_seconds)

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        if self.event_store == "postgres" and not self.postgres_dsn:
            raise ValueError("event_store=postgres needs LETTERLOG_POSTGRES_DSN")
        if self.payload_store == "hbase" and self.table_store != "hbase":
            raise ValueError("payload_store=hbase needs LETTERLOG_TABLE_STORE=hbase (the "
                             "scale-out path, whose `erase complete` compacts HBase)")
        if self.directory == "ldap" and not self.ldap_base_dn.strip():
            raise ValueError("directory=ldap needs LETTERLOG_LDAP_BASE_DN (where the users are)")
        return self


def _message(err: Any) -> str:
    if str(err["type"]).endswith("_parsing"):  # "many" for a number: name the value
        return f"{err['input']!r} is not valid ({err['msg']})"
    return str(err["msg"]).removeprefix("Value error, ")


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, ``overrides`` (field names) taking precedence; an
    option group given as a dict is merged into the environment's."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except EnvironmentUnreadable as e:  # a JSON option group that is not JSON
        field = str(e).split('"')[1] if '"' in str(e) else ""
        name = f"{PREFIX}{field.upper()}" if field else "settings"
        raise SettingsError(f"invalid settings: {name}: not a JSON object") from None
    except ValidationError as e:
        parts = []
        for err in e.errors():
            loc = "_".join(str(x) for x in err["loc"])
            name = f"LETTERLOG_{loc.upper()}" if loc else "settings"
            parts.append(f"{name}: {_message(err)}")
        raise SettingsError("invalid settings: " + "; ".join(parts)) from None


def postgres_env_from_dsn(dsn: str) -> dict[str, str]:
    """``LETTERLOG_POSTGRES_DSN`` as the eventsourcing library's ``POSTGRES_*`` settings."""
    u = urlparse(dsn)
    if u.scheme not in ("postgres", "postgresql") or not u.hostname or not u.path.strip("/"):
        raise SettingsError(f"LETTERLOG_POSTGRES_DSN: {dsn!r} is not postgresql://user:pw@host:port/db")
    return {
        "POSTGRES_DBNAME": u.path.strip("/"),
        "POSTGRES_HOST": u.hostname,
        "POSTGRES_PORT": str(u.port or 5432),
        "POSTGRES_USER": unquote(u.username or ""),
        "POSTGRES_PASSWORD": unquote(u.password or ""),
    }
