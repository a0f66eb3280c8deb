"""Deliveries: single, batched and checked ones, chunked uploads, and extraction (the exact
bytes, counted against the message's policy: ``adapters.facade.extraction``).

A part of the ``Letterlog`` facade (``adapters.embedded``), which runs each command through
``_command`` so the read models catch up after it (``parts.FacadePart``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Unpack
from uuid import UUID

from adapters.facade.parts import FacadePart
from domain.commands import Deliver, build
from domain.errors import AccountNotFound, InvalidState, MailboxNotFound
from domain.results import Upload
from domain.service import Change, CheckedDelivery, Delivery

if TYPE_CHECKING:
    from adapters.facade.extraction import Extractor
    from adapters.face import Arrival, Target, UploadStart
    from domain.ports import PayloadStore


class Deliveries(FacadePart):
    """Commands that bring messages in (``deliver``, ``deliver_checked``, uploads), the checks
    an importer or a delivery agent makes first, and extraction."""

    def deliver(self, **fields: Unpack[Arrival]) -> Delivery:
        return self._command(self.mail.deliver, **fields)

    def deliver_many(self, items: Iterable[dict[str, Any]]) -> list[Delivery]:
        return self._command(self.mail.deliver_many, [build(Deliver, **f) for f in items])

    def deliver_checked(self, items: Sequence[CheckedDelivery], *,
                        new_keys: bool = False) -> list[Delivery]:
        """Checked deliveries in one atomic append (each message parsed once, by ``check``).
        ``new_keys``: their idempotency keys are expected unclaimed, so they are not read
        first (a claimed one is found by a refused append and a retry)."""
        return self._command(self.mail.deliver_checked, items, new_keys=new_keys)

    def check(self, **fields: Unpack[Arrival]) -> CheckedDelivery:
        """``deliver``'s fields checked and the message parsed (once), nothing written:
        ``deliver_checked`` delivers a batch of these in one append. MessageRejected or
        InvalidCommand if unfit."""
        return self.mail.check(build(Deliver, **fields))

    def store_payloads(self, items: Sequence[CheckedDelivery], *,
                       into: PayloadStore | None = None) -> list[CheckedDelivery]:
        """Writes the payloads of the large messages among ``items`` ahead of their
        ``deliver_checked`` and returns the items, each large one carrying its payload's
        address (the append then only touches it: no hashing, no write). An importer writes
        a batch's while the batch before it is appended, here or in its reading process
        (``into``: a payload store that process opened itself, after its fork)."""
        return self.mail.written_ahead(items, into)

    def already_delivered(self, account: str, idempotency_key: str) -> bool:
        """Whether a delivery to ``account`` with ``idempotency_key`` has landed (a read;
        delivering it again would store nothing either way)."""
        return self.mail.claimed(account, idempotency_key)

    def require_account(self, account: str) -> None:
        """``AccountNotFound`` unless the log has opened ``account``."""
        self.mail.account(account)

    def takes_messages(self, account: str, mailbox: str) -> bool:
        """Whether ``mailbox`` of ``account`` exists and takes messages: not a name kept
        for the mailboxes below it (``\\Noselect``)."""
        try:
            found = self.mail.account(account)
        except AccountNotFound:
            return False
        return found.has_mailbox(mailbox) and not self.mail.mailbox(
            found.mailbox(mailbox)[0]).deleted

    def guard_appends(self, guard: Callable[[], AbstractContextManager[None]]) -> None:
        """Every append from now on runs inside ``guard()``: a delivery agent's deadline
        refuses to start one once it has passed, and waits for one in progress."""
        self.mail.uow.append_guard = guard

    def check_delivery(self, **fields: Unpack[Target]) -> None:
        """Raises what delivering any message with these fields would raise (a bad address,
        mailbox name, flag, label or policy; a mailbox the account does not have); writes
        nothing. ``fields`` are ``deliver``'s, without ``raw``."""
        cmd = build(Deliver, raw=b"", **fields)
        try:
            account = self.mail.account(cmd.account)
        except AccountNotFound:
            if cmd.mailbox != "INBOX":
                raise MailboxNotFound(
                    f"mailbox: {cmd.mailbox!r} does not exist for {cmd.account}") from None
            return
        mailbox_id, _, _ = account.mailbox(cmd.mailbox)
        if self.mail.mailbox(mailbox_id).deleted:
            raise InvalidState(f"mailbox: {cmd.mailbox!r} is \\Noselect (deleted, kept as a"
                               " name for the mailboxes below it): it takes no messages")

    def begin_upload(self, **fields: Unpack[UploadStart]) -> Upload:
        return self._command(self.mail.begin_upload, **fields)

    def append_chunk(self, message_id: UUID, index: int, data: bytes) -> Change:
        return self._command(self.mail.append_chunk, message_id, index, data)

    def complete_upload(self, message_id: UUID) -> Delivery:
        return self._command(self.mail.complete_upload, message_id)

    def extract(self, message_id: UUID) -> bytes:
        """The exact delivered bytes; counted against the policy once they are read (an
        extraction that fails does not count)."""
        return self._command(self._extractor().to_bytes, message_id)

    def extract_to(self, message_id: UUID, path: str | os.PathLike[str], *,
                   force: bool = False) -> dict[str, Any]:
        """Writes the bytes to ``path`` (through a temporary file in its directory; an
        existing file only with ``force``); counted once they are written. Returns size,
        ``position``, the policy's count and the extractions to date."""
        return self._command(self._extractor().to_file, message_id, Path(path), force=force)

    def extract_to_stream(self, message_id: UUID, out: BinaryIO) -> dict[str, Any]:
        """Writes the bytes to ``out``; counted once they are written and flushed."""
        return self._command(self._extractor().to_stream, message_id, out)

    def _extractor(self) -> Extractor:
        from adapters.facade.extraction import Extractor  # local: extraction only: not for show

        return Extractor(self.mail)
