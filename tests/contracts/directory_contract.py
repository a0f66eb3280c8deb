"""The user directory contract: what every ``Directory`` adapter answers.

Subclass ``DirectoryContract`` once per adapter and implement ``make_directory(users)`` (the
only hook): a directory holding exactly ``users`` (name -> the names of its groups; a user
may be in no group, a group may have several members).
"""

from __future__ import annotations

from collections.abc import Mapping

from domain.directory import Directory, DirectoryUser, groups_of

PEOPLE = {
    "ada@example.org": {"sales", "support"},
    "grace@example.org": {"sales"},
    "bob": set(),
    "o'brien-2": {"ops"},
}


class DirectoryContract:
    def make_directory(self, users: Mapping[str, set[str]]) -> Directory:
        raise NotImplementedError

    def test_every_user_comes_with_its_groups_in_name_order(self) -> None:
        assert self.make_directory(PEOPLE).users() == [
            DirectoryUser(name, frozenset(groups)) for name, groups in sorted(PEOPLE.items())]

    def test_a_user_is_found_by_name_with_its_groups(self) -> None:
        directory = self.make_directory(PEOPLE)
        assert directory.user("ada@example.org") == DirectoryUser(
            "ada@example.org", frozenset({"sales", "support"}))
        assert directory.user("o'brien-2") == DirectoryUser("o'brien-2", frozenset({"ops"}))
        assert directory.user("bob") == DirectoryUser("bob")
        assert groups_of(directory, "grace@example.org") == {"sales"}

    def test_an_unknown_user_is_none_and_in_no_group(self) -> None:
        directory = self.make_directory(PEOPLE)
        for name in ("nobody", "ada", "*", "ada@example.org)(uid=*"):
            assert directory.user(name) is None
            assert groups_of(directory, name) == frozenset()

    def test_a_directory_of_no_users_answers_none(self) -> None:
        directory = self.make_directory({})
        assert directory.users() == [] and directory.user("bob") is None
