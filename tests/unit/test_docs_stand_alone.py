"""The project's docs and code stand alone: nothing cites the design notes the project was
started from (they are not shipped), and no doc or shipped module points outside the
repository's tree (the tests read their mail corpus from beside the checkout)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = re.compile(r"DESIGN(\.md)?\s*§|DESIGN\.md")
OUTSIDE = re.compile(r"\.\./shared")


def shipped() -> list[Path]:
    files = [ROOT / "README.md", *ROOT.glob("docs/**/*.md")]
    for package in ("domain", "projections", "adapters", "spark_replay"):
        files += (ROOT / package).rglob("*.py")
    return files


def test_no_doc_or_module_cites_the_design_notes():
    tests = [p for p in (ROOT / "tests").rglob("*.py") if p != Path(__file__)]
    citing = [str(p.relative_to(ROOT)) for p in shipped() + tests
              if DESIGN.search(p.read_text(errors="replace"))]
    assert citing == []


def test_no_doc_or_shipped_module_points_outside_the_repository():
    pointing = [str(p.relative_to(ROOT)) for p in shipped()
                if OUTSIDE.search(p.read_text(errors="replace"))]
    assert pointing == []
