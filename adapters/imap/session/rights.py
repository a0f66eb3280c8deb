"""Rights and quotas: the ACL commands (RFC 4314) and QUOTA (RFC 9208)."""

from __future__ import annotations

from typing import Any

from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import _listed_name, _mailbox_name, _text
from adapters.imap.wire import BadCommand, No, Token, astring_out


class RightsCommands(SessionCore):
    # -- ACL (RFC 4314) ----------------------------------------------------------------------
    def _acl_target(self, args: list[Token], count: int) -> tuple[str, str, str, list[str]]:
        if len(args) != count:
            raise BadCommand(f"expected {count} arguments")
        path = _mailbox_name(args[0])
        account, name = self.resolve(path)
        return path, account, name, [_text(a) for a in args[1:]]

    async def cmd_setacl(self, tag: str, args: list[Token]) -> str:
        _, account, name, (identifier, rights) = self._acl_target(args, 3)
        await self.call(self.face.acl_set, account, name, identifier, rights)
        return "SETACL completed"

    async def cmd_deleteacl(self, tag: str, args: list[Token]) -> str:
        _, account, name, (identifier,) = self._acl_target(args, 2)
        await self.call(self.face.acl_delete, account, name, identifier)
        return "DELETEACL completed"

    async def cmd_getacl(self, tag: str, args: list[Token]) -> str:
        path, account, name, _ = self._acl_target(args, 1)
        acl = await self.call(self.face.acl_get, account, name)
        line = b"ACL " + astring_out(_listed_name(path))
        for identifier, rights in acl.items():
            line += b" " + astring_out(identifier) + b" " + astring_out(rights)
        await self.untagged(line)
        return "GETACL completed"

    async def cmd_listrights(self, tag: str, args: list[Token]) -> str:
        path, account, name, (identifier,) = self._acl_target(args, 2)
        await self.call(self.face.acl_get, account, name)  # 'a' needed, as for GETACL
        await self.untagged(b"LISTRIGHTS " + astring_out(_listed_name(path)) + b" "
                            + astring_out(identifier) + b' "" l r s w i p k x t e a')
        return "LISTRIGHTS completed"

    async def cmd_myrights(self, tag: str, args: list[Token]) -> str:
        path, account, name, _ = self._acl_target(args, 1)
        rights = await self.call(self.face.my_rights, account, name)
        await self.untagged(b"MYRIGHTS " + astring_out(_listed_name(path)) + b" "
                            + astring_out(rights))
        return "MYRIGHTS completed"


    # -- QUOTA (RFC 9208) ---------------------------------------------------------------------
    async def cmd_getquotaroot(self, tag: str, args: list[Token]) -> str:
        """GETQUOTAROOT mailbox: its quota root (one per account, named by the account's
        address) and, for the user's own account, the root's usage and limits."""
        if len(args) != 1:
            raise BadCommand("GETQUOTAROOT takes a mailbox")
        path = _mailbox_name(args[0])
        account, name = self.resolve(path)
        await self.call(self._open, account, name)  # NONEXISTENT / NOPERM as for STATUS
        await self.untagged(b"QUOTAROOT " + astring_out(_listed_name(path)) + b" "
                            + astring_out(account))
        try:
            quota = await self.call(self.face.quota, account)
        except No as no:
            if no.code != "NOPERM":
                raise
            return "GETQUOTAROOT completed (the root's usage is its owner's to read)"
        await self.untagged(_quota_line(account, quota))
        return "GETQUOTAROOT completed"

    async def cmd_getquota(self, tag: str, args: list[Token]) -> str:
        if len(args) != 1:
            raise BadCommand("GETQUOTA takes a quota root")
        root = _text(args[0])
        own, _ = self.face.root()
        if root in ("", own):
            root = own
        try:
            quota = await self.call(self.face.quota, root)
        except No as no:
            raise No(f"no quota root {root!r} of this user", "NONEXISTENT") from no
        await self.untagged(_quota_line(root, quota))
        return "GETQUOTA completed"

    async def cmd_setquota(self, tag: str, args: list[Token]) -> str:
        """SETQUOTA: quotas are the administrator's (``letterlog quota set``), so a user's
        is refused (QUOTASET is not announced)."""
        if len(args) != 2 or not isinstance(args[1], list):
            raise BadCommand("SETQUOTA takes a quota root and a list of limits")
        raise No("quotas are set by the administrator (letterlog quota set)", "NOPERM")


def _quota_line(root: str, quota: dict[str, Any]) -> bytes:
    """``* QUOTA root (...)``: STORAGE in KiB (RFC 9208), MESSAGE; an unlimited one is
    left out."""
    items = []
    storage, messages = quota["bytes"], quota["messages"]
    if storage["limit"] > 0:
        items.append(f"STORAGE {(storage['used'] + 1023) // 1024} {storage['limit'] // 1024}")
    if messages["limit"] > 0:
        items.append(f"MESSAGE {messages['used']} {messages['limit']}")
    return b"QUOTA " + astring_out(root) + f" ({' '.join(items)})".encode()
