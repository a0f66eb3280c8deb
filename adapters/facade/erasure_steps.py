"""An erasure's steps (ADR 0063): purged under the domain's ``Purging``, keys destroyed,
payloads deleted at once; an account's erasure fenced against deliveries that race it.

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from adapters.facade.parts import FacadePart
from adapters.operations.faults import fault_point
from domain.message import Message
from domain.purging import Outcome, Purging
from projections import names as pn
from projections.keys import payload_row

FENCE_PASSES = 4
"""How often ``erase_account`` reads the log again for deliveries that raced its appends;
with deliveries that never pause it stops there: the fence is the last read's head."""


class ErasureSteps(FacadePart):
    """The steps of an erasure, each idempotent (a crash between them is finished later)."""

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

