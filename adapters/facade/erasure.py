"""The right to erasure (``erase_message``, ``erase_account``): each an intent that
completes (ADR 0063), its steps in ``erasure_steps``; the completion of the files is
``adapters.lifecycle``'s (``shredding``, ``completion``, ``scaleout``).

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from adapters.facade.erasure_steps import ErasureSteps
from adapters.lifecycle import intents
from adapters.lifecycle.copies import copies_of

if TYPE_CHECKING:
    from adapters.lifecycle.intentfiles import Held


class Erasure(ErasureSteps):
    """Messages leaving the store at once, on request (the right to erasure)."""

    def erase_message(self, message_id: UUID, *, with_copies: bool = False) -> dict[str, Any]:
        """Purges one message now, whatever the TTLs (right to erasure). Other messages of
        the same content (same SHA-256) are reported: ``copies_remaining`` (ids, same
        account; erased too ``with_copies``), ``copies_in_other_accounts`` (never named)."""
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

