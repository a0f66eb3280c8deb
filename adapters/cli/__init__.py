"""The letterlog command line (typer): one module per group of commands, the importer, the
demo and the command server.

``main`` is what the ``letterlog`` program runs: an ``lda`` command line goes first to the
data directory's LMTP server when one is listening there (``adapters.startup.handoff``: standard
library only); any command line goes to the user's command server when one is running
(``adapters.startup.commandclient``: standard library only, so a command run there costs
this process no more than the interpreter's start), else runs it here.

May import: ``adapters.embedded``, ``adapters.bootstrap``, ``settings`` and the other
sub-packages (``bench`` lazily, for ``letterlog bench``: the one package that imports
``devtools``); never ``devtools.devservers`` directly.
"""

from __future__ import annotations

import sys

from adapters.startup import collector
from adapters.startup.commandclient import forward


def main() -> None:
    collector.starting()  # resumed once the command is built (``LazyGroup``, ADR 0110)
    if "lda" in sys.argv[1:]:  # first: a running ``letterlog lmtp`` delivers it (ADR 0060)
        # the lda's fast path runs before anything else loads (ADR 0060)
        from adapters.startup.handoff import handoff  # local: the lda's hand-off, before all else

        delivered = handoff(sys.argv[1:])
        if delivered is not None:
            sys.exit(delivered)
    code = forward(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    try:
        # local: run here, the event classes' methods compiled once (ADR 0116); not for
        # a command line the server ran (it would cost the client ~10 ms: ``dataclasses``)
        from adapters.startup import dataclass_code

        dataclass_code.install()
        from adapters.cli.app import main as run_here  # local: typer, when no server ran it
    except BaseException as e:  # a broken installation: for an MTA, a temporary failure
        if "lda" in sys.argv[1:]:
            sys.stderr.write(f"4.3.5 letterlog cannot start: {type(e).__name__}: {e}\n")
            sys.exit(75)
        raise
    run_here()


__all__ = ["main"]  # the typer app: ``from adapters.cli.app import app``
