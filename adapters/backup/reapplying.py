"""An erasure record's erasures made again on a restored store (``reapply``): each message
it names that is still active there is erased, then every key it names is destroyed, and
the files' completion is run (ADR 0046, ADR 0069)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.backup.erasures import ErasureRecord
from domain.errors import MessageNotFound

if TYPE_CHECKING:
    from adapters.face import Store


def reapply(store: Store, record: ErasureRecord) -> dict[str, Any]:
    """Makes ``record``'s erasures again on ``store``: each message it names that is still
    active here is erased (``erase_message``), then every key it names is destroyed."""

    erased, absent = [], 0
    for message_id in sorted(record.messages):
        try:
            state = store.message_record(message_id).state
        except MessageNotFound:
            absent += 1  # delivered after the backup: not in the restored store
            continue
        if state == "purged":
            continue
        store.erase_message(message_id)
        erased.append(str(message_id))
    destroyed = store.log.keys.destroy(record.destroyed_keys)
    completion = store.complete_erasures(record=bool(erased or destroyed))
    return {"messages_erased_again": erased, "messages_not_in_backup": absent,
            "keys_destroyed_again": destroyed, "erasure_complete": completion.complete}
