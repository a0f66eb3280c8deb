"""What every part of the facade works on: ``Letterlog`` (``adapters.embedded``) sets these
attributes and defines these methods; the parts (``deliveries``, ``messages``, ...) use them
and are mixed into it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from uuid import UUID

    from adapters.config.settings import Settings
    from adapters.eventlog.store import MailLog
    from adapters.lifecycle.completed import Completion
    from adapters.lifecycle.intentfiles import Held
    from adapters.lifecycle.jobs import PurgeJobs
    from adapters.lifecycle.shredding import Shredding
    from adapters.readside.host import ProjectionHost
    from domain.lifecycle import Retention
    from domain.ports import PayloadStore
    from domain.service import Mailstore

T = TypeVar("T")


class FacadePart:
    """The store's parts (built by ``adapters.bootstrap``) and the facade's own steps."""

    settings: Settings
    log: MailLog
    payloads: PayloadStore
    mail: Mailstore  # the command side
    shredding: Shredding  # what follows a purge's or an erasure's append
    _projections: ProjectionHost | None  # the read models (None: none here, or not open yet)
    _purge_jobs: Callable[[Any], PurgeJobs]  # the purge jobs on a read side

    if TYPE_CHECKING:
        @property
        def projections(self) -> ProjectionHost | None: ...

        @projections.setter
        def projections(self, host: ProjectionHost | None) -> None: ...

        _read_side: Callable[[], ProjectionHost] | None

        def events(self, start: int = 1, stop: int | None = None,
                   batch: int = 1000) -> Iterator[tuple[int, Any]]: ...

        def _mailbox_id(self, account: str, mailbox: str) -> UUID: ...

        def _command(self, command: Callable[..., T], *args: Any, **kwargs: Any) -> T:
            """Runs a command of ``mail``, then the read models catch up with what it saved."""

        def _read(self) -> Any:
            """The read side, caught up with this process's own commands."""

        def _query(self, fn: Callable[[], T]) -> T: ...

        def catch_up(self) -> int: ...

        def max_position(self) -> int: ...

        # the purge and erasure parts (purges, erasure, completing) call each other's
        def retention(self) -> Retention: ...

        @property
        def completion(self) -> Completion | None: ...

        def finish_interrupted_erasures(self) -> list[dict[str, Any]]: ...

        def _erase(self, message_ids: list[UUID], *, account: UUID | None = None,
                   resume: Held | None = None) -> dict[str, Any]: ...
