"""The administrator's upkeep: ``Lifecycle`` (purge and erasure) and ``Upkeep`` (the parts, the
log, rebuilds, views, verification)."""


from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

if TYPE_CHECKING:
    from adapters.config.settings import Settings
    from adapters.eventlog.store import MailLog
    from adapters.lifecycle.completed import Completion
    from adapters.lifecycle.jobs import PurgeJobs, PurgeReport
    from adapters.readside.host import ProjectionHost
    from domain.lifecycle import Retention
    from domain.ports import PayloadStore
    from projections.queries import PurgeEntry


class Lifecycle(Protocol):
    """Purge and erasure."""

    def retention(self) -> Retention: ...

    @property
    def completion(self) -> Completion | None: ...

    def purge_jobs(self) -> PurgeJobs: ...

    def purge(self, now: datetime | None = None, queues: Sequence[str] | None = None, *,
              dry_run: bool = False, progress: Any = None) -> PurgeReport: ...

    def purge_due(self, now: datetime | None = None, *,
                  limit: int = 1000) -> list[PurgeEntry]: ...

    def erase_message(self, message_id: UUID, *,
                      with_copies: bool = False) -> dict[str, Any]: ...

    def erase_account(self, address: str) -> dict[str, Any]: ...

    def finish_interrupted_erasures(self) -> list[dict[str, Any]]: ...

    def complete_erasures(self, *, record: bool = False) -> Completion: ...

    def migrate_keys(self, *, remove_file: bool = True) -> dict[str, Any]:
        """The vault file's key-encryption keys moved into the key cluster (ADR 0073)."""

    def pending_erasures(self) -> list[dict[str, Any]]: ...

    def running_erasures(self) -> list[dict[str, Any]]: ...


class Upkeep(Protocol):
    """The log, the read models' upkeep and the store's parts an operator's tool needs
    (backup, the Spark driver, the benchmarks): typed, read only."""

    @property
    def settings(self) -> Settings: ...

    @property
    def log(self) -> MailLog: ...

    @property
    def payloads(self) -> PayloadStore: ...

    @property
    def projections(self) -> ProjectionHost | None: ...

    def read_side(self) -> ProjectionHost:
        """The read models, caught up with this process's own commands."""

    def events(self, start: int = 1, stop: int | None = None,
               batch: int = 1000) -> Iterator[tuple[int, Any]]: ...

    def position_at(self, when: datetime) -> int: ...

    def rebuild(self, names: list[str] | None = None, progress: Any = None,
                workers: int | None = None) -> dict[str, Any]: ...

    def build_view(self, view: str, names: list[str] | None, stop: int) -> dict[str, Any]: ...

    def views(self) -> list[Any]: ...

    def drop_view(self, name: str) -> Any: ...

    def erase_from_views(self) -> dict[str, Any]: ...

    def verify(self, names: list[str] | None = None, progress: Any = None) -> list[Any]: ...

    def read_model_bytes(self) -> int | None: ...

    def read_model_slack(self) -> float | None: ...

    def compact_read_models(self) -> dict[str, int] | None: ...

    def listed_mail(self) -> dict[str, int]: ...

    def exclusive(self, name: str) -> AbstractContextManager[Any]: ...
