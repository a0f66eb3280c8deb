"""The fields a delivery, an upload and a delivery's check take, as typed dicts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Required, TypedDict


class Arrival(TypedDict, total=False):
    """``deliver``'s and ``check``'s fields (``domain.commands.Deliver`` validates them)."""

    account: Required[str]
    raw: Required[bytes]
    mailbox: str
    labels: Iterable[str]
    flags: Iterable[str]
    extract_limit: int | None
    extract_until: datetime | None
    internal_date: datetime | None
    idempotency_key: str | None
    envelope: Mapping[str, Any] | None


class UploadStart(TypedDict, total=False):
    """``begin_upload``'s fields (``domain.commands.BeginUpload``)."""

    account: Required[str]
    mailbox: str
    labels: Iterable[str]
    flags: Iterable[str]
    extract_limit: int | None
    extract_until: datetime | None


class Target(TypedDict, total=False):
    """``check_delivery``'s fields: ``deliver``'s without the message."""

    account: Required[str]
    mailbox: str
    labels: Iterable[str]
    flags: Iterable[str]
    extract_limit: int | None
    extract_until: datetime | None
    internal_date: datetime | None
    idempotency_key: str | None
    envelope: Mapping[str, Any] | None
