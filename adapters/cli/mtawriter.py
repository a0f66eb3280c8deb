"""``python -m adapters.cli.mtawriter FD WATCHES_FD SERVER_PID``: the LMTP server's writer
process, an entry point (``adapters.mta.writerprocess.WriterProcess`` starts it and talks
over the sockets ``FD`` and ``WATCHES_FD``; it ends with ``SERVER_PID``)."""

from __future__ import annotations

import sys

from adapters.startup import collector, dataclass_code

if __name__ == "__main__":  # the process's own imports below live as long as it does
    collector.starting()
    dataclass_code.install()  # the event classes' methods compiled once (ADR 0116)

from adapters.cli.leaving import leave  # noqa: E402
from adapters.mta.writerprocess import serve  # noqa: E402

if __name__ == "__main__":
    collector.started()
    leave(serve(*(int(a) for a in sys.argv[1:4])))
