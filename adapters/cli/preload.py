"""What the command server imports and builds before it serves (ADR 0032): the modules the
commands run on and every command's parser and command schemas, so a forked command starts
with them in memory. Nothing is opened or started here (no store, no connection, no
thread): every command starts as clean as in a new process."""

from __future__ import annotations

import importlib
from typing import Any

from typer.main import get_command

from adapters.cli.app import app
from adapters.cli.lazygroup import MODULE_OF
from domain import commands

# What the commands import when they run (their modules are imported by building them).
PRELOAD = (
    "adapters.embedded", "adapters.bootstrap.tables", "adapters.bootstrap.purging",
    "adapters.bootstrap.directories", "adapters.eventlog.store",
    "adapters.payloads.files", "adapters.tables.memory", "adapters.startup.current",
    "adapters.readside.host", "adapters.readside.queries", "adapters.cli.demo",
    "adapters.cli.importer", "adapters.facade.extraction", "adapters.lifecycle.jobs",
    "adapters.facade.quota", "adapters.rules.matching", "adapters.lifecycle.intents", "regex",
    "domain.service", "domain.commands", "domain.rfc5322.reader", "domain.rfc5322.attachments",
    "domain.rfc5322.defects", "domain.rfc5322.envelope", "domain.rfc5322.inspection",
    "projections.registry", "projections.search", "projections.usage", "eventsourcing.sqlite",
    "typer._click.decorators", "unicodedata", "gc", "ctypes",
)
# built on demand: benchmarks load plotting and the dev servers; the LMTP server, a
# long-running process that no fork of this one serves for speed, loads aiosmtpd
LEFT_OUT = ("bench", "lmtpserver")


def preload() -> int:
    """Imports what commands run on and builds every command's parser and command schemas;
    returns how many commands were built."""


    root: Any = get_command(app)  # the LazyGroup: it keeps each command it builds
    built = 0
    for name, module in MODULE_OF.items():
        if module not in LEFT_OUT:
            root.get_command(None, name)
            built += 1
    for module in PRELOAD:
        importlib.import_module(module)
    stack: list[type[Any]] = [commands.Command]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        cls.model_rebuild(force=True)
    return built
