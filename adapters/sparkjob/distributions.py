"""Which installed distributions a Spark cluster's executors need to run letterlog's job:
letterlog's run-time requirements (with the extras asked for, and ``include``'s), followed
through their own requirements as installed here. Spark's own packages (pyspark, py4j) are
left out: the nodes' Spark provides them; so are the requirements executors never import
(``NOT_ON_EXECUTORS``)."""

from __future__ import annotations

import importlib.metadata as metadata
import re
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

from domain.errors import SettingsError

SPARK_OWN = frozenset({"pyspark", "py4j", "letterlog"})
NOT_ON_EXECUTORS = frozenset({"typer", "rich", "aiosmtpd", "uvloop", "python-daemon", "httpx",
                              "regex"})
"""letterlog's requirements its executors never import (measured: the modules a range
task, a counters merge, the by-account fold and the export's decoding load): the CLI's
(typer, rich), the MTA's (aiosmtpd, uvloop), the command server's (python-daemon), the event
rules' (httpx, regex). Their own requirements go too unless something shipped needs them."""
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?([^;]*)(?:;(.*))?")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def normal_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def source_requirements() -> list[str] | None:
    """letterlog's requirements from the ``pyproject.toml`` beside its packages (a checkout
    installed in editable mode: its installed metadata is as old as the last install), in
    the metadata's form (``name; extra == "x"``); ``None`` for an installed wheel."""
    path = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if not path.is_file():
        return None
    project = tomllib.loads(path.read_text()).get("project", {})
    if project.get("name") != "letterlog":
        return None
    found = [text.split("#")[0].strip() for text in project.get("dependencies", [])]
    for extra, texts in project.get("optional-dependencies", {}).items():
        found += [f'{text.split("#")[0].strip()}; extra == "{extra}"' for text in texts]
    return found


def requirements(dist: str, extras: Iterable[str] = ()) -> list[tuple[str, list[str]]]:
    """``dist``'s run-time requirements (with ``extras``) as (name, their extras)."""
    wanted = {normal_name(e) for e in extras}
    found = []
    texts = (source_requirements() if dist == "letterlog" else None) or metadata.requires(dist)
    for text in texts or []:
        match = _REQUIREMENT.match(text)
        if match is None:
            continue
        name, inner, _, marker = match.groups()
        extra = _EXTRA.search(marker or "")
        if extra is not None and normal_name(extra.group(1)) not in wanted:
            continue
        found.append((name, [e.strip() for e in (inner or "").split(",") if e.strip()]))
    return found


def closure(extras: Sequence[str], include: Sequence[str] = ()) -> list[metadata.Distribution]:
    """The installed distributions letterlog (with ``extras``) needs, and ``include``'s."""
    todo: list[tuple[str, list[str]]] = [
        *((name, inner) for name, inner in requirements("letterlog", extras)
          if normal_name(name) not in NOT_ON_EXECUTORS),
        *((name, []) for name in include)]
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        name, inner = todo.pop()
        key = normal_name(name)
        if key in SPARK_OWN or key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name in include:
                raise SettingsError(f"--include: {name!r} is not installed here") from None
            continue  # a requirement of a platform or Python this one is not
        seen[key] = dist
        todo.extend(requirements(name, inner))
    return sorted(seen.values(), key=lambda d: normal_name(d.metadata["Name"]))
