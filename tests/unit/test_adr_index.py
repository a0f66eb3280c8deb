"""Every decision record has a status, and the index (docs/adr/README.md) lists each one
once, with that status."""

from __future__ import annotations

import re
from pathlib import Path

ADR = Path(__file__).resolve().parents[2] / "docs" / "adr"


def records() -> dict[str, str]:
    """Each ADR file's name and its status."""
    found = {}
    for path in sorted(ADR.glob("[0-9][0-9][0-9][0-9]-*.md")):
        status = next((line.split(":", 1)[1].strip() for line in path.read_text().splitlines()
                       if line.lower().startswith("status:")), "")
        found[path.name] = status
    return found


def test_every_record_has_a_status():
    assert records() and {name for name, status in records().items() if not status} == set()


def test_the_index_lists_every_record_once_with_its_status():
    index = (ADR / "README.md").read_text()
    listed = re.findall(r"^\| \[\d{4}\]\(([^)]+)\) \| [^|]+ \| (.+) \|$", index, re.M)
    assert sorted(name for name, _ in listed) == sorted(records())
    assert dict(listed) == records()


def test_numbers_are_never_reused():
    numbers = [name[:4] for name in records()]
    assert len(numbers) == len(set(numbers))
