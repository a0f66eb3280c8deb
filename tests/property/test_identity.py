"""The identity rule (``domain.identity``) against generated Unicode names: case variants,
compatibility and width forms, confusable letters of other scripts, combining marks. Whatever
the name, two names the rule makes different never share an account, an ownership, an ACL
entry or a negative entry; and every form of one name that the rule accepts is that name."""

from __future__ import annotations

import unicodedata

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from domain.errors import InvalidCommand
from domain.identity import LOOK_ALIKES, NameRefused, canonical_identifier, canonical_name
from domain.rights import RIGHTS, Caller, rights_of, rights_string
from domain.values import account_id_for, normalise_address

# letters most forged with: Latin with their case, width, compatibility and accented forms,
# the look-alikes of other scripts, combining marks, and the characters around them
TRICKY = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+"
          "\u017f\u00df\u1e9e\u0130\u0131\u212a\u2126\u00b5\u03bc\u01c5\u01c6\ufb01\ufb00"
          "\uff41\uff22\uff10\u2460\u00aa\u00b2\u2160"  # width and compatibility forms
          "\u00e9\u00c9\u0301\u0300\u0308\u0327\u030a\u00e5\u212b\u00c5"  # marks, Angstrom
          + "".join(LOOK_ALIKES) +
          "\u0438\u0436\u03bb\u4e2d\u3042\u30a2\ud55c"  # letters of other scripts
          "\u200b\u200d\u00ad\u2028\u0000 \t")  # invisible, spaces, controls
raw_names = st.text(alphabet=TRICKY, min_size=1, max_size=12)
bases = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=8)
DISGUISES = {  # one letter -> the forms some rule or other makes it
    "s": ["S", "\uff53", "\u017f", "\u0455"], "k": ["K", "\u212a", "\u043a", "\uff4b"],
    "a": ["A", "\u0430", "\u03b1", "\uff41", "a\u0301", "\u00e1"], "e": ["E", "\u0435", "\u00e9"],
    "o": ["O", "\u043e", "\u03bf", "\uff4f", "\u00f6", "o\u0308"], "i": ["I", "\u0131", "\u0456"],
    "f": ["F", "\ufb01"], "u": ["U", "\u00fc", "u\u0308"], "1": ["\u2460", "\uff11", "\u00b9"],
}


@st.composite
def disguised(draw, base):
    """``base`` with some of its letters disguised (case, width, compatibility, accents,
    look-alikes of other scripts), and maybe an invisible character slipped in."""
    out = []
    for ch in base:
        forms = DISGUISES.get(ch, [ch.upper()])
        out.append(draw(st.sampled_from([ch, ch, *forms])))
    name = "".join(out)
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(name)))
        name = name[:at] + draw(st.sampled_from(["\u200b", "\u00ad", " "])) + name[at:]
    return name


names = st.one_of(bases.flatmap(disguised), raw_names)
domains = st.sampled_from(["example.org", "EXAMPLE.org", "\uff45xample.org", "exam\u0440le.org"])


def canonical(name: str) -> str | None:
    try:
        return canonical_name(name)
    except NameRefused:
        return None


def address(local: str, domain: str) -> str | None:
    try:
        return normalise_address(f"{local}@{domain}")
    except InvalidCommand:  # NameRefused is one too
        return None


@given(names)
def test_an_accepted_name_is_a_fixed_point_without_compatibility_forms(name):
    out = canonical(name)
    assume(out is not None)
    assert canonical_name(out) == out  # idempotent: canonical once is canonical for good
    assert out == out.lower() and unicodedata.normalize("NFC", out) == out
    assert unicodedata.normalize("NFKC", out) == out  # no compatibility form survives
    assert all(unicodedata.category(ch)[0] not in "CZ" for ch in out)  # nothing invisible


@given(names)
def test_the_decomposed_and_composed_forms_of_a_name_are_one_name(name):
    forms = {canonical(unicodedata.normalize(f, name)) for f in ("NFC", "NFD")}
    assert len(forms) == 1


@given(names, st.lists(st.booleans(), min_size=12, max_size=12))
def test_a_case_variant_is_the_same_name_or_refused(name, flips):
    variant = "".join(ch.upper() if flip and len(ch.upper()) == 1 else ch
                      for ch, flip in zip(name, flips, strict=False))
    a, b = canonical(name), canonical(variant)
    if a is not None and b is not None:
        assert a == b or unicodedata.normalize("NFKC", name) != name


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=10), st.data())
def test_a_latin_name_forged_with_look_alike_letters_is_refused(name, data):
    alike = {latin: [k for k, v in LOOK_ALIKES.items() if v == latin] for latin in set(name)}
    forgeable = [i for i, ch in enumerate(name) if alike[ch]]
    assume(forgeable)
    chosen = data.draw(st.sets(st.sampled_from(forgeable), min_size=1))
    forged = "".join(data.draw(st.sampled_from(alike[ch])) if i in chosen else ch
                     for i, ch in enumerate(name))
    assert canonical(forged) is None  # mixed scripts, or every letter a look-alike
    assert canonical(name) == name


@st.composite
def pairs(draw):
    """Two names, each a disguise of one of two bases (often the same one)."""
    one, two = draw(bases), draw(bases)
    return (draw(disguised(draw(st.sampled_from([one, two])))),
            draw(disguised(draw(st.sampled_from([one, two])))))


# the pairs are drawn from disguises of a few bases, and names no rule accepts are assumed
# away: under some seeds hypothesis's health checks flagged the filtering or the size of the
# draws (a failure seen twice in test-fast, never an assertion): those checks are not the test
@settings(suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.data_too_large,
                                 HealthCheck.too_slow])
@given(pairs(), domains, domains)
def test_distinct_users_never_share_an_account_an_ownership_or_a_right(pair, da, db):
    """The attack: a name that some rule folds to another user's name (``ſam``, ``SAM``,
    ``ｓａｍ``, a Cyrillic ``ѕam``) must either be that user or nobody; never a second user
    who owns the first one's account, holds its rights or escapes its negative entries."""
    a, b = pair
    assume(a[:1] not in "-$" and b[:1] not in "-$")  # no user's name (validate_user)
    addr_a, addr_b = address(a, da), address(b, db)
    assume(addr_a is not None and addr_b is not None)
    same = addr_a == addr_b
    assert (account_id_for(addr_a) == account_id_for(addr_b)) == same
    user_a, user_b = Caller(f"{a}@{da}"), Caller(f"{b}@{db}")
    assert (user_a.user == user_b.user) == same
    # b's account: a is its owner only if a is b
    assert (rights_string(rights_of(user_a, addr_b, {})) == RIGHTS) == same
    # an entry for b (as typed in any of its forms) gives a nothing unless a is b
    entry = canonical_identifier(f"{b}@{db}")
    assert bool(rights_of(user_a, "owner@example.org", {entry: "lr"})) == same
    # a negative entry for b takes from a only if a is b
    denied = {"anyone": "lr", "-" + entry: "lr"}
    assert (rights_of(user_a, "owner@example.org", denied) == frozenset()) == same
