"""The application's one face: every command, query and administration a caller may use, as
typed Protocols (James's ``MailboxManager`` / ``MessageManager``; event-sourcery's
``interfaces.py``). ADR 0077.

- ``Face``: what a user may be given (``MessageManager``, ``MailboxManager``, ``Queries``).
  ``Letterlog.open(data, user=...)`` returns it: a ``CallerView`` (``adapters.caller``)
  that checks the user's rights before each call; the administrator's store offers it too.
- ``Store``: the administrator's store, ``Letterlog.open(data)``: the ``Face`` and the
  administration (``Ingest``, ``AccessAdmin``, ``Lookups``, ``Lifecycle``, ``Upkeep``,
  ``RulesAdmin``).

Both implementations name these Protocols as their bases, so mypy (``make lint``) fails when
one drifts from its interface; a caller holding a ``Face`` cannot reach a method of the
administrator's without a type error. Entry points (the CLI, ``lda``, ``lmtp``, the stream
commands, backup, export, the Spark job's driver) hold one of these, never the command side
behind it (``Letterlog.mail``).

Only annotations import the implementations' types: this module imports nothing at run time
but the standard library. The parts: ``fields`` (a delivery's and an upload's fields), ``user``
(the ``Face``'s three), ``admin``, ``upkeep`` and ``rules`` (the administration's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from adapters.face.admin import AccessAdmin, Ingest, Lookups
from adapters.face.fields import Arrival, Target, UploadStart
from adapters.face.rules import RulesAdmin
from adapters.face.upkeep import Lifecycle, Upkeep
from adapters.face.user import Face, MailboxManager, MessageManager, Queries

__all__ = ["AccessAdmin", "Arrival", "Face", "Ingest", "Lifecycle", "Lookups", "MailboxManager",
           "MessageManager", "Queries", "RulesAdmin", "Store", "Target", "UploadStart",
           "Upkeep"]

if TYPE_CHECKING:
    from uuid import UUID

    from domain.results import Delivery


class Store(Face, Ingest, AccessAdmin, Lookups, Lifecycle, Upkeep, RulesAdmin, Protocol):
    """The administrator's store: the ``Face`` and every administration."""

    def copy(self, message_id: UUID, mailbox: str, *,
             target_rights: str | None = None) -> Delivery:
        """``target_rights``: a user's rights on the target (the caller's view passes
        them): the flags and labels the copy keeps follow them (RFC 4314 ``s``/``t``/``w``);
        None keeps all."""
