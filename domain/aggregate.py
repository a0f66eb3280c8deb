"""The base of letterlog's aggregates: eventsourcing's ``Aggregate`` with cheap copies.

The repository's aggregate cache hands out a deep copy on every ``get`` (so a command that
fails never leaves the cached aggregate half-changed). A generic ``deepcopy`` walks every
UUID and datetime through ``__reduce__``; these values are immutable, so each aggregate
copies only its own mutable containers (``_copy_containers``) and shares the rest.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate


class MailAggregate(Aggregate):
    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        clone = object.__new__(type(self))
        state = dict(self.__dict__)
        state["_pending_events"] = list(self._pending_events)
        self._copy_containers(state)
        clone.__dict__.update(state)
        memo[id(self)] = clone
        return clone

    def _copy_containers(self, state: dict[str, Any]) -> None:
        """Replace, in ``state``, every container an event mutates in place by a copy."""
