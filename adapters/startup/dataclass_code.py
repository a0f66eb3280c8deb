"""The compiled code of the dataclasses' generated methods, kept between processes (ADR 0116).

Standard library only (``dataclasses``, ``marshal``); the process's first steps
(``adapters.cli.main``, the follower's and the LMTP writer's modules) call ``install`` before
the application is imported.

Every event class is a frozen dataclass (the eventsourcing library makes each one so), and a
``letterlog`` process defines ~200 of them, plus the settings' and the commands' models, when
it imports the domain. For each class ``dataclasses`` writes the source of ``__init__``,
``__repr__``, ``__eq__``, ``__setattr__``, ``__delattr__`` and ``__hash__`` and compiles it
with ``exec``: ~1,100 compilations, ~60 ms of a command's ~210 ms of imports (measured;
Python 3.11). The source depends only on the class's fields, so the same text compiles to the
same code in every process.

``install`` gives the ``dataclasses`` module its own ``exec`` (a module global shadows the
builtin; nothing of ``dataclasses`` is replaced): a source text already compiled (in this
process, or by an earlier one: the cache file) is executed from its code object, any other is
compiled as ``exec`` would compile it (no ``__future__`` flags inherited: the ``dataclasses``
module has none) and remembered. What runs is what ``dataclasses`` wrote: a class defined with
the cache is the class defined without it (tests/unit/test_dataclass_code.py).

The cache file sits beside the package's bytecode (``__pycache__``, or under
``PYTHONPYCACHEPREFIX``), named by the interpreter's cache tag and checked against its magic
number, and is trusted as the ``.pyc`` files there are. A process that compiled something new
(never a child it forked) writes it at exit, in one step (a new file renamed over the old
one), unless bytecode writing is off (``PYTHONDONTWRITEBYTECODE``, ``-B``) or the directory
is not writable; a damaged or foreign file is ignored (the process compiles, as without the
cache).
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from typing import Any

MAX_ENTRIES = 8192
"""Source texts kept at most (a process of today's code defines ~650 distinct ones; the file
is ~0.8 MB). Beyond it, a process writes back only those it used."""

_code: dict[str, bytes] = {}  # from the file: source text -> its code, marshalled
_compiled: dict[str, Any] = {}  # what this process used: source text -> its code object
_state = {"installed": False, "new": 0, "pid": 0}


def cache_file() -> Path | None:
    """Where the cache lives: this module's bytecode directory, one file per interpreter;
    None for an interpreter that keeps no bytecode files (no cache tag)."""
    try:
        pyc = Path(importlib.util.cache_from_source(__file__))
    except NotImplementedError:
        return None
    return pyc.with_name(f"dataclass-code.{sys.implementation.cache_tag}.marshal")


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """``exec``, for ``dataclasses``: a source text runs from its compiled code."""
    if type(source) is str:
        code = _compiled.get(source)
        if code is None:
            stored = _code.get(source)
            if stored is not None:
                code = marshal.loads(stored)
            else:  # marshalled only if the file is written (``_save``)
                code = compile(source, "<string>", "exec", dont_inherit=True)
                _state["new"] += 1
            _compiled[source] = code
        source = code
    builtins.exec(source, globals, locals)


def install() -> None:
    """The cache loaded and ``dataclasses`` given its ``exec`` (once; a no-op when something
    else already gave it one)."""
    if _state["installed"] or "exec" in vars(dataclasses):
        return
    _state["installed"], _state["pid"] = True, os.getpid()
    _code.update(_load(cache_file()))
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    if not sys.dont_write_bytecode:
        atexit.register(_save)


def _load(path: Path | None) -> dict[str, bytes]:
    if path is None:
        return {}
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    magic = importlib.util.MAGIC_NUMBER
    if not data.startswith(magic):
        return {}
    try:
        loaded = marshal.loads(data[len(magic):])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(loaded, dict) or not all(
            type(k) is str and type(v) is bytes for k, v in loaded.items()):
        return {}
    return loaded


def _save() -> None:
    """Writes the cache if this process compiled something new (at exit). A forked child
    (a command server's command, an import's reader) never does: the file is its parent's to
    write, and a child that did would rewrite it at each command's end."""
    if not _state["new"] or os.getpid() != _state["pid"]:
        return
    path = cache_file()
    if path is None:
        return
    new = {k: marshal.dumps(c) for k, c in _compiled.items() if k not in _code}
    keep = {**_code, **new} if len(_code) + len(new) <= MAX_ENTRIES else {
        k: _code.get(k) or new[k] for k in _compiled}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(importlib.util.MAGIC_NUMBER + marshal.dumps(keep))
        os.replace(tmp, path)
    except OSError:  # a read-only installation: the next process compiles, as without it
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    _state["new"] = 0
