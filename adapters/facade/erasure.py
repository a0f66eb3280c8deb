"""Purge and erasure: the purge jobs (built by ``adapters.bootstrap``, run here), the purge
queue, the right to erasure (``erase_message``, ``erase_account``) and the completion of
the files (``adapters.lifecycle``: ``shredding``, ``completion``, ``scaleout``).

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from adapters.eventlog.keycluster import FallbackVault, PostgresVault
from adapters.facade.parts import FacadePart
from adapters.files import datadir
from adapters.lifecycle import intents
from adapters.lifecycle import intents as stored
from adapters.operations.faults import fault_point
from domain.errors import InvalidCommand, SettingsError
from domain.lifecycle import ALL_QUEUES, Retention
from domain.message import Message
from projections import names as pn
from projections import queries as q
from projections.keys import payload_row

if TYPE_CHECKING:
    from adapters.lifecycle.completed import Completion
    from adapters.lifecycle.intentfiles import Held
    from adapters.lifecycle.jobs import PurgeJobs, PurgeReport


FENCE_PASSES = 4
"""How often ``erase_account`` reads the log again for deliveries that raced its appends;
with deliveries that never pause it stops there: the fence is the last read's head."""


class Erasure(FacadePart):
    """Messages leaving the store: when their queue's time is up, or at once on request."""

    def retention(self) -> Retention:
        return self.settings.retention()

    @property
    def completion(self) -> Completion | None:
        """The last purge run's or erasure's completion of the files (None before one)."""
        return self.shredding.completion

    def purge_jobs(self) -> PurgeJobs:
        """The purge jobs (built by bootstrap) on this store's read side."""
        return self._purge_jobs(self._read())

    def purge(self, now: datetime | None = None, queues: Sequence[str] | None = None, *,
              dry_run: bool = False, progress: Any = None) -> PurgeReport:
        """Runs every due purge job once (or those of ``queues``); see docs/lifecycle.md."""
        jobs = self.purge_jobs()
        chosen = tuple(queues) if queues else ALL_QUEUES
        unknown = [q for q in chosen if q not in ALL_QUEUES]
        if unknown:
            raise InvalidCommand(f"queue: {unknown[0]!r} is not one of {', '.join(ALL_QUEUES)}")
        if dry_run:
            report = jobs.run(now or datetime.now(UTC), chosen, dry_run=True, progress=progress)
        else:
            self.finish_interrupted_erasures()
            with intents.of(self.settings).held("purge", self.max_position()):
                fault_point("purge:intent")
                report = jobs.run(now or datetime.now(UTC), chosen, progress=progress)
                fault_point("purge:completed")
        report.position = self.max_position()  # the read models show the purge from here on
        if not dry_run and self.completion is not None:
            report.erasure = self.completion.as_dict()
        return report

    def purge_due(self, now: datetime | None = None, *, limit: int = 1000) -> list[q.PurgeEntry]:
        host = self._read()
        retention = self.retention()
        ttls = {queue: retention.ttl(queue) for queue in q.QUEUES}
        return self._query(lambda: q.due_purge_entries(
            host.tables, now or datetime.now(UTC), ttls=ttls, limit=limit,
            physical=host.physical))

    def erase_message(self, message_id: UUID, *, with_copies: bool = False) -> dict[str, Any]:
        """Purges one message now, whatever the TTLs (right to erasure). Other messages of
        the same content (same SHA-256) are reported: ``copies_remaining`` (ids, same
        account; erased too ``with_copies``), ``copies_in_other_accounts`` (never named)."""
        # local: start-up: 1 more module(s) for commands that never use it
        from adapters.lifecycle.copies import copies_of

        msg = self.mail.uow.message(message_id)
        self.catch_up()
        host = self._read()
        found = copies_of(host.tables, host.physical, message_id=message_id,
                          account_id=msg.account_id, inline=msg.inline,
                          sha256=msg.sha256 if msg.inline else msg.address)  # ADR 0099
        result = self._erase([message_id, *(found.same_account if with_copies else [])])
        result["copies_remaining"] = [] if with_copies else [str(i) for i in found.same_account]
        result["copies_in_other_accounts"] = found.other_accounts
        return result

    def erase_account(self, address: str) -> dict[str, Any]:
        """Purges every message of an account now, whatever the TTLs (right to erasure).
        Fenced: every message of the account delivered at or before ``erased_through`` (a
        log position after the erasure's own appends) is purged; one delivered while it
        ran is either purged or after that position (ADR 0063)."""
        return self._erase([], account=self.mail.account(address).id)

    # -- erasure as an intent that completes (ADR 0063, docs/lifecycle.md) -------------------
    def _erase(self, message_ids: list[UUID], *, account: UUID | None = None,
               resume: Held | None = None) -> dict[str, Any]:
        """The erasure under a durable intent (``adapters.lifecycle.intents``): written and
        locked before anything is appended, removed once every step is done; a crash on the
        way leaves it for the next process that opens the store (``resume``: that one)."""
        if resume is None:
            fields: dict[str, Any] = ({"account": str(account)} if account is not None
                                      else {"messages": [str(i) for i in message_ids]})
            intent: Held = intents.of(self.settings).begin(
                "erase-account" if account is not None else "erase", self.max_position(),
                **fields)
        else:
            intent = resume
        try:
            result = self._erase_steps(message_ids, account, intent.began)
        except BaseException:
            intent.release()  # an error, not a crash: the next open finishes it
            raise
        intent.finish()
        return result

    def _erase_steps(self, message_ids: list[UUID], account: UUID | None,
                     began: float) -> dict[str, Any]:
        """Purged, keys destroyed, and their payloads deleted at once unless something refers
        to them or a delivery re-used them since the erasure began (no grace period). Every
        step is idempotent; the fault points name the boundaries
        (``adapters.operations.faults``)."""
        released: list[Message] = []

        destroyed = 0

        def erased(messages: Sequence[Message]) -> None:
            nonlocal destroyed
            fault_point("erase:appended")
            destroyed += self.shredding.destroy_keys(messages)
            released.extend(messages)

        # local: start-up: 2 more module(s) for commands that never use it
        from domain.purging import Purging

        fault_point("erase:intent")
        purging = Purging(self.mail.uow, self.retention(), erased)
        fence: tuple[int, int] | None = None
        if account is None:
            outcome = purging.erase(message_ids)
        else:
            outcome, *fenced = self._erase_fenced(purging, account)
            fence = (fenced[0], fenced[1])
        fault_point("erase:keys")
        self.catch_up()
        freed = 0
        shas = {sha for m in released for sha in m.payloads_referred()}
        if self.settings.table_store == "hbase":
            # the workers apply Purged later; `letterlog erase complete` decides the payloads
            # once they have, then compacts HBase (adapters/lifecycle/scaleout.py)
            if outcome.purged or shas:  # resumed: purged by the killed run, payloads owed
                self.shredding.record_scale_out(shas, began, len(released))
            shas = set()
        host = self._read()
        refs = host.physical(pn.PAYLOAD_REFS)
        for sha in shas:
            if not host.tables.get(refs, payload_row(sha)):
                # the file store's (ADR 0071); the domain's port does not name it yet
                freed += self.payloads.delete_unless_touched(  # type: ignore[attr-defined]
                    sha, began) or 0
        fault_point("erase:payloads")
        self.shredding.unfinished += len(outcome.purged)
        self.shredding.after(self._projections)
        fault_point("erase:completed")
        return {"purged": [str(m.id) for m in outcome.purged],
                "already_purged": [str(i) for i in outcome.kept],
                "bytes": outcome.purged_bytes, "keys_destroyed": destroyed,
                "payload_bytes_freed": freed,
                "position": self.max_position(),
                **({"erased_through": fence[0], "found_while_erasing": fence[1]}
                   if fence is not None else {}),
                "scale_out_pending": self.settings.table_store == "hbase" and bool(
                    outcome.purged or released),  # `letterlog erase complete` finishes it
                **(self.completion.as_dict() if self.completion else {})}

    def _erase_fenced(self, purging: Any, account: UUID) -> tuple[Any, int, int]:
        """Every message of ``account`` in the log, purged; then the log read again from
        where the last read stopped, and so on until a read finds none new: its head is the
        fence (every delivery of the account at or before it is purged; a later one was
        committed after the erasure's last append). Under deliveries that never pause, at
        most ``FENCE_PASSES`` reads: the fence is then the last read's head, every delivery
        up to it purged, later ones reported as after it. Also: how many were found by a
        read after the first (delivered while the erasure ran)."""
        # local: start-up: 2 more module(s) for commands that never use it
        from domain.purging import Outcome

        total = Outcome()
        seen: set[UUID] = set()
        scanned, late, passes = 0, 0, 0
        while True:
            head = self.max_position()
            found = [e.originator_id for _, e in self.events(start=scanned + 1, stop=head)
                     if type(e) in (Message.Delivered, Message.UploadBegun)
                     and e.account_id == account and e.originator_id not in seen]
            scanned = head
            if not found or passes == FENCE_PASSES:  # the fence: every delivery up to head
                if found:  # found by the last read: erased too (all up to head are)
                    done = purging.erase(found)
                    total.purged += done.purged
                    total.kept += done.kept
                    late += len(found)
                return total, head, late
            if passes:
                late += len(found)
            passes += 1
            seen.update(found)
            done = purging.erase(found)
            total.purged += done.purged
            total.kept += done.kept

    def finish_interrupted_erasures(self) -> list[dict[str, Any]]:
        """Finishes every erasure or purge run a process left unfinished (killed: its intent
        is in ``<data>/erasures-intent/``, or on scale-out in the log's database, and no live
        process holds it, whichever host it ran on: ADR 0084): an erasure is made again
        from its ids, every ``Purged`` since a purge run began has its key destroyed and its
        payloads deleted (unless referred to or re-used since it began; on HBase: their grace
        started), the vault loses the KEKs rotated away, the files are checkpointed.
        Run when a store opens, and by ``purge``, ``erase complete``, ``erase status``.
        Without read models only the keys are done; the intent stays for the next one."""
        intents = stored.of(self.settings)
        if not intents.any():
            return []
        done: list[dict[str, Any]] = []
        taken = intents.abandoned()
        for n, intent in enumerate(taken):
            summary = {"kind": intent.kind, "position": intent.position}
            try:
                self.shredding.destroy_keys_purged_since(intent.position)
                if self._projections is None and self._read_side is None:
                    intent.release()  # keys done; the payloads and files need the read side
                    summary["keys_only"] = True
                elif intent.kind == "erase-account" and intent.body.get("account"):
                    self._erase([], account=UUID(intent.body["account"]), resume=intent)
                elif intent.kind == "erase":
                    self._erase([UUID(i) for i in intent.body.get("messages", [])],
                                resume=intent)
                else:  # a purge run (or a record this version does not know): its Purged
                    self.shredding.purged(self.shredding.purged_since(intent.position),
                                          crash_points=False)
                    self.shredding.free_released(self._read(), intent.began)
                    self.shredding.after(self._projections)
                    intent.finish()
            except BaseException:
                for left in taken[n:]:  # this one and those not reached: the next one's
                    left.release()
                raise
            done.append(summary)
        self.interrupted_finished = [*getattr(self, "interrupted_finished", []), *done]
        return done

    def complete_erasures(self, *, record: bool = False) -> Completion:
        """Finishes the erasures still pending on this store's SQLite files (``letterlog
        erase complete``), and any a killed process left (its intent); with ``record``, one
        left unfinished is recorded."""
        self.finish_interrupted_erasures()
        return self.shredding.complete(record=record)

    def migrate_keys(self, *, remove_file: bool = True) -> dict[str, Any]:
        """``letterlog keys migrate``: the vault file's KEKs moved into the key cluster
        (``LETTERLOG_KEY_STORE_DSN``), checked, then the file removed (ADR 0073);
        idempotent. ``SettingsError`` when no key cluster is configured."""
        # local: start-up: 3 more module(s) for commands that never use it
        from adapters.eventlog.keymigrate import migrate

        # local: start-up: 2 more module(s) for commands that never use it
        from adapters.eventlog.wrappedkeys import WrappedKeyStore

        keys = self.log.keys
        vault = keys.vault if isinstance(keys, WrappedKeyStore) else None
        if not isinstance(keys, WrappedKeyStore) or not isinstance(
                vault, FallbackVault | PostgresVault):
            raise SettingsError("no key store to move the key-encryption keys into: set "
                                "LETTERLOG_KEY_STORE_DSN (the key cluster; scale-out only)")
        primary = vault.primary if isinstance(vault, FallbackVault) else vault
        path = Path(self.settings.key_vault or Path(self.settings.data) / datadir.VAULT)
        return migrate(path, primary, keys.table.referenced(), remove_file=remove_file)

    def pending_erasures(self) -> list[dict[str, Any]]:
        """The erasures not yet finished on the SQLite files (``letterlog erase status``)."""
        return self.shredding.pending()

    def running_erasures(self) -> list[dict[str, Any]]:
        """Erasures and purge runs a live process is making now (their intents: kind,
        position, when), after any a killed process left have been finished."""
        self.finish_interrupted_erasures()
        return intents.of(self.settings).listing()
