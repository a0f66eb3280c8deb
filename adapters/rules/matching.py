"""The bounded pattern matcher of event rules: the ``regex`` package, whose searches take a
``timeout`` (checked inside the matching loop, so a catastrophic backtracking pattern is
stopped, unlike the stdlib ``re``). Compiled patterns are cached. ``regex`` is imported on
the first pattern (38 ms here): a store without rules never pays for it, and the command
server imports it once for all its commands (its preload list names ``regex``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from domain.rules import FilterTimeout


def _regex() -> Any:
    import regex  # local: 38 ms, for a store with rules only (the command server preloads it)

    return regex


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Any:
    regex = _regex()
    return regex.compile(pattern, regex.VERSION0)


class RegexMatcher:
    def invalid(self, pattern: str) -> str | None:
        try:
            _compiled(pattern)
        except (_regex().error, ValueError, TypeError) as e:
            return str(e)
        return None

    def search(self, pattern: str, text: str, timeout: float) -> bool:
        try:
            return _compiled(pattern).search(text, timeout=timeout) is not None
        except TimeoutError:
            raise FilterTimeout(f"no answer within {timeout:.3g} s") from None
