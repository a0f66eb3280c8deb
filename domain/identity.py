"""One rule for every name that says who someone is: users, accounts (addresses), groups and
ACL identifiers, applied once, where a name comes in (the directory, the ACL commands, the
caller, the account's address), so that everything after it compares names exactly.

The rule is PRECIS's ``UsernameCaseMapped`` profile (RFC 8264, RFC 8265 section 3.3): width
mapping (full-width ``ＢＯＢ`` is ``BOB``), case mapping to lower case (Unicode's
``toLowerCase``), NFC, the bidi rule, and the ``IdentifierClass``, which refuses spaces,
controls, invisible characters, symbols outside ASCII, unassigned code points and every
compatibility form (``ſ`` U+017F, ``ﬁ``, ``ǅ``: a name holding one would mean another name).
``precis-i18n`` implements it; an ASCII name, the usual case, takes a path of its own that
gives the same answer without it (ASCII letters lowered; every printable ASCII character is
allowed by ``IdentifierClass``).

PRECIS leaves confusable names to the application (RFC 8265 section 7.1). On top of it, as
Unicode's UTS #39 "highly restrictive" level does: each part of a name (between ``@`` and
``.``) is written in one script (Latin, Greek, Cyrillic, ...; Latin with Han and Japanese
kana, Bopomofo or Hangul is allowed), so ``аda`` with a Cyrillic ``а`` is refused; and a part
written wholly in Cyrillic, Greek or Armenian letters that each look like a Latin letter
(``аԁа``) is refused as reading as a Latin name. A name the rule refuses is ``NameRefused``
(an ``InvalidCommand``) naming the character, its code point and the problem.

``ß`` stays ``ß``: ``straße`` and ``strasse`` are two users, as RFC 8265 has them (case
*mapping*, not case *folding*).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from domain.errors import InvalidCommand

PROFILE = "UsernameCaseMapped"
ANYONE = "anyone"
AUTHENTICATED = "authenticated"
SPECIAL = (ANYONE, AUTHENTICATED)
NEGATIVE = "-"
GROUP = "$"

_REASONS = {
    "has_compat": "a compatibility form (it would stand for {nfkc!r})",
    "spaces": "a space",
    "controls": "a control character",
    "precis_ignorable_properties": "an invisible (default-ignorable) character",
    "unassigned": "not assigned in Unicode",
    "symbols": "a symbol",
    "punctuation": "punctuation outside ASCII",
    "other": "not allowed in a name",
    "old_hangul_jamo": "an old Hangul jamo",
    "bidi_rule": "against the bidi rule (RFC 5893) for right-to-left text",
    "context": "not allowed in this context",
    "empty": "empty",
}
_ALLOWED_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
# Lower-case letters of other scripts that look like a Latin letter (a part of Unicode's
# confusables.txt, the letters a name is most often forged with).
LOOK_ALIKES = {
    # Cyrillic
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "к": "k",
    "ӏ": "l", "м": "m", "п": "n", "о": "o", "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "т": "t",
    "ц": "u", "ѵ": "v", "ԝ": "w", "х": "x", "у": "y", "ӡ": "3", "ь": "b", "ї": "i",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w",
    # Armenian
    "օ": "o", "ս": "u", "հ": "h", "ո": "n", "ց": "g", "զ": "q", "ա": "w", "լ": "l",
}
_DOVECOT = re.compile(r"^(-?)(user|group|group-override|owner)(=|$)(.*)$", re.S)
_KEYED = re.compile(r"^-?[a-z][a-z0-9_-]*=")


class NameRefused(InvalidCommand):
    """A name the identity rule cannot make unambiguous: ``name`` as given, ``problem`` in
    words."""

    def __init__(self, what: str, name: str, problem: str) -> None:
        self.what = what
        self.name = name
        self.problem = problem
        super().__init__(f"{what}: {name!r} is refused: {problem}")


def _char(ch: str) -> str:
    label = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X} {ch!r}" + (f" ({label})" if label else "")


def _script(ch: str) -> str | None:
    """The script of a letter or digit, from its Unicode name; None for the common and
    inherited characters (ASCII punctuation, ASCII digits, combining marks)."""
    if ch.isascii() and not ch.isalpha():
        return None
    if unicodedata.category(ch)[0] in "MPSZC":
        return None
    word = unicodedata.name(ch, "?").split(" ")[0]
    if word in ("CJK", "IDEOGRAPHIC"):
        return "HAN"
    if word == "DIGIT":
        return None
    return word


def _check_scripts(what: str, given: str, name: str) -> None:
    for part in re.split(r"[@.]", name):
        scripts = {s for ch in part if (s := _script(ch)) is not None}
        if len(scripts) > 1 and not any(scripts <= mix for mix in _ALLOWED_MIXES):
            raise NameRefused(what, given, "it mixes the scripts "
                              f"{', '.join(sorted(s.title() for s in scripts))} in {part!r}"
                              " (a look-alike of another name; UTS #39)")
        letters = [ch for ch in part if ch.isalpha()]
        if scripts and "LATIN" not in scripts and letters and all(
                ch in LOOK_ALIKES for ch in letters):
            latin = "".join(LOOK_ALIKES.get(ch, ch) for ch in part)
            raise NameRefused(what, given, f"{part!r} is written in letters that each look "
                              f"like a Latin one: it reads as {latin!r} (UTS #39)")


def canonical_name(name: str, what: str = "user") -> str:
    """``name`` (a user, an account's address or a group) as the rule has it, or
    ``NameRefused``. Surrounding white space is dropped first (a typed argument's)."""
    text = (name or "").strip()
    # ASCII, the usual case: printable and no space is exactly what IdentifierClass allows
    if text and text.isascii() and text.isprintable() and " " not in text and (
            "," not in text):
        return text.lower()
    return _canonical(name, what)


@lru_cache(maxsize=65536)
def _canonical(name: str, what: str) -> str:
    given = name
    text = (name or "").strip()
    if not text:
        raise NameRefused(what, given, "it is empty")
    if "," in text:
        raise NameRefused(what, given, "a comma separates names in lists (a passwd-file's "
                          "groups, an IMAP ACL's rights): no name holds one")
    if text.isascii():
        bad = next(ch for ch in text if not "\x21" <= ch <= "\x7e")
        raise NameRefused(what, given, f"{_char(bad)} is "
                          f"{_REASONS['spaces' if bad == ' ' else 'controls']}")
    # local: only for names outside ASCII (the PRECIS tables: ~30 ms to import)
    import precis_i18n

    try:
        out = str(precis_i18n.get_profile(PROFILE).enforce(text))
    except UnicodeEncodeError as error:
        reason = str(error.reason).rpartition("/")[2]
        bad = str(error.object)[error.start:error.end] or "?"
        problem = _REASONS.get(reason, _REASONS["other"]).format(
            nfkc=unicodedata.normalize("NFKC", bad))
        where = _char(bad) if reason not in ("bidi_rule", "empty") else "the name"
        raise NameRefused(what, given, f"{where} is {problem} (PRECIS {PROFILE}, RFC "
                          "8265)") from None
    _check_scripts(what, given, out)
    _check_case(what, given, out)
    return out


def _check_case(what: str, given: str, name: str) -> None:
    """A letter whose upper case lowers to another letter (dotless ``ı``: ``I`` is ``i``'s;
    long ``ſ``: ``S`` is ``s``'s) makes a case variant of this name another user's name:
    refused. (A final ``ς`` is ``Σ``'s at a word's end: lowered in context, it stays.)"""
    for ch in name:
        upper = ch.upper()
        if len(upper) == 1 and upper.lower() != ch and ch != "\u03c2":
            raise NameRefused(what, given, f"{_char(ch)} has the upper case {upper!r} of "
                              f"{upper.lower()!r}: a case variant of this name would be "
                              "another's (PRECIS leaves it; refused here)")


def canonical_identifier(identifier: str) -> str:
    """An ACL identifier as the rule has it: ``[-]name``, ``[-]$group``, ``[-]anyone``,
    ``[-]authenticated``. Dovecot's spellings are mapped: ``user=NAME`` is ``NAME``,
    ``group=NAME`` is ``$NAME`` (both also with ``-``); ``owner`` and
    ``group-override=NAME`` have no meaning here and are refused, as is any other
    ``key=`` syntax (a name letterlog would store and match nobody with)."""
    given = identifier
    text = (identifier or "").strip()
    found = _DOVECOT.match(text.lower()) if text[:1] in "-ugoUGO" else None
    if found is not None:
        sign, key, eq, rest = found.groups()
        value = text[len(sign) + len(key) + len(eq):]
        if key == "user" and eq and value:
            text = sign + value
        elif key == "group" and eq and value:
            text = sign + GROUP + value
        elif key == "owner" and not eq:
            raise NameRefused("identifier", given, "Dovecot's 'owner' has no meaning here:"
                              " an account's owner always has every right except what its"
                              " own negative entries take away (name the user instead)")
        elif key == "group-override":
            raise NameRefused("identifier", given, "Dovecot's 'group-override=' is not "
                              "supported (use $group; negative entries then still count)")
        else:
            raise NameRefused("identifier", given, f"{key}= needs a name after it")
    elif _KEYED.match(text.lower()):
        raise NameRefused("identifier", given, "not an identifier syntax letterlog knows "
                          "(a user, $group, anyone, authenticated, user=NAME, group=NAME, "
                          "each optionally with '-' in front)")
    sign = NEGATIVE if text.startswith(NEGATIVE) else ""
    rest = text[len(sign):]
    group = rest.startswith(GROUP)
    name = rest[1:] if group else rest
    if not name or name.startswith((NEGATIVE, GROUP)):
        raise NameRefused("identifier", given, "not a user, $group, anyone or authenticated"
                          " (a leading '-' makes it negative)")
    canonical = canonical_name(name, "group" if group else "identifier")
    return sign + (GROUP if group else "") + canonical


@lru_cache(maxsize=65536)
def identifier_of_event(identifier: str) -> str:
    """The identifier an ``AclChanged`` event names, as the rule has it: events written
    before the rule may spell one user in several ways (``BOB@Example.org``), and each is
    read as the one entry it is (the later change wins); one the rule refuses is kept as
    written (it matches no caller: no caller gets past the rule)."""
    try:
        return canonical_identifier(identifier)
    except NameRefused:
        return identifier


def is_special(identifier: str) -> bool:
    """``anyone`` or ``authenticated`` (also negative), which name no one user."""
    return identifier.removeprefix(NEGATIVE) in SPECIAL
