"""``letterlog bench ...``: benchmarks that print one JSON object (baselines in the same run),
one module per family: ``ingest`` (deliveries), ``readmodels`` (projecting, rebuilding and
querying the read models), ``servers`` (the stream path, start-up alone and through the
command server, the IMAP server) and ``upkeep`` (the purge); ``options`` holds the group and
what every benchmark takes.

The benchmarks are the development tools' (``devtools.bench``, ADR 0086): a checkout has
them, an installed package does not, and then ``letterlog bench`` says so in one line
(exit status 2), never a traceback. This package is the one part of the product that
imports ``devtools``; the root imports it only when ``bench`` runs, and the command server
does not preload it.
"""

from __future__ import annotations

from adapters.cli.bench.options import bench_app
from adapters.cli.common import fail, group

try:  # each module registers its commands on ``bench_app``: this order is ``bench --help``'s
    from adapters.cli.bench import ingest, readmodels, servers, upkeep  # noqa: F401
except ModuleNotFoundError as missing:
    if missing.name not in ("devtools", "devtools.bench"):
        raise  # a tool's own dependency: not ours to hide
    fail("letterlog bench needs the development tools (devtools/), which are not part "
         "of the installed package; run it from a checkout of letterlog (`pip install "
         "-e '.[bench]'`, `make bench`, `make bench-all`)")

app = group("Benchmarks.")
SECTION = (110, 'Benchmarks')  # the root help's section (adapters.cli.table)
app.add_typer(bench_app, name="bench")
