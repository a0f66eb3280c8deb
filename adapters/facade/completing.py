"""Erasures and purge runs completed: those a killed process left (finished by whoever
opens the store next, ADR 0063 and 0084), ``erase complete``, ``erase status``, the KEKs
moved into the key cluster (``keys migrate``, ADR 0073).

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from adapters.eventlog.wrappedkeys import NO_KEY_CLUSTER
from adapters.facade.parts import FacadePart
from adapters.files import datadir
from adapters.lifecycle import intents
from adapters.lifecycle import intents as stored
from domain.errors import SettingsError

if TYPE_CHECKING:
    from adapters.lifecycle.completed import Completion


class Completing(FacadePart):
    """Erasures and purge runs finished, listed and completed; the KEKs migrated."""

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
        if not self.settings.key_store_dsn:
            raise SettingsError(NO_KEY_CLUSTER)
        from adapters.eventlog.keymigrate import migrate_store  # local: psycopg: keys migrate only

        path = Path(self.settings.key_vault or Path(self.settings.data) / datadir.VAULT)
        return migrate_store(self.log.keys, path, remove_file=remove_file)

    def pending_erasures(self) -> list[dict[str, Any]]:
        """The erasures not yet finished on the SQLite files (``letterlog erase status``)."""
        return self.shredding.pending()

    def running_erasures(self) -> list[dict[str, Any]]:
        """Erasures and purge runs a live process is making now (their intents: kind,
        position, when), after any a killed process left have been finished."""
        self.finish_interrupted_erasures()
        return intents.of(self.settings).listing()
