"""Commands: small frozen pydantic models named in the imperative, validated at the edge.

Invalid input raises ``InvalidCommand`` naming the field; nothing is written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from domain.errors import InvalidCommand
from domain.extraction_policy import ExtractionPolicy
from domain.flags import FlagMode, validate_flag
from domain.values import Role, normalise_address, validate_label, validate_mailbox_name


class Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True,
                              defer_build=True)


C = TypeVar("C", bound=Command)


def build(cls: type[C], **fields: Any) -> C:
    """Constructs a command, turning pydantic's errors into one InvalidCommand naming the field."""
    try:
        return cls(**fields)
    except ValidationError as e:
        parts = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"]) or cls.__name__
            msg = str(err["msg"]).removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}")
        raise InvalidCommand("; ".join(parts)) from None


def _aware(v: datetime | None) -> datetime | None:
    if v is not None and v.tzinfo is None:
        raise ValueError("must include a timezone (e.g. 2030-01-01T00:00:00+00:00)")
    return v


class _AccountCommand(Command):
    account: str

    @field_validator("account")
    @classmethod
    def _account(cls, v: str) -> str:
        try:
            return normalise_address(v)
        except InvalidCommand as e:
            raise ValueError(str(e).removeprefix("account: ")) from None


class _MailboxField(Command):
    @field_validator("mailbox", check_fields=False)
    @classmethod
    def _mailbox(cls, v: str) -> str:
        try:
            return validate_mailbox_name(v)
        except InvalidCommand as e:
            raise ValueError(str(e).removeprefix("mailbox: ")) from None


def _labels(v: list[str]) -> list[str]:
    try:
        return sorted({validate_label(x) for x in v})
    except InvalidCommand as e:
        raise ValueError(str(e).removeprefix("label: ")) from None


def _flags(v: list[str]) -> list[str]:
    try:
        return sorted({validate_flag(x) for x in v})
    except InvalidCommand as e:
        raise ValueError(str(e).removeprefix("flag: ")) from None


_ENVELOPE_TEXT = Field(default="", max_length=2048, pattern=r"^[^\x00-\x1f\x7f]*$")


class SmtpEnvelope(Command):
    """What the MTA said about a delivery (the RFC 5321 envelope, not the headers): kept with
    the message in its sealed personal part, so erasing the message erases it too."""

    sender: str = _ENVELOPE_TEXT  # the reverse path; "<>" is the null sender (a bounce)
    recipient: str = _ENVELOPE_TEXT  # the final recipient, as the MTA gave it
    original_recipient: str = _ENVELOPE_TEXT  # before aliases and forwarding
    detail: str = _ENVELOPE_TEXT  # "tag" of user+tag@domain
    queue_id: str = _ENVELOPE_TEXT  # the MTA's queue id (lda)
    session: str = _ENVELOPE_TEXT  # the LMTP session
    client: str = _ENVELOPE_TEXT  # the LMTP client's address
    via: str = _ENVELOPE_TEXT  # lda | lmtp
    arrived_at: datetime | None = None

    _v_at = field_validator("arrived_at")(classmethod(lambda cls, v: _aware(v)))

    def for_event(self) -> dict[str, Any]:
        """Only what was given (the empty fields are left out)."""
        return {k: v for k, v in self.model_dump().items() if v not in ("", None)}


class Deliver(_AccountCommand, _MailboxField):
    mailbox: str = "INBOX"
    raw: bytes = Field(repr=False)
    labels: list[str] = []
    flags: list[str] = []
    extract_limit: int | None = Field(default=None, ge=1)
    extract_until: datetime | None = None
    internal_date: datetime | None = None
    # A retried delivery with the same key (per account) stores nothing and answers with the
    # first delivery's result: e.g. the MTA's queue id, or a source file and offset.
    # The key is bound to the message's bytes: the same key with other bytes is refused
    # (IdempotencyKeyReused), never taken for a duplicate.
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=512,
                                        pattern=r"^[^\x00-\x1f\x7f]+$")
    envelope: SmtpEnvelope | None = None  # from an MTA (lda, lmtp)

    _v_labels = field_validator("labels")(classmethod(lambda cls, v: _labels(v)))
    _v_flags = field_validator("flags")(classmethod(lambda cls, v: _flags(v)))
    _v_until = field_validator("extract_until", "internal_date")(
        classmethod(lambda cls, v: _aware(v))
    )

    def policy(self) -> ExtractionPolicy:
        return ExtractionPolicy.of(self.extract_limit, self.extract_until)


class BeginUpload(_AccountCommand, _MailboxField):
    mailbox: str = "INBOX"
    labels: list[str] = []
    flags: list[str] = []
    extract_limit: int | None = Field(default=None, ge=1)
    extract_until: datetime | None = None

    _v_labels = field_validator("labels")(classmethod(lambda cls, v: _labels(v)))
    _v_flags = field_validator("flags")(classmethod(lambda cls, v: _flags(v)))
    _v_until = field_validator("extract_until")(classmethod(lambda cls, v: _aware(v)))

    def policy(self) -> ExtractionPolicy:
        return ExtractionPolicy.of(self.extract_limit, self.extract_until)


class ChangeFlags(Command):
    message_id: UUID
    flags: list[str]
    mode: FlagMode = FlagMode.ADD

    _v_flags = field_validator("flags")(classmethod(lambda cls, v: _flags(v)))


class ChangeLabels(Command):
    message_id: UUID
    add: list[str] = []
    remove: list[str] = []

    _v = field_validator("add", "remove")(classmethod(lambda cls, v: _labels(v)))


class MoveMessage(_MailboxField):
    message_id: UUID
    mailbox: str


class CopyMessage(_MailboxField):
    message_id: UUID
    mailbox: str


class SetPolicy(Command):
    message_id: UUID
    extract_limit: int | None = Field(default=None, ge=1)
    extract_until: datetime | None = None

    _v_until = field_validator("extract_until")(classmethod(lambda cls, v: _aware(v)))

    def policy(self) -> ExtractionPolicy:
        return ExtractionPolicy.of(self.extract_limit, self.extract_until)


class CreateMailbox(_AccountCommand, _MailboxField):
    mailbox: str
    role: Role = Role.NONE


class RenameMailbox(_AccountCommand, _MailboxField):
    mailbox: str
    new_name: str

    @field_validator("new_name")
    @classmethod
    def _new(cls, v: str) -> str:
        try:
            return validate_mailbox_name(v)
        except InvalidCommand as e:
            raise ValueError(str(e).removeprefix("mailbox: ")) from None


class DeleteMailbox(_AccountCommand, _MailboxField):
    mailbox: str


class Subscribe(_AccountCommand, _MailboxField):
    mailbox: str
