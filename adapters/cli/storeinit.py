"""``letterlog init``: the store that lda and lmtp deliver into, and every other command
reads (none of them creates one)."""

from __future__ import annotations

from adapters.cli.common import group, out, state

app = group("Mail from an MTA.")
SECTION = (132, 'Mail from an MTA')  # the root help's section (adapters.cli.table)


@app.command()
def init() -> None:
    """Create an empty store in the data directory (--data), for lda and lmtp to deliver
    into, and for every other command (none of them creates one). Nothing happens to a store
    that exists."""
    store = state.admin(create=True)
    out({"data": str(state.data), "position": store.max_position()},
        f"{state.data}: a letterlog store (log at position {store.max_position()})")
