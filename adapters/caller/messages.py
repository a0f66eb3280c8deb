"""The caller's message commands: deliveries and uploads, extraction, flags, labels, policy,
move, copy, delete, restore and expunge, each checked first."""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Unpack
from uuid import UUID

from domain.errors import InvalidCommand, NotFound
from domain.flags import FlagMode, apply_flag_mode, validate_flags
from domain.results import Delivery
from domain.rights import flag_rights, rights_of, rights_string
from domain.values import MessageState

if TYPE_CHECKING:
    from adapters.face import Arrival, Target, UploadStart
    from domain.results import Change, Upload

from adapters.caller.checks import CallerChecks


class CallerMessages(CallerChecks):
    """What the caller does to a message, rights checked first."""

    def deliver(self, **fields: Unpack[Arrival]) -> Delivery:
        checked, rights = self._arrival("deliver", fields)
        return self._answer(self._store.deliver(**checked), rights)

    def check_delivery(self, **fields: Unpack[Target]) -> None:
        checked, _ = self._arrival("deliver", fields)
        self._store.check_delivery(**checked)

    def begin_upload(self, **fields: Unpack[UploadStart]) -> Upload:
        checked, _ = self._arrival("begin_upload", fields)
        return self._store.begin_upload(**checked)

    def append_chunk(self, message_id: UUID, index: int, data: bytes) -> Change:
        self._message("append_chunk", message_id)
        return self._store.append_chunk(message_id, index, data)

    def complete_upload(self, message_id: UUID) -> Delivery:
        self._message("complete_upload", message_id)
        return self._store.complete_upload(message_id)

    def extract(self, message_id: UUID) -> bytes:
        self._message("extract", message_id)
        return self._store.extract(message_id)

    def extract_to(self, message_id: UUID, path: str | os.PathLike[str], *,
                   force: bool = False) -> dict[str, Any]:
        self._message("extract", message_id)
        return self._store.extract_to(message_id, path, force=force)

    def extract_to_stream(self, message_id: UUID, out: BinaryIO) -> dict[str, Any]:
        self._message("extract", message_id)
        return self._store.extract_to_stream(message_id, out)

    def show(self, message_id: UUID) -> dict[str, Any]:
        self._message("show", message_id)
        return self._store.show(message_id)

    def flag(self, message_id: UUID, flags: Iterable[str], mode: str = "add") -> Change:
        flags = list(flags)
        try:
            current = self._store.message_record(message_id).flags
            wanted = validate_flags(flags)
            changed = apply_flag_mode(current, wanted, FlagMode(mode)) ^ frozenset(current)
        except (NotFound, InvalidCommand, ValueError):
            changed = frozenset(flags)
        self._message("flag", message_id, needed=flag_rights(changed) or "w")
        return self._store.flag(message_id, flags, mode)

    def label(self, message_id: UUID, add: Iterable[str] = (),
              remove: Iterable[str] = ()) -> Change:
        self._message("label", message_id)
        return self._store.label(message_id, add, remove)

    def set_policy(self, message_id: UUID, extract_limit: int | None = None,
                   extract_until: datetime | None = None) -> Change:
        self._message("set_policy", message_id)
        return self._store.set_policy(message_id, extract_limit, extract_until)

    def move(self, message_id: UUID, mailbox: str) -> Change:
        address, _ = self._message("move", message_id, "source")
        self._need("move", "target", address, mailbox)
        return self._store.move(message_id, mailbox)

    def copy(self, message_id: UUID, mailbox: str) -> Delivery:
        address, _ = self._message("copy", message_id, "source")
        _, target = self._need("copy", "target", address, mailbox)
        rights = rights_string(rights_of(self.caller, address, target.acl))
        return self._store.copy(message_id, mailbox, target_rights=rights)

    def delete(self, message_id: UUID) -> Change:
        self._message("delete", message_id)
        return self._store.delete(message_id)

    def restore(self, message_id: UUID) -> Change:
        self._message("restore", message_id)
        return self._store.restore(message_id)

    def expunge(self, message_ids: Iterable[UUID]) -> Change:
        ids = list(message_ids)
        for message_id in ids:
            self._message("expunge", message_id)
            m = self._store.message_record(message_id)
            if m.state != MessageState.DELETED.value and "\\Deleted" not in m.flags:
                raise InvalidCommand(
                    f"message {message_id} is not marked \\Deleted: an expunge removes only "
                    "messages marked \\Deleted or deleted (RFC 3501 EXPUNGE, RFC 4314 'e'); "
                    "nothing was expunged")
        return self._store.expunge(ids)
