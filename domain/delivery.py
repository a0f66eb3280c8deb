"""Delivery commands: a message (or a batch) into a mailbox, and large messages by upload.

A delivery checks the message against the limits (``inspect_message``: what the event records
about it), writes a large payload to the payload store before any event exists, allocates the
UIDs in the mailbox and appends every event of the batch at once. What the event records
about the message is built in ``domain.delivery_fields``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from domain import rfc5322
from domain.account import Account
from domain.commands import BeginUpload, Deliver, build
from domain.delivery_fields import (
    delivery_fields,
    envelope_for_event,
    facts_for_event,
    new_message_id,
    thread_id_for,
)
from domain.delivery_key import DeliveryKey, delivery_key_id
from domain.errors import IdempotencyKeyReused, InvalidCommand, InvalidState, MailboxNotFound
from domain.mailbox import Mailbox
from domain.message import Message
from domain.quota_commands import QuotaCommands
from domain.results import Change, Delivery, Upload
from domain.rulecommands import arrival_rule_events
from domain.values import (
    MessageState,
    account_id_for,
)

if TYPE_CHECKING:
    from domain.ports import PayloadStore
    from domain.rfc5322 import MessageFacts

__all__ = ["CheckedDelivery", "DeliveryCommands", "delivery_fields", "envelope_for_event",
           "facts_for_event", "new_message_id", "thread_id_for"]


@dataclass(frozen=True)
class CheckedDelivery:
    """A delivery command whose message passed the limits, with what was found in it."""

    command: Deliver
    facts: MessageFacts
    # the very bytes and facts object ``check`` made them from (kept through pickling)
    checked: tuple[bytes, MessageFacts] | None = field(default=None, repr=False, compare=False)
    # a large message's payload address, its bytes written (and fsynced) ahead by
    # ``store_payloads`` (an importer's reading process: ADR 0104); "" if not written yet
    stored: str = field(default="", compare=False)

    def matches(self) -> bool:
        """Whether ``facts`` are those of the command's bytes: true without hashing again
        when they are the objects ``check`` paired (bytes and facts are immutable)."""
        raw = self.command.raw
        if self.checked is not None and self.checked[0] is raw and self.checked[1] is self.facts:
            return True
        return self.facts.size == len(raw) and self.facts.sha256 == hashlib.sha256(raw).hexdigest()


def _same_bytes(command: Deliver, sha256: str, claimed_sha256: str) -> None:
    """A key answers for the bytes it was first used with: other bytes are not a retry."""
    if sha256 != claimed_sha256:
        raise IdempotencyKeyReused(
            f"idempotency_key: {command.idempotency_key!r} was used for a different message "
            f"(sha256 {claimed_sha256[:12]}..., this one {sha256[:12]}...): nothing was stored; "
            f"a key must name one message (e.g. the MTA's queue id with the recipient)")


class DeliveryCommands(QuotaCommands):
    """deliver, deliver_many, check, deliver_checked; begin_upload, append_chunk,
    complete_upload."""

    def check(self, cmd: Deliver) -> CheckedDelivery:
        """The message of ``cmd`` against the limits, described; MessageRejected if unfit.
        Nothing is written. Importers check each message on its own (one bad message is
        reported, not the batch), in worker processes if they like, then deliver the
        checked ones together (``deliver_checked``). A delivery from an MTA (one with an
        ``envelope``) is never refused for its structure, only for its size or for having
        no bytes: control bytes in its header block are stored as handed over (ADR 0067)."""
        facts = rfc5322.inspect_message(cmd.raw, self.limits,
                                        refuse_binary=cmd.envelope is None)
        return CheckedDelivery(cmd, facts, checked=(cmd.raw, facts))

    def claimed(self, account: str, idempotency_key: str) -> bool:
        """Whether a delivery to ``account`` has claimed ``idempotency_key`` (one read; an
        importer resuming a file asks this before parsing what already landed)."""
        return self.uow.claim_of(delivery_key_id(account_id_for(account), idempotency_key)) \
            is not None

    def store_payloads(self, items: Sequence[CheckedDelivery],
                       payloads: PayloadStore | None = None) -> list[str]:
        """The payload address of each message, ``""`` for one that stays inline; the
        others' payloads are written now, before any event exists (if the append never
        commits they are orphans, which the unreferenced-payload purge collects). A batch's
        payloads are written together. ``deliver_checked`` does this itself; an importer
        may call it ahead (``written_ahead``), for the next batch while the current one is
        appended, or in another process. A message whose payload was written ahead
        (``CheckedDelivery.stored``) is only touched at its address (its written_at
        refreshed, so no purge takes it before the append references it: no hashing, no
        write); if it is gone, it is written again. ``payloads``: the store to write
        through (a reading process's own, opened after its fork), else this one's."""
        store = self.payloads if payloads is None else payloads
        addresses = ["" if c.facts.size <= self.inline_limit
                     else c.stored if c.stored and store.touch(c.stored) else None
                     for c in items]
        todo = [c.command.raw for c, a in zip(items, addresses, strict=True) if a is None]
        if not todo:
            return [a or "" for a in addresses]
        written = iter([ref.address for ref in store.put_many(todo)])
        return [next(written) if a is None else a for a in addresses]

    def written_ahead(self, items: Sequence[CheckedDelivery],
                      payloads: PayloadStore | None = None) -> list[CheckedDelivery]:
        """``items``, their large payloads written now (``store_payloads``), each such item
        carrying its payload's address (``stored``) for the append to find."""
        addresses = self.store_payloads(items, payloads)
        return [replace(c, stored=a) if a and a != c.stored else c
                for c, a in zip(items, addresses, strict=True)]

    def deliver(self, **fields: Any) -> Delivery:
        return self.deliver_many([build(Deliver, **fields)])[0]

    def deliver_many(self, commands: Sequence[Deliver]) -> list[Delivery]:
        """Delivers a batch in one atomic append: one UID allocation per mailbox."""
        return self._deliver([self.check(c) for c in commands])  # facts just made: no re-check

    def deliver_checked(self, items: Sequence[CheckedDelivery], *,
                        new_keys: bool = False) -> list[Delivery]:
        """``deliver_many`` of messages ``check`` has described (here or in another
        process): one atomic append. The facts must be those of the raw bytes (size and
        SHA-256 are compared; a mismatch is an InvalidCommand and nothing is written).
        ``new_keys``: see ``_deliver``."""
        for c in items:
            if not isinstance(c, CheckedDelivery) or not c.matches():
                raise InvalidCommand(f"{c!r:.80}: not a checked delivery of its raw bytes")
        return self._deliver(items, new_keys)

    def _deliver(self, items: Sequence[CheckedDelivery], new_keys: bool = False) -> list[Delivery]:
        """One atomic append for the batch. A command with an idempotency key that an earlier
        delivery claimed (or an earlier command of this batch) stores nothing and is answered
        with that delivery's result.

        Each key's claim is read before the append, unless ``new_keys`` says the caller
        expects them unclaimed (an import past what it found landed): then the first try
        appends without reading them, a claimed key makes the whole append fail (its
        claim's aggregate id is the key's, at version 1, and the log refuses a second
        version 1), nothing is written, and the retry reads every claim. On PostgreSQL such
        a refused append leaves a gap in the log positions, as any refused append does."""
        if not items:
            return []
        uow = self.uow
        commands = [c.command for c in items]
        addresses = self.store_payloads(items)
        prepared = [(c.command.raw, c.facts, address)
                    for c, address in zip(items, addresses, strict=True)]
        now = self.clock()
        ids = [new_message_id() for _ in commands]
        keys = [delivery_key_id(account_id_for(c.account), c.idempotency_key)
                if c.idempotency_key else None for c in commands]

        tries = [0]

        def attempt() -> list[Delivery]:
            optimistic = new_keys and tries[0] == 0
            tries[0] += 1
            answered: dict[int, Delivery] = {}
            same_as: dict[int, int] = {}  # a repeated key in this batch -> its first command
            first_with: dict[UUID, int] = {}
            for i, key in enumerate(keys):
                if key is None:
                    continue
                if key in first_with:
                    same_as[i] = first_with[key]
                    _same_bytes(commands[i], prepared[i][1].sha256,
                                prepared[first_with[key]][1].sha256)
                    continue
                claim = None if optimistic else uow.claim_of(key)
                if claim is not None:
                    answered[i] = self._first_result(claim.message_id)
                    _same_bytes(commands[i], prepared[i][1].sha256, answered[i].sha256)
                else:
                    first_with[key] = i
            todo = [i for i in range(len(commands)) if i not in answered and i not in same_as]
            delivered = self._append(todo, commands, prepared, ids, keys, now) if todo else {}
            results = {**answered, **delivered}
            for i, first in same_as.items():
                results[i] = replace(results[first], duplicate=True)
            return [results[i] for i in range(len(commands))]

        return uow.run(attempt)

    def _first_result(self, message_id: UUID) -> Delivery:
        """What the delivery that claimed a key reported (the message as delivered)."""
        m = self.uow.first_version(message_id)
        if m.mailbox_id is None:
            raise InvalidState(f"message {message_id}: its delivery has no mailbox")
        head = self.uow.head()
        modseq = self.uow.position_of(message_id, 1) or head
        return Delivery(message_id=m.id, mailbox_id=m.mailbox_id, uid=m.uid,
                        uidvalidity=m.uidvalidity, size=m.size, sha256=m.sha256,
                        modseq=modseq, position=head, duplicate=True)

    def _append(self, todo: list[int], commands: list[Deliver],
                prepared: list[tuple[bytes, MessageFacts, str]], ids: list[UUID],
                keys: list[UUID | None], now: datetime) -> dict[int, Delivery]:
        """Delivers the commands at ``todo`` (and claims their keys) in one append."""
        uow = self.uow
        accounts: dict[str, tuple[Account, list[Any]]] = {}
        mailboxes: dict[tuple[str, str], Mailbox] = {}
        groups: dict[tuple[str, str], list[int]] = {}
        for i in todo:
            c = commands[i]
            if c.account not in accounts:
                accounts[c.account] = uow.account_or_open(c.account)
            account, fresh = accounts[c.account]
            key = (c.account, c.mailbox)
            if key not in mailboxes:
                mailboxes[key] = uow.mailbox_named(account, c.mailbox, fresh)
            account.define_labels(frozenset(c.labels))
            groups.setdefault(key, []).append(i)
        quotas = self.quotas
        for address, (account, _) in accounts.items():
            if quotas.applies(account):
                sizes = [prepared[i][1].size for i in todo if commands[i].account == address]
                quotas.check(account, len(sizes), sum(sizes))
        placed: list[tuple[int, Mailbox, int]] = []
        for key, idx in groups.items():
            mailbox = mailboxes[key]
            first = mailbox.allocate_uids([ids[i] for i in idx])
            for n, i in enumerate(idx):
                placed.append((i, mailbox, first + n))
        placed.sort()
        messages: list[Message] = []
        claims: list[DeliveryKey] = []
        for i, mailbox, uid in placed:
            c = commands[i]
            raw, facts, address = prepared[i]
            account = accounts[c.account][0]
            arrival = delivery_fields(
                account, mailbox, uid, ids[i], raw, facts, address,
                labels=c.labels, flags=c.flags, policy=c.policy(),
                internal_date=c.internal_date or now,
                smtp_envelope=c.envelope.for_event() if c.envelope is not None else None,
            )
            messages.append(Message.deliver(ids[i], arrival))
            if c.idempotency_key:
                claims.append(DeliveryKey.claim(account.id, c.idempotency_key, ids[i],
                                                key_id=keys[i]))
        aggregates: list[Any] = []
        for account, fresh in accounts.values():
            aggregates.append(account)
            aggregates.extend(a for a in fresh if a not in mailboxes.values())
        aggregates.extend(mailboxes.values())
        aggregates.extend(claims)
        names = {mb.id: mb.name for mb in mailboxes.values()}
        aggregates.extend(arrival_rule_events(self, [  # event rules (domain.rulecommands)
            (m, names[mb.id], "delivered", prepared[i][0])
            for m, (i, mb, _) in zip(messages, placed, strict=True)]))
        aggregates.extend(messages)
        recorded = uow.save(*aggregates)
        positions = recorded.positions
        mine = positions[-len(messages):]
        return {
            i: Delivery(message_id=m.id, mailbox_id=m.mailbox_id or mb.id, uid=m.uid,
                        uidvalidity=m.uidvalidity, size=m.size, sha256=m.sha256,
                        modseq=mine[n], position=positions[-1], saved=recorded.events)
            for n, (m, (i, mb, _)) in enumerate(zip(messages, placed, strict=True))
        }

    # -- uploads (large messages) -----------------------------------------------------------
    def begin_upload(self, **fields: Any) -> Upload:
        cmd = build(BeginUpload, **fields)
        message_id = new_message_id()
        uow = self.uow

        def attempt() -> Upload:
            account, fresh = uow.account_or_open(cmd.account)
            mailbox = uow.mailbox_named(account, cmd.mailbox, fresh)
            if mailbox.deleted:
                raise MailboxNotFound(f"mailbox: {cmd.mailbox!r} was deleted")
            account.define_labels(frozenset(cmd.labels))
            msg = Message.begin_upload(
                message_id,
                account_id=account.id,
                mailbox_id=mailbox.id,
                internal_date=self.clock(),
                flags=cmd.flags,
                labels=cmd.labels,
                policy=cmd.policy().as_dict(),
            )
            recorded = uow.save(account, *fresh, msg)
            return Upload(message_id, mailbox.id, recorded.positions[-1], saved=recorded.events)

        return uow.run(attempt)

    def append_chunk(self, message_id: UUID, index: int, data: bytes) -> Change:
        if not data:
            raise InvalidCommand("data: an upload chunk must not be empty")
        msg = self.uow.message(message_id)
        if msg.size + len(data) > self.limits.max_size:
            raise InvalidCommand(
                f"data: upload would exceed max_message_size={self.limits.max_size} bytes"
            )
        ref = self.payloads.put(data)
        msg.append_chunk(index, len(data), ref.address)
        return Change.of(self.uow.save(msg))

    def _upload_bytes(self, msg: Message) -> Iterator[bytes]:
        for sha in msg.upload_chunks:
            yield from self.payloads.open(sha)

    def complete_upload(self, message_id: UUID) -> Delivery:
        uow = self.uow
        msg = uow.message(message_id)
        if msg.state != MessageState.INCOMPLETE.value:
            raise InvalidState(f"message {message_id} is {msg.state}; needs incomplete")
        raw = b"".join(self._upload_bytes(msg))
        facts = rfc5322.inspect_message(raw, self.limits)
        inline = facts.size <= self.inline_limit
        address = "" if inline else self.payloads.put_stream(self._upload_bytes(msg)).address

        def attempt() -> Delivery:
            m = uow.message(message_id)
            mailbox = uow.mailbox(m.mailbox_id) if m.mailbox_id else None
            if mailbox is None:
                raise MailboxNotFound(f"message {message_id} has no mailbox")
            account = uow.account_by_id(m.account_id)
            if self.quotas.applies(account):
                self.quotas.check(account, 1, facts.size)
            uid = mailbox.allocate_uids([m.id])
            m.complete_upload(delivery_fields(
                account, mailbox, uid, m.id, raw if inline else None, facts, address,
                labels=sorted(m.labels), flags=sorted(m.flags), policy=m.policy,
                internal_date=m.internal_date,
            ))
            raised = arrival_rule_events(self, [(m, mailbox.name, "delivered", raw)])
            recorded = uow.save(mailbox, *raised, m)
            last = recorded.positions[-1]
            return Delivery(m.id, mailbox.id, uid, mailbox.uidvalidity, facts.size,
                            facts.sha256, last, last, saved=recorded.events)

        return uow.run(attempt)
