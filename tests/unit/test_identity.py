"""The identity rule, by example: the names the issue was broken by, and what it answers."""

from __future__ import annotations

import pytest

from domain.identity import NameRefused, canonical_identifier, canonical_name
from domain.rights import RIGHTS, Caller, rights_of, rights_string
from domain.values import account_id_for, normalise_address


@pytest.mark.parametrize(("name", "canonical"), [
    ("Sam@Example.org", "sam@example.org"),
    ("\uff33\uff41\uff4d@example.org", "sam@example.org"),  # full-width
    ("e\u0301ve@example.org", "\u00e9ve@example.org"),  # combining acute: NFC
    ("\u00c9VE@example.org", "\u00e9ve@example.org"),
    ("stra\u00dfe@example.org", "stra\u00dfe@example.org"),  # case mapped, not folded
    ("\u2126\u03bc\u03ad\u03b3\u03b1", "\u03c9\u03bc\u03ad\u03b3\u03b1"),  # the Ohm sign is Greek
    ("  bob  ", "bob"),
])
def test_accepted_names(name, canonical):
    assert canonical_name(name) == canonical


@pytest.mark.parametrize(("name", "says"), [
    ("\u017fam@example.org", r"U\+017F .* compatibility form \(it would stand for 's'\)"),
    ("\ufb01nance", r"U\+FB01 .* compatibility form"),
    ("bob\u200b@example.org", "invisible"),
    ("a b", "a space"),
    ("a\x01b", "control character"),
    ("\u0430da@example.org", "mixes the scripts Cyrillic, Latin"),
    ("\u0430\u0501\u0430@example.org", "reads as 'ada'"),
    ("x,y", "comma"),
    ("", "empty"),
])
def test_refused_names_say_why(name, says):
    with pytest.raises(NameRefused, match=says) as refused:
        canonical_name(name)
    assert refused.value.name == name


def test_names_of_one_script_other_than_latin_are_users_like_any_other():
    ivan = "\u0438\u0432\u0430\u043d@example.org"
    assert canonical_name("\u0418\u0432\u0430\u043d@example.org") == ivan
    assert canonical_name("\u5c71\u7530\u3042\u3044") == "\u5c71\u7530\u3042\u3044"


def test_long_s_and_eszett_own_nothing_of_sam_and_strasse():
    with pytest.raises(NameRefused):
        Caller("\u017fam@example.org")
    strasse = Caller("stra\u00dfe@example.org")
    assert rights_of(strasse, "strasse@example.org", {}) == frozenset()
    assert account_id_for("stra\u00dfe@example.org") != account_id_for("strasse@example.org")
    assert normalise_address("STRASSE@example.org") == "strasse@example.org"


def test_case_no_longer_escapes_a_negative_entry():
    acl = {"anyone": "lr", canonical_identifier("-bob@example.org"): "lr"}
    assert rights_of(Caller("BOB@Example.org"), "ada@example.org", acl) == frozenset()
    acl = {"anyone": "lr", canonical_identifier("-BOB@Example.ORG"): "r"}
    assert rights_string(rights_of(Caller("bob@example.org"), "ada@example.org", acl)) == "l"


@pytest.mark.parametrize(("identifier", "canonical"), [
    ("user=Zed", "zed"), ("-user=zed", "-zed"), ("group=Sales", "$sales"),
    ("-group=sales", "-$sales"), ("ANYONE", "anyone"), ("-Authenticated", "-authenticated"),
    ("$\uff33ales", "$sales"), ("-BOB@Example.org", "-bob@example.org"),
])
def test_identifiers_and_dovecots_spellings(identifier, canonical):
    assert canonical_identifier(identifier) == canonical


@pytest.mark.parametrize(("identifier", "says"), [
    ("owner", "'owner' has no meaning here"),
    ("group-override=staff", "group-override"),
    ("uid=zed", "not an identifier syntax"),
    ("-", "not a user"), ("$", "not a user"), ("-$", "not a user"), ("--bob", "not a user"),
    ("user=", "needs a name"), ("-\u017fam", "compatibility form"),
])
def test_identifiers_the_rule_refuses(identifier, says):
    with pytest.raises(NameRefused, match=says):
        canonical_identifier(identifier)


def test_the_owner_is_the_user_its_address_names_in_any_accepted_form():
    assert rights_string(rights_of(Caller("\uff33AM@Example.org"), "sam@example.org", {})) == RIGHTS


@pytest.mark.parametrize("name", ["ın@example.org", "bıll@example.org"])
def test_a_letter_whose_upper_case_is_another_letters_is_refused(name):
    """``BILL`` is ``bill``'s upper case, and ``bıll``'s (dotless ı): were ``bıll`` a user,
    a case variant of his name would be bill's. (Hypothesis found ``0ı``.)"""
    with pytest.raises(NameRefused, match="U\\+0131"):
        canonical_name(name)
    assert canonical_name(name.upper()) == name.upper().lower()  # that is another name
