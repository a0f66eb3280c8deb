"""The cyclic garbage collector of a ``letterlog`` process: paused while it starts, its
start-up objects set aside once it has, and fewer young collections in bulk work (ADR 0110).

Standard library only: the process's first steps (``adapters.cli.main``, the follower's
module) call ``starting`` before anything else is imported.

* **Start-up.** Importing the command line and a command's modules makes ~150,000 objects
  (modules, classes, the event classes' dataclasses), every one of them alive until the
  process ends; with the collector on, an import's start-up ran ~130 collections over them
  (29 ms of CPU of its ~300, one full collection 15 ms of it). ``starting`` pauses the
  collector; ``started`` (once the command's module is built) moves what exists into the
  permanent generation (``gc.freeze``: never walked again, never collected: objects that
  live as long as the process) and resumes it.
* **Bulk work** (an import, a long-lived delivering process, the projecting follower):
  ``bulk_collections`` raises the young generation's threshold to ``BULK_GC_THRESHOLDS``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

BULK_GC_THRESHOLDS = (100_000, 10, 10)
"""The cyclic collector's thresholds inside a bulk block. With Python's default (700, 10, 10)
an import ran ~90 young collections per 1,000 messages, each walking the batch in hand: ~10%
of the command side's CPU, for garbage that is nearly all freed by reference counting
(ADR 0085: 10,000). With a young generation of 100,000 (at most that many container objects
wait for a collection: ~10-20 MB) the 5,000-message import's importing process spends 22-31
ms of CPU collecting instead of 55-65 (ADR 0110)."""


PROCESS_GC_THRESHOLDS = (10_000, 10, 10)
"""The thresholds of a process once started: a command still imports modules as it opens the
store (the event classes, the read side), ~50 young collections of 700 objects at Python's
default; the 10,000 a bulk block had before (ADR 0085) for every command."""


def starting() -> None:
    """The collector paused while the process imports what it needs."""
    gc.disable()


def started() -> None:
    """What the start-up made set aside for good, and the collector running again (once:
    a process whose collector was not paused by ``starting`` is left as it is)."""
    if gc.isenabled():
        return
    gc.freeze()
    gc.set_threshold(*PROCESS_GC_THRESHOLDS)
    gc.enable()


@contextmanager
def bulk_collections() -> Iterator[None]:
    """The block with ``BULK_GC_THRESHOLDS`` (never more frequent collections than the
    process had); the process's own thresholds restored after it."""
    before = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(BULK_GC_THRESHOLDS, before, strict=True)))
    try:
        yield
    finally:
        gc.set_threshold(*before)
