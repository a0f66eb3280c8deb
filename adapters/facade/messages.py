"""Commands on delivered messages (flags, labels, moves, copies, deletion, policy) and
``show``, a message as the command side knows it.

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from adapters.facade.parts import FacadePart
from domain.sealed_facts import media_type
from domain.service import Change, Delivery


class Messages(FacadePart):
    """What a mail client does to a message, and the message's own description."""

    def flag(self, message_id: UUID, flags: Iterable[str], mode: str = "add") -> Change:
        """Adds (default), removes or replaces flags and keywords."""
        return self._command(self.mail.flag, message_id, flags, mode)

    def label(self, message_id: UUID, add: Iterable[str] = (),
              remove: Iterable[str] = ()) -> Change:
        return self._command(self.mail.label, message_id, add, remove)

    def move(self, message_id: UUID, mailbox: str) -> Change:
        """Moves to ``mailbox`` of the same account; the message gets a new UID there."""
        return self._command(self.mail.move, message_id, mailbox)

    def copy(self, message_id: UUID, mailbox: str, *,
             target_rights: str | None = None) -> Delivery:
        """A copy in ``mailbox``; ``target_rights`` (a user's): the flags and labels it
        keeps follow them (RFC 4314 ``s``/``t``/``w``), None keeps all."""
        return self._command(self.mail.copy, message_id, mailbox,
                             target_rights=target_rights)

    def delete(self, message_id: UUID) -> Change:
        """Soft delete: hidden, restorable until purged."""
        return self._command(self.mail.delete, message_id)

    def restore(self, message_id: UUID) -> Change:
        return self._command(self.mail.restore, message_id)

    def expunge(self, message_ids: Iterable[UUID]) -> Change:
        return self._command(self.mail.expunge, message_ids)

    def set_policy(self, message_id: UUID, extract_limit: int | None = None,
                   extract_until: datetime | None = None) -> Change:
        """Count-limited, until a date, or (neither) indefinite."""
        return self._command(self.mail.set_policy, message_id, extract_limit, extract_until)

    def show(self, message_id: UUID) -> dict[str, Any]:
        m = self.mail.message(message_id)
        account = self.mail.uow.account_by_id(m.account_id)
        mailbox = self.mail.mailbox(m.mailbox_id) if m.mailbox_id else None
        return {
            "message_id": str(m.id),
            "account": account.address,
            "mailbox": mailbox.name if mailbox is not None else None,
            "account_id": str(m.account_id),
            "mailbox_id": str(m.mailbox_id),
            "uid": m.uid,
            "uidvalidity": m.uidvalidity,
            "state": m.state,
            "size": m.size,
            "sha256": m.sha256,
            "inline": m.inline,
            "internal_date": m.internal_date.isoformat(),
            "flags": sorted(m.flags),
            "labels": sorted(m.labels),
            "thread_id": str(m.thread_id),
            "policy": {k: (v.isoformat() if hasattr(v, "isoformat") else v)
                       for k, v in m.policy.as_dict().items()},
            "extract_count": m.extract_count,
            "extractions_to_date": getattr(m, "extractions_total", m.extract_count),
            "last_extracted_at": _iso(getattr(m, "last_extracted_at", None)),
            "envelope": _jsonable(m.personal.get("envelope", {})),
            "smtp_envelope": _jsonable(m.personal.get("smtp_envelope", {})),
            "attachments": list(m.personal.get("attachment_names", [])),
            "facts": _jsonable({**m.facts,
                                "content_type": media_type(m.facts, m.personal)}),
            "version": m.version,
        }


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, UUID):
        return str(v)
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    return v
