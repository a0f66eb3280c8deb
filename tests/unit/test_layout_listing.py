"""The tree as the README and docs/architecture.md draw it is the tree as it is: every module or
package they name exists where they put it, and every package of ``adapters``, every module
directly in it, and every top-level package is named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("domain", "projections", "adapters", "spark_replay", "devtools")
NAME = re.compile(r"^[A-Za-z_][\w.]*(?:/|\.py)$")


def drawn_tree(text: str) -> dict[str, set[str]]:
    """The names each top-level package's part of the first drawn tree lists (a code block
    whose lines start with ``domain/``, ``adapters/``...): ``{"adapters": {"cli/", ...}}``."""
    found: dict[str, set[str]] = {}
    for block in _code_blocks(text):
        if not re.search(r"^(domain|adapters)/", block, re.M):
            continue
        top = None
        for line in block.splitlines():
            head = re.match(r"^([A-Za-z_]\w*)/", line)
            if head:
                top = head.group(1)
                found.setdefault(top, set())
                continue
            if top is None or not line.startswith(" "):
                continue
            names = re.split(r"\s{2,}", line.strip())[0].split()
            found[top].update(n.rstrip(",") for n in names if NAME.match(n.rstrip(",")))
        break
    return found


def _code_blocks(text: str) -> list[str]:
    blocks: list[str] = []
    lines: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if lines is None:
                lines = []
            else:
                blocks.append("\n".join(lines))
                lines = None
        elif lines is not None:
            lines.append(line)
    return blocks


def _exists(top: str, name: str) -> bool:
    base = ROOT / top
    if name.endswith("/"):
        return any(p.is_dir() for p in base.rglob(name.rstrip("/")))
    return any(base.rglob(name))


@pytest.mark.parametrize("document", ["README.md", "docs/architecture.md"])
def test_every_name_drawn_exists(document: str) -> None:
    tree = drawn_tree((ROOT / document).read_text())
    assert set(TOPS) <= set(tree), f"{document}: the tree lacks {set(TOPS) - set(tree)}"
    missing = sorted(f"{top}/…/{name}" for top, names in tree.items() if top in TOPS
                     for name in names if not _exists(top, name))
    assert missing == [], f"{document} names what the tree does not hold"


@pytest.mark.parametrize("document", ["README.md", "docs/architecture.md"])
def test_every_part_of_adapters_is_drawn(document: str) -> None:
    drawn = drawn_tree((ROOT / document).read_text()).get("adapters", set())
    parts = {p.name + "/" for p in (ROOT / "adapters").iterdir()
             if p.is_dir() and (p / "__init__.py").exists()}
    parts |= {p.name for p in (ROOT / "adapters").glob("*.py") if p.name != "__init__.py"}
    assert sorted(parts - drawn) == [], f"{document} does not draw these parts of adapters"
