"""Every field of every event is classified: sealed, or safe to keep outside the seal.

The log is immutable and replicated (Kafka, backups, read models); only ``personal`` is
sealed with the message's key (ADR 0021), so only it may hold text taken from a message's
bytes (issue 27, ADR 0040). This test walks every event class of the domain's aggregates
and every field of each (with the class that declares it) and fails on a field nobody has
classified: a new field must be added to ``UNSEALED`` with why it cannot carry text of a
message, or travel inside ``personal``.
"""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from domain.delivery import facts_for_event
from domain.rfc5322 import inspect_message
from domain.rfc5322.defects import RECORDED_HEADERS
from domain.sealed_facts import is_reduced
from projections.registry import DOMAIN_EVENTS

ID = "an id (UUID)"
NUMBER = "a number"
FLAG = "a boolean"
DATE = "a date-time"
HASH = "a SHA-256 (hex)"
ADDRESS_ONLY = ("a stored payload's address in the payload store: random since ADR 0099 "
                "(the store forgets its link to the content with the bytes), the content's "
                "SHA-256 in events written before")
OLD_DIGEST = ("empty since ADR 0099 (the digest sealed in `personal`; ADR 0081 for an inline "
              "message): only events written before hold a digest here; "
              "test_no_message_keeps_its_digest_outside_the_seal")
ENUM = "one of a fixed set of words (the code's, not the message's)"
POLICY = "an extraction policy: kind (a fixed word), limit (a number), until (a date-time)"
# user-chosen, not message-derived: what the account's owner (or the MTA's configuration)
# named; account names, mailbox and label names are not sealed (ADR 0021, Consequences)
MAILBOX_NAME = "a mailbox name (chosen by the user, not taken from a message)"
LABEL = "a label or flag (chosen by the user or a client, not taken from a message)"
ADDRESS = "the account's address (chosen by the operator, not taken from a message)"
SEALED = "SEALED: the message's personal data (ADR 0021)"
RULE = "an event rule's definition (an administrator's words, not taken from a message)"
REASON = ("why a rule event failed: the rule's own pattern and field, the application's URL "
          "or topic and its answer (never the message's text: ADR 0052)")
USER = "a user's name (from the user directory, chosen by the operator)"
IDENTIFIER = "an ACL identifier: a user's name, $group, anyone or authenticated"
RIGHTS = "RFC 4314 rights letters (a fixed set)"
ROOT = "a virtual root: the account's address and a mailbox name"

_MESSAGE = "domain.message:Message"
_ACCOUNT = "domain.account:Account"
_MAILBOX = "domain.mailbox:Mailbox"

UNSEALED: dict[tuple[str, str], str] = {
    # every event (eventsourcing)
    ("eventsourcing.domain:HasOriginatorIDVersion", "originator_id"): ID,
    ("eventsourcing.domain:HasOriginatorIDVersion", "originator_version"): NUMBER,
    ("eventsourcing.domain:CanMutateAggregate", "timestamp"): DATE,
    ("eventsourcing.domain:AggregateCreated", "originator_topic"): "the aggregate's class",
    # Account
    (f"{_ACCOUNT}.Opened", "address"): ADDRESS,
    (f"{_ACCOUNT}.MailboxRegistered", "mailbox_id"): ID,
    (f"{_ACCOUNT}.MailboxRegistered", "name"): MAILBOX_NAME,
    (f"{_ACCOUNT}.MailboxRegistered", "role"): ENUM,
    (f"{_ACCOUNT}.MailboxRegistered", "uidvalidity"): NUMBER,
    (f"{_ACCOUNT}.MailboxRenamed", "mailbox_id"): ID,
    (f"{_ACCOUNT}.MailboxRenamed", "old_name"): MAILBOX_NAME,
    (f"{_ACCOUNT}.MailboxRenamed", "new_name"): MAILBOX_NAME,
    (f"{_ACCOUNT}.MailboxRenamed", "old_uidvalidity"): NUMBER,
    (f"{_ACCOUNT}.MailboxRenamed", "new_uidvalidity"): NUMBER,
    (f"{_ACCOUNT}.MailboxUnregistered", "mailbox_id"): ID,
    (f"{_ACCOUNT}.MailboxUnregistered", "name"): MAILBOX_NAME,
    (f"{_ACCOUNT}.Subscribed", "name"): MAILBOX_NAME,
    (f"{_ACCOUNT}.Unsubscribed", "name"): MAILBOX_NAME,
    (f"{_ACCOUNT}.LabelDefined", "label"): LABEL,
    (f"{_ACCOUNT}.LabelDefined", "attributes"): "a label's attributes (set by the user)",
    (f"{_ACCOUNT}.LabelRemoved", "label"): LABEL,
    (f"{_ACCOUNT}.QuotaSet", "bytes"): NUMBER,
    (f"{_ACCOUNT}.QuotaSet", "messages"): NUMBER,
    (f"{_ACCOUNT}.QuotaSet", "old_bytes"): NUMBER,
    (f"{_ACCOUNT}.QuotaSet", "old_messages"): NUMBER,
    # Mailbox
    (f"{_MAILBOX}.Created", "account_id"): ID,
    (f"{_MAILBOX}.Created", "name"): MAILBOX_NAME,
    (f"{_MAILBOX}.Created", "role"): ENUM,
    (f"{_MAILBOX}.Created", "uidvalidity"): NUMBER,
    (f"{_MAILBOX}.UidsAllocated", "account_id"): ID,
    (f"{_MAILBOX}.UidsAllocated", "message_ids"): ID,
    (f"{_MAILBOX}.UidsAllocated", "first_uid"): NUMBER,
    (f"{_MAILBOX}.Renamed", "account_id"): ID,
    (f"{_MAILBOX}.Renamed", "old_name"): MAILBOX_NAME,
    (f"{_MAILBOX}.Renamed", "new_name"): MAILBOX_NAME,
    (f"{_MAILBOX}.Renamed", "old_uidvalidity"): NUMBER,
    (f"{_MAILBOX}.Renamed", "new_uidvalidity"): NUMBER,
    (f"{_MAILBOX}.Deleted", "account_id"): ID,
    (f"{_MAILBOX}.Deleted", "name"): MAILBOX_NAME,
    (f"{_MAILBOX}.AclChanged", "account_id"): ID,
    (f"{_MAILBOX}.AclChanged", "name"): MAILBOX_NAME,
    (f"{_MAILBOX}.AclChanged", "identifier"): IDENTIFIER,
    (f"{_MAILBOX}.AclChanged", "old_rights"): RIGHTS,
    (f"{_MAILBOX}.AclChanged", "new_rights"): RIGHTS,
    # VirtualRoot
    ("domain.roots:VirtualRoot.Created", "user"): USER,
    ("domain.roots:VirtualRoot.Set", "user"): USER,
    ("domain.roots:VirtualRoot.Set", "account_id"): ID,
    ("domain.roots:VirtualRoot.Set", "root"): ROOT,
    ("domain.roots:VirtualRoot.Set", "old_root"): ROOT,
    ("domain.roots:VirtualRoot.Deleted", "user"): USER,
    ("domain.roots:VirtualRoot.Deleted", "account_id"): ID,
    ("domain.roots:VirtualRoot.Deleted", "old_root"): ROOT,
    # DeliveryKey
    ("domain.delivery_key:DeliveryKey.Claimed", "account_id"): ID,
    ("domain.delivery_key:DeliveryKey.Claimed", "key"): HASH + " of the caller's idempotency key",
    ("domain.delivery_key:DeliveryKey.Claimed", "message_id"): ID,
    # RuleBook, RuleEvent (event rules, ADR 0052): an administrator's definitions; what a
    # rule raised holds ids, the mailbox's name and the rule's own words, never the message's
    **{(f"domain.rules:RuleBook.{cls}", name): RULE
       for cls, names in (("RuleCreated", ("name", "rule_id", "spec", "secret")),
                          ("RuleChanged", ("name", "rule_id", "spec")),
                          ("RuleEnabled", ("name", "rule_id", "enabled")),
                          ("RuleDeleted", ("name", "rule_id")),
                          ("SecretRotated", ("name", "rule_id", "secret")))
       for name in names},
    **{("domain.rules:RuleEvent.Raised", name): kind for name, kind in (
        ("account_id", ID), ("message_id", ID), ("mailbox_id", ID), ("mailbox", MAILBOX_NAME),
        ("uid", NUMBER), ("trigger", ENUM), ("rule", RULE), ("rule_id", ID),
        ("rule_version", NUMBER), ("application", RULE), ("properties", RULE),
        ("status", ENUM), ("reason", REASON))},
    **{("domain.rules:RuleEvent.StatusChanged", name): kind for name, kind in (
        ("account_id", ID), ("message_id", ID), ("status", ENUM), ("attempts", NUMBER),
        ("reason", REASON), ("where", "the dispatcher's host name and pid"))},
    ("domain.rules:RuleEvent.Discarded", "queue"): ENUM,
    ("domain.rules:RuleEvent.Discarded", "since"): DATE,
    # Message: arrival (Delivered, UploadCompleted)
    ("domain.arrival:Arrival", "account_id"): ID,
    ("domain.arrival:Arrival", "mailbox_id"): ID,
    ("domain.arrival:Arrival", "uid"): NUMBER,
    ("domain.arrival:Arrival", "uidvalidity"): NUMBER,
    ("domain.arrival:Arrival", "size"): NUMBER,
    ("domain.arrival:Arrival", "sha256"): OLD_DIGEST,
    ("domain.arrival:Arrival", "address"): ADDRESS_ONLY,
    ("domain.arrival:Arrival", "inline"): FLAG,
    ("domain.arrival:Arrival", "internal_date"): DATE,
    ("domain.arrival:Arrival", "flags"): LABEL,
    ("domain.arrival:Arrival", "labels"): LABEL,
    ("domain.arrival:Arrival", "policy"): POLICY,
    ("domain.arrival:Arrival", "thread_id"): ID,
    ("domain.arrival:Arrival", "facts"): "the message's structure: see FACTS",
    ("domain.arrival:Arrival", "personal"): SEALED,
    ("domain.arrival:Arrival", "copied_from"): ID,
    # Message: the rest
    (f"{_MESSAGE}.UploadBegun", "account_id"): ID,
    (f"{_MESSAGE}.UploadBegun", "mailbox_id"): ID,
    (f"{_MESSAGE}.UploadBegun", "internal_date"): DATE,
    (f"{_MESSAGE}.UploadBegun", "flags"): LABEL,
    (f"{_MESSAGE}.UploadBegun", "labels"): LABEL,
    (f"{_MESSAGE}.UploadBegun", "policy"): POLICY,
    (f"{_MESSAGE}.UploadChunkAppended", "index"): NUMBER,
    (f"{_MESSAGE}.UploadChunkAppended", "size"): NUMBER,
    (f"{_MESSAGE}.UploadChunkAppended", "sha256"): ADDRESS_ONLY,
    (f"{_MESSAGE}.Changed", "account_id"): ID,
    (f"{_MESSAGE}.Changed", "mailbox_id"): ID,
    (f"{_MESSAGE}.Changed", "uid"): NUMBER,
    (f"{_MESSAGE}.Changed", "size"): NUMBER,
    (f"{_MESSAGE}.Changed", "internal_date"): DATE,
    (f"{_MESSAGE}.Changed", "thread_id"): ID,
    (f"{_MESSAGE}.Changed", "flags"): LABEL,
    (f"{_MESSAGE}.Changed", "labels"): LABEL,
    (f"{_MESSAGE}.Changed", "state"): ENUM,
    (f"{_MESSAGE}.FlagsChanged", "old_flags"): LABEL,
    (f"{_MESSAGE}.LabelsChanged", "old_labels"): LABEL,
    (f"{_MESSAGE}.Moved", "from_mailbox_id"): ID,
    (f"{_MESSAGE}.Moved", "from_uid"): NUMBER,
    (f"{_MESSAGE}.Moved", "uidvalidity"): NUMBER,
    (f"{_MESSAGE}.Moved", "sha256"): OLD_DIGEST,
    (f"{_MESSAGE}.Moved", "address"): ADDRESS_ONLY,
    (f"{_MESSAGE}.Moved", "inline"): FLAG,
    (f"{_MESSAGE}.Moved", "facts"): "the message's structure: see FACTS",
    (f"{_MESSAGE}.Moved", "personal"): SEALED,
    (f"{_MESSAGE}.Moved", "policy"): POLICY,
    (f"{_MESSAGE}.Moved", "extract_count"): NUMBER,
    (f"{_MESSAGE}.Deleted", "purge_after"): DATE,
    (f"{_MESSAGE}.Expunged", "purge_after"): DATE,
    (f"{_MESSAGE}.Expunged", "old_state"): ENUM,
    (f"{_MESSAGE}.Extracted", "count"): NUMBER,
    (f"{_MESSAGE}.Extracted", "remaining"): NUMBER,
    (f"{_MESSAGE}.Extracted", "reservation_id"): ID,
    (f"{_MESSAGE}.Extracted", "at"): DATE,
    (f"{_MESSAGE}.ExtractionReserved", "account_id"): ID,
    (f"{_MESSAGE}.ExtractionReserved", "reservation_id"): ID,
    (f"{_MESSAGE}.ExtractionReserved", "until"): DATE,
    (f"{_MESSAGE}.ExtractionReleased", "account_id"): ID,
    (f"{_MESSAGE}.ExtractionReleased", "reservation_id"): ID,
    (f"{_MESSAGE}.ExtractionReleased", "reason"): (
        "why writing the bytes failed: a fixed sentence or the writer's exception (the "
        "target path is the operator's), never the message's content"),
    (f"{_MESSAGE}.PolicyChanged", "old_policy"): POLICY,
    (f"{_MESSAGE}.PolicyChanged", "policy"): POLICY,
    (f"{_MESSAGE}.PolicyChanged", "old_state"): ENUM,
    (f"{_MESSAGE}.Expired", "since"): DATE,
    (f"{_MESSAGE}.Expired", "old_state"): ENUM,
    (f"{_MESSAGE}.Purged", "queue"): ENUM,
    (f"{_MESSAGE}.Purged", "since"): DATE,
    (f"{_MESSAGE}.Purged", "reason"): ENUM,
    (f"{_MESSAGE}.Purged", "old_state"): ENUM,
    (f"{_MESSAGE}.Purged", "inline"): FLAG,
    (f"{_MESSAGE}.Purged", "payloads"): ADDRESS_ONLY,
}
"""(declaring class, field) -> why it may be stored outside the seal (or that it is sealed)."""

FACTS: dict[str, str] = {
    "content_type": ("one media type of a fixed vocabulary (domain.sealed_facts.MEDIA_TYPES, "
                     "<top level>/other, other/other); the message's own sealed (ADR 0081)"),
    "part_count": NUMBER,
    "depth": NUMBER,
    "has_attachments": FLAG,
    "defects": "defect class names and header names only (ADR 0040; domain.rfc5322.defects)",
    "line_ending": ENUM,
    "header_bytes": NUMBER,
    "truncated": "names of the parse limits that stopped the parse (settings' names)",
}
"""The keys of an event's ``facts`` and why each is safe."""


def _declared_by(event_class: type, name: str) -> str:
    declaring = next(c for c in event_class.__mro__
                     if name in c.__dict__.get("__annotations__", {}))
    return f"{declaring.__module__}:{declaring.__qualname__}"


def _every_field() -> list[tuple[str, str, str]]:
    return sorted({(_declared_by(cls, f.name), f.name, f"{cls.__module__}:{cls.__qualname__}")
                   for cls in DOMAIN_EVENTS for f in fields(cls)})


def test_every_field_of_every_event_is_classified() -> None:
    unclassified = [f"{event}.{name} (declared by {declared})"
                    for declared, name, event in _every_field()
                    if (declared, name) not in UNSEALED]
    assert not unclassified, (
        "event fields nobody has classified: only `personal` is sealed, everything else is "
        "kept in plain text in the log, Kafka, backups and read models forever. Add each to "
        "UNSEALED in tests/unit/test_unsealed_fields.py with why it cannot carry text taken "
        "from a message (a header, a file name, the body), or carry that text inside "
        "`personal`:\n  " + "\n  ".join(unclassified))


def test_the_classification_names_no_field_that_is_gone() -> None:
    existing = {(declared, name) for declared, name, _ in _every_field()}
    assert set(UNSEALED) - existing == set()


def test_only_personal_is_sealed_and_it_is_in_every_event_with_facts() -> None:
    sealed = {name for (_, name), why in UNSEALED.items() if why == SEALED}
    assert sealed == {"personal"}
    for cls in DOMAIN_EVENTS:
        names = {f.name for f in fields(cls)}
        assert ("facts" in names) == ("personal" in names), cls.__qualname__


MALFORMED = [
    b"From: a@example.org\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b"
    b"\r\n\r\n--b\r\nContent-Type: text/plain; name==?koi8-r?B?89DJ08/LLmRvYw==?=\r\n"
    b"Content-Disposition: attachment; filename==?koi8-r?B?89DJ08/LLmRvYw==?=\r\n\r\n"
    b"hi\r\n--b--\r\n",
    b" From: James Hillyerd <james@makita.skynet>\r\nSubject: x\r\n\r\nhi\r\n",
    b"Subject: " + b"long " * 5000 + b"\r\n\r\nhi\r\n",
    b"Content-Type: multipart/mixed; boundary=never\r\n\r\nno parts\r\n",
]
_DEFECT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(: [A-Za-z0-9_-]{1,76}){0,2}"
                     r"|TooManyDefects: [0-9]+ more not recorded")


@pytest.mark.parametrize("raw", MALFORMED)
def test_the_facts_hold_only_classified_keys_and_defects_of_tokens(raw: bytes) -> None:
    facts = facts_for_event(inspect_message(raw))
    assert set(facts) <= set(FACTS), "classify the new key in FACTS"
    assert is_reduced(facts["content_type"]), facts["content_type"]
    assert facts["defects"]
    for defect in facts["defects"]:
        assert _DEFECT.fullmatch(defect), defect
        _, *named = defect.split(": ")
        assert all(n in RECORDED_HEADERS or n.isidentifier() for n in named), defect


@pytest.mark.parametrize(("media", "kept"), [
    ("text/plain", "text/plain"), ("multipart/signed", "multipart/signed"),
    ("application/x-acme-invoice", "application/other"), ("image/x-vendor", "image/other"),
    ("x-private/thing", "other/other"), ("TEXT/PLAIN", "text/plain")])
def test_a_media_type_outside_the_vocabulary_keeps_only_its_top_level(media: str,
                                                                       kept: str) -> None:
    raw = (f"From: a@example.org\r\nContent-Type: {media}\r\n\r\nhi\r\n").encode()
    facts = inspect_message(raw)
    assert facts_for_event(facts)["content_type"] == kept


def test_no_message_keeps_its_digest_outside_the_seal() -> None:
    """The arrival of a message, inline or stored: its digest and its own media type only in
    the seal; a stored one's payload is named by an address that is not its digest."""
    from datetime import UTC, datetime
    from uuid import uuid4

    from domain.account import Account
    from domain.delivery import delivery_fields
    from domain.extraction_policy import ExtractionPolicy
    from domain.mailbox import Mailbox
    from domain.payloads import new_address

    raw = b"From: a@example.org\r\nContent-Type: application/x-acme\r\n\r\n4712\r\n"
    facts = inspect_message(raw)
    account = Account.open("a@example.org")
    mailbox = Mailbox.create(uuid4(), account_id=account.id, name="INBOX", role="inbox",
                             uidvalidity=1)
    for address in ("", new_address()):
        arrival = delivery_fields(account, mailbox, 1, uuid4(), raw, facts, address,
                                  labels=[], flags=[], policy=ExtractionPolicy(),
                                  internal_date=datetime.now(UTC))
        assert arrival.sha256 == "" and arrival.address == address != facts.sha256
        assert arrival.inline == (not address)
        assert arrival.personal.get("sha256") == facts.sha256
        assert arrival.facts["content_type"] == "application/other"
        assert arrival.personal["content_type"] == "application/x-acme"
