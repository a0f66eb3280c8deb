"""Defects recorded before ADR 0040, in the form recorded now (``defects``): the text a
defect held (which often quoted a header's value) dropped, what an event's upcast applies
to the facts of a delivery stored before.
"""

from __future__ import annotations

import re
from typing import Any

from domain.rfc5322.defects import RECORDED_HEADERS, defect_class

_TOO_MANY = re.compile(r"TooManyDefects: [0-9]{1,12} more not recorded")

_NESTING_TOO_DEEP = "MIME nesting too deep for the parser"


def without_text(defect: str) -> str:
    """A defect string as recorded before ADR 0040 (``<class>: [<header>: ]<its text>``,
    the text often quoting the header's value) in the form recorded now: the text dropped,
    only the class, a header the parser names and an exception's class kept. Deterministic,
    and a defect recorded now comes back unchanged."""
    kind, *rest = defect.split(": ")
    if defect_class(kind) is None:
        return "Defect"
    if kind == "TooManyDefects":
        return defect if _TOO_MANY.fullmatch(defect) else kind
    if kind == "ParserFailure":
        if rest and rest[0] == _NESTING_TOO_DEEP:
            return "ParserFailure: RecursionError"
        error = defect_class(rest[0]) if rest else None
        return f"{kind}: {error}" if error else kind
    kept = [kind]
    if rest and rest[0] in RECORDED_HEADERS:
        kept.append(rest.pop(0))
    if kind == "HeaderDecodeFailure":
        if rest and rest[0] == "attachment" and len(rest) > 1:  # it named no header
            rest.pop(0)
        error = defect_class(rest[0]) if rest else None
        if error:
            kept.append(error)
    return ": ".join(kept)


def facts_without_text(facts: Any) -> Any:
    """``facts`` of an event (a dict) with each defect ``without_text``; the same object if
    there is nothing to change."""
    if type(facts) is not dict:
        return facts
    defects = facts.get("defects")
    if not defects or not isinstance(defects, list | tuple):
        return facts
    cleaned = [without_text(d) if type(d) is str else "Defect" for d in defects]
    return facts if cleaned == list(defects) else {**facts, "defects": cleaned}
