"""Quota commands: set an account's own limits, read its limits and usage (the command
side's, exact up to the log's head)."""

from __future__ import annotations

from typing import Any

from domain.errors import InvalidCommand
from domain.quota import Limits, account_limits
from domain.results import Change
from domain.unit_of_work import Commands


class QuotaCommands(Commands):
    """set_quota, quota."""

    def set_quota(self, account: str, *, bytes: int | None = None,
                  messages: int | None = None) -> Change:
        """The account's own limits (unchanged where None; ``0``: unlimited; ``-1``: the
        default setting). An ``Account.QuotaSet`` event; nothing if nothing changes."""
        for name, value in (("bytes", bytes), ("messages", messages)):
            if value is not None and (type(value) is not int or value < -1):
                raise_invalid(name, value)
        uow = self.uow

        def attempt() -> Change:
            acc = uow.account(account)
            own = account_limits(acc)
            new = Limits(own.bytes if bytes is None else bytes,
                         own.messages if messages is None else messages)
            if not acc.set_quota(new):
                return Change()
            return Change.of(uow.save(acc))

        return uow.run(attempt)

    def quota(self, account: str) -> dict[str, Any]:
        """The account's limits (its own, the default's, the effective ones) and usage."""
        acc = self.uow.account(account)
        own = account_limits(acc)
        limits = self.quotas.limits(own)
        used = self.quotas.usage(acc.id)
        return {
            "account": acc.address,
            "bytes": {"limit": limits.bytes, "own": own.bytes,
                      "used": None if used is None else used.bytes},
            "messages": {"limit": limits.messages, "own": own.messages,
                         "used": None if used is None else used.messages},
        }


def raise_invalid(name: str, value: object) -> None:

    raise InvalidCommand(f"{name}: {value!r} is not a quota (a whole number: a limit, "
                         "0 for unlimited, -1 for the default)")
