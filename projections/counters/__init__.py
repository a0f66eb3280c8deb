"""``counters``: per account, per mailbox and per label: messages, unread, bytes (ElasticInbox).

Row key: the account id (16 bytes). Family ``c``, the counts:

* ``c:m<mailbox id, 16 bytes>`` -- ``b"messages,unread,bytes"`` of the mailbox's listed
  messages (unread: no ``\\Seen``);
* ``c:l<label UTF-8>`` -- the same for the account's listed messages carrying the label;
* ``c:pos`` -- the position of the last event applied to this row.

Family ``d``, one marker per soft-deleted message:

* ``d:<message id, 16 bytes>`` -- ``1`` while the message is soft-deleted (dropped when it
  is restored, expunged or purged). Whether an expunged or purged message still counted
  comes from the ``old_state`` those events carry.

A busy account has thousands of markers and a handful of counts: readers ask for family
``c`` only (``names.CT_COUNTS``); the projector reads the whole row, markers included, and
writes both families in one row mutation.

Only listed messages (state active or expired) count; soft-deleted and expunged ones do not;
a move transfers the counts between mailboxes. Values are absolute, never increments.

``Mailbox.Deleted`` removes the mailbox's ``c:m`` cell (DeleteColumn at its position): a
deleted mailbox, or one left ``\\Noselect``, leaves no count behind. The command appends it
after the expunges of the mailbox's messages; in logs written before, the expunges followed
it, so a change that would only lower a mailbox cell that does not exist (``messages <= 0``)
is not written: it cannot bring a deleted mailbox's cell back.

Counters are the one read-modify-write projection: it reads the row; if the event's position
is ``<=`` the stored ``c:pos`` the event was applied already and nothing is written;
otherwise it writes every changed counter and ``c:pos``, all at ``version = position``, in
one row mutation (atomic per row in HBase). Exact under at-least-once delivery as long as
each account's events arrive in log order.

The package: ``deltas`` (what each event changes), ``projector`` (``project``,
``CounterFold``), ``parts`` (the mergeable parts of a position range, ADR 0061).

May import: ``domain`` and the other ``projections`` modules (names, keys, codec,
tablestore), as every projector.
"""

from projections.counters.deltas import HANDLED, READS, SEEN, TABLES, Deltas, T
from projections.counters.parts import (
    CounterPart,
    CounterPartialFold,
    CounterRow,
    counter_mutations,
    merge_counter_parts,
)
from projections.counters.projector import CounterFold, project

__all__ = ["HANDLED", "READS", "SEEN", "TABLES", "CounterFold", "CounterPart",
           "CounterPartialFold", "CounterRow", "Deltas", "T", "counter_mutations",
           "merge_counter_parts", "project"]
