"""RFC 4314's rules: rights strings, the obsolete c and d, negative rights, groups, the owner;
and the flags' rights (STORE)."""

from __future__ import annotations

import pytest

from domain.errors import InvalidCommand
from domain.rights import (
    RIGHTS,
    Caller,
    apply_change,
    flag_rights,
    parse_rights,
    rights_of,
    rights_string,
    validate_identifier,
)

FRED = Caller("fred@example.org")


def test_rights_are_kept_in_rfc_4314_order():
    assert rights_string(parse_rights("rwipslxetak")) == "lrswipkxtea" == RIGHTS


def test_rfc_4314_setacl_examples_add_the_obsolete_c_and_d_as_their_new_rights():
    # RFC 4314 3.1: "Fred rwipslxetad Chris lrswi", then SETACL INBOX/Drafts Chris +cda
    assert apply_change("rwipslxetad", "rwipslxetad") == "lrswipxtea"
    assert set(apply_change("lrswi", "+cda")) == set("lrswicdakxet") - {"c", "d"}


@pytest.mark.parametrize("bad", ["lrQswicda", "lrqswicda", "lr s"])
def test_an_unknown_right_is_refused_naming_it(bad):
    with pytest.raises(InvalidCommand, match="is not a right"):
        parse_rights(bad)


def test_negative_rights_subtract_from_the_union_of_every_identifier_naming_the_caller():
    # RFC 4314 2: "Fred" rwipslxetad, "-Fred" wetd -> Fred has rwipslxetad minus wetd
    acl = {"fred@example.org": rights_string(parse_rights("rwipslxetad")),
           "-fred@example.org": rights_string(parse_rights("wetd"))}
    assert rights_string(rights_of(FRED, "ada@example.org", acl)) == "lrsipxa"
    groups = Caller("fred@example.org", frozenset({"sales"}))
    acl = {"anyone": "l", "$sales": "lrs", "authenticated": "w", "-$sales": "w"}
    assert rights_string(rights_of(groups, "ada@example.org", acl)) == "lrs"
    assert rights_string(rights_of(FRED, "ada@example.org", acl)) == "lw"


def test_the_owner_and_the_administrator_have_every_right():
    assert rights_string(rights_of(Caller("Ada@Example.org"), "ada@example.org", {})) == RIGHTS
    assert rights_string(rights_of(Caller("Ada@Example.org"), "ada@example.org",
                                   {"anyone": "l"})) == RIGHTS


def test_the_owners_negative_entries_count_but_she_keeps_a():
    ada = Caller("ada@example.org", frozenset({"staff"}))
    for acl, left in (({"-ada@example.org": "lr"}, "swipkxtea"),
                      ({"-$staff": "rswipkxtea"}, "la"),
                      ({"-anyone": "a", "-ada@example.org": "i"}, "lrswpkxtea")):
        assert rights_string(rights_of(ada, "ada@example.org", acl)) == left
    assert rights_string(rights_of(Caller(), "ada@example.org", {})) == RIGHTS
    assert rights_of(FRED, "ada@example.org", {}) == frozenset()


def test_doveadm_style_changes_add_take_or_replace():
    assert apply_change("lr", "+w") == "lrw"
    assert apply_change("lrw", "-rw") == "l"
    assert apply_change("lrw", "s") == "s"
    assert apply_change("l", "-l") == ""


def test_flags_need_seen_delete_or_write_as_rfc_4314_store_does():
    assert flag_rights(["\\Seen"]) == "s"
    assert flag_rights(["\\Deleted"]) == "t"
    assert flag_rights(["\\Flagged", "$Work"]) == "w"
    assert flag_rights(["\\seen", "\\Answered"]) == "sw"


@pytest.mark.parametrize("ok", ["bob@example.org", "$sales", "anyone", "-anyone", "-$sales"])
def test_identifiers(ok):
    assert validate_identifier(ok) == ok


@pytest.mark.parametrize("bad", ["", "-", "$", "a b", "x,y", "\x00"])
def test_malformed_identifiers_are_refused(bad):
    with pytest.raises(InvalidCommand, match="identifier"):
        validate_identifier(bad)
