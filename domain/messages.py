"""Message commands: flags, labels, move, copy, delete, restore, expunge, extraction policy.

Each loads the message (and the aggregates the rule needs), lets it decide, and saves its
events through the unit of work; a command that changes nothing returns an empty ``Change``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from datetime import datetime
from uuid import UUID

from domain.commands import ChangeFlags, ChangeLabels, CopyMessage, MoveMessage, SetPolicy, build
from domain.delivery import new_message_id
from domain.errors import InvalidState, MailboxNotFound
from domain.flags import FlagMode, apply_flag_mode
from domain.mailbox import Mailbox
from domain.message import Arrival, Message, with_sealed_digest
from domain.personal import Personal
from domain.results import Change, Delivery, Reservation
from domain.rights import kept_on_arrival
from domain.rulecommands import arrival_rule_events
from domain.unit_of_work import Commands
from domain.values import MessageState


def _personal_of(msg: Message) -> Personal:
    p = msg.personal
    return p if isinstance(p, Personal) else Personal(p)


class MessageCommands(Commands):
    """flag, label, move, copy, delete, restore, expunge, extract, set_policy."""

    # -- flags, labels ------------------------------------------------------------------------
    def flag(self, message_id: UUID, flags: Iterable[str], mode: str = "add") -> Change:
        cmd = build(ChangeFlags, message_id=message_id, flags=list(flags), mode=FlagMode(mode))
        uow = self.uow

        def attempt() -> Change:
            msg = uow.message(cmd.message_id)
            new = apply_flag_mode(msg.flags, frozenset(cmd.flags), cmd.mode)
            if not msg.change_flags(new):
                return Change()
            return Change.of(uow.save(msg), {"flags": sorted(new)})

        return uow.run(attempt)

    def label(
        self, message_id: UUID, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Change:
        cmd = build(ChangeLabels, message_id=message_id, add=list(add), remove=list(remove))
        uow = self.uow

        def attempt() -> Change:
            msg = uow.message(cmd.message_id)
            new = (msg.labels | frozenset(cmd.add)) - frozenset(cmd.remove)
            if new == msg.labels:
                return Change()
            account = uow.account_by_id(msg.account_id)
            account.define_labels(new)
            msg.change_labels(new)
            return Change.of(uow.save(account, msg), {"labels": sorted(new)})

        return uow.run(attempt)

    # -- move, copy ---------------------------------------------------------------------------
    def _target(self, msg: Message, name: str) -> Mailbox:
        account = self.uow.account_by_id(msg.account_id)
        mailbox = self.uow.mailbox_named(account, name, [])
        if mailbox.deleted:
            raise MailboxNotFound(f"mailbox: {name!r} was deleted")
        return mailbox

    def move(self, message_id: UUID, mailbox: str) -> Change:
        """Moves to ``mailbox`` (the same one too: a move is a copy and an expunge, so the
        message always gets a new UID); ``extra`` reports the source and new UID."""
        cmd = build(MoveMessage, message_id=message_id, mailbox=mailbox)
        uow = self.uow

        def attempt() -> Change:
            msg = uow.message(cmd.message_id)
            target = self._target(msg, cmd.mailbox)
            source_uid = msg.uid
            uid = target.allocate_uids([msg.id])  # also within one mailbox (RFC 6851)
            msg.move(target.id, uid, target.uidvalidity)
            raised = arrival_rule_events(self, [(msg, target.name, "moved", None)])
            # COPYUID: uidvalidity, source and new UID
            return Change.of(uow.save(target, *raised, msg), {
                "mailbox_id": str(target.id), "uidvalidity": target.uidvalidity,
                "source_uid": source_uid, "uid": uid})

        return uow.run(attempt)

    def copy(self, message_id: UUID, mailbox: str, *,
             target_rights: str | None = None) -> Delivery:
        """A copy in ``mailbox`` of the same account. ``target_rights``: a user's rights on
        the target, which decide the flags and labels the copy keeps (RFC 4314: ``s``,
        ``t``, ``w``; ``domain.rights.kept_on_arrival``); None keeps them all."""
        cmd = build(CopyMessage, message_id=message_id, mailbox=mailbox)
        copy_id = new_message_id()
        uow = self.uow

        def attempt() -> Delivery:
            src = uow.message(cmd.message_id)
            if src.state not in (MessageState.ACTIVE.value, MessageState.EXPIRED.value):
                raise InvalidState(f"message {src.id} is {src.state}; cannot copy")
            target = self._target(src, cmd.mailbox)
            account = uow.account_by_id(src.account_id)
            if self.quotas.applies(account):  # a copy takes room; a move takes none
                self.quotas.check(account, 1, src.size)
            flags, labels = sorted(src.flags), sorted(src.labels)
            if target_rights is not None:
                flags, labels = kept_on_arrival(flags, labels, target_rights)
            uid = target.allocate_uids([copy_id])
            new = Message.deliver(copy_id, Arrival(
                account_id=src.account_id,
                mailbox_id=target.id,
                uid=uid,
                uidvalidity=target.uidvalidity,
                size=src.size,
                sha256="",  # sealed (ADR 0081, ADR 0099)
                inline=src.inline,
                internal_date=src.internal_date,
                flags=flags,
                labels=labels,
                policy=src.policy.as_dict(),
                thread_id=src.thread_id,
                facts=dict(src.facts),
                personal=with_sealed_digest(_personal_of(src),
                                            src.sha256).copy_for_another_message(),
                copied_from=src.id,
                address=src.address,
            ))
            raised = arrival_rule_events(self, [(new, target.name, "copied", None)])
            recorded = uow.save(target, *raised, new)
            last = recorded.positions[-1]
            return Delivery(copy_id, target.id, uid, target.uidvalidity, src.size,
                            src.sha256, last, last, source_uid=src.uid, saved=recorded.events)

        return uow.run(attempt)

    # -- delete, restore, expunge -------------------------------------------------------------
    def delete(self, message_id: UUID) -> Change:
        uow = self.uow

        def attempt() -> Change:
            msg = uow.message(message_id)
            if not msg.soft_delete(self.clock() + self.deleted_retention):
                return Change()
            return Change.of(uow.save(msg))

        return uow.run(attempt)

    def restore(self, message_id: UUID) -> Change:
        uow = self.uow

        def attempt() -> Change:
            msg = uow.message(message_id)
            if msg.state == MessageState.DELETED.value:  # it counts again: it takes room
                account = uow.account_by_id(msg.account_id)
                if self.quotas.applies(account):
                    self.quotas.check(account, 1, msg.size)
            if not msg.restore(self.clock()):
                return Change()
            return Change.of(uow.save(msg))

        return uow.run(attempt)

    def expunge(self, message_ids: Iterable[UUID]) -> Change:
        ids = list(message_ids)
        uow = self.uow

        def attempt() -> Change:
            now = self.clock()
            msgs = [uow.message(i) for i in ids]
            changed = [m for m in msgs if m.expunge(now)]
            return Change.of(uow.save(*changed)) if changed else Change()

        return uow.run(attempt)

    # -- extraction ---------------------------------------------------------------------------
    # An extraction that fails must not count, and no more than the policy's N may succeed,
    # also concurrently: reserve (refused when the counted and reserved extractions reach N),
    # write the bytes, then confirm (counted) or release (not counted). A reservation that is
    # neither confirmed nor released (a crashed extractor) lapses after `reservation_ttl`.
    def reserve_extraction(self, message_id: UUID) -> Reservation:
        """Holds one extraction of the message; ExtractionRefused if none is left."""
        uow = self.uow
        reservation_id = uuid.uuid4()

        def attempt() -> Reservation:
            msg = uow.message(message_id)
            now = self.clock()
            msg.reserve_extraction(reservation_id, now, now + self.reservation_ttl)
            recorded = uow.save(msg)
            return Reservation(message_id, reservation_id, recorded.positions[-1],
                               saved=recorded.events)

        return uow.run(attempt)

    def confirm_extraction(self, reservation: Reservation) -> Change:
        """The bytes were written: the extraction counts (``Extracted``)."""
        uow = self.uow

        def attempt() -> Change:
            msg = uow.message(reservation.message_id)
            msg.extract(self.clock(), reservation.reservation_id)
            return Change.of(uow.save(msg), {"count": msg.extract_count,
                                          "extractions_to_date": msg.extractions_total})

        return uow.run(attempt)

    def release_extraction(self, reservation: Reservation, reason: str) -> Change:
        """The extraction failed before its bytes were written: it does not count."""
        uow = self.uow

        def attempt() -> Change:
            msg = uow.message(reservation.message_id)
            if not msg.release_extraction(reservation.reservation_id, reason):
                return Change()
            return Change.of(uow.save(msg))

        return uow.run(attempt)

    def check_extractable(self, message_id: UUID) -> None:
        """Refuses as ``extract`` would (``ExtractionRefused``: limit used up, date passed,
        state expired; ``InvalidState``: not active), counting nothing: every read of a
        message's content asks this first (``Letterlog.body``; extractions reserve)."""
        self.uow.message(message_id).check_extractable(self.clock())

    def content(self, message_id: UUID) -> Iterator[bytes]:
        """The message's exact bytes, chunk by chunk (not counted: reserve first)."""
        return self._content(self.uow.message(message_id))

    def extract(self, message_id: UUID) -> Iterator[bytes]:
        """Counts an extraction once the message's content is open, then streams it; if the
        content cannot be opened it does not count. To count only once the bytes are
        written somewhere, reserve, write, then confirm or release (``Letterlog.extract_to``
        does)."""
        reservation = self.reserve_extraction(message_id)
        try:
            chunks = self.content(message_id)
        except BaseException as e:
            self.release_extraction(reservation, f"{type(e).__name__}: {e}")
            raise
        self.confirm_extraction(reservation)
        return chunks

    def _content(self, msg: Message) -> Iterator[bytes]:
        if msg.inline:
            body = msg.personal.get("body")
            if not isinstance(body, bytes):
                raise InvalidState(f"message {msg.id}: its content is no longer available")
            return iter((body,))
        return self.payloads.open(msg.address)

    def set_policy(
        self, message_id: UUID, extract_limit: int | None = None,
        extract_until: datetime | None = None,
    ) -> Change:
        cmd = build(SetPolicy, message_id=message_id, extract_limit=extract_limit,
                    extract_until=extract_until)
        uow = self.uow

        def attempt() -> Change:
            msg = uow.message(cmd.message_id)
            if not msg.set_policy(cmd.policy(), self.clock()):
                return Change()
            return Change.of(uow.save(msg))

        return uow.run(attempt)
