"""Every table, column family and column name of the read models, defined once.

Logical table names are ``str`` (the table store maps them to physical tables); columns are
``bytes`` constants ``b"family:qualifier"`` so that projectors never build them per event.
Columns whose qualifier carries data (a label, a mailbox name, a message id) are built by the
functions in ``projections.keys``. ``docs/tables.md`` describes every table.
"""

from __future__ import annotations

from typing import Final

from domain.lifecycle import QUEUE_DELETED as QUEUE_DELETED  # defined with their rules
from domain.lifecycle import QUEUE_EXPIRED as QUEUE_EXPIRED
from domain.lifecycle import QUEUE_EXPIRING as QUEUE_EXPIRING
from domain.lifecycle import QUEUE_INCOMPLETE as QUEUE_INCOMPLETE

# -- tables ----------------------------------------------------------------------------------

MAILBOXES: Final = "mailboxes"
MAILBOX_NAMES: Final = "mailbox_names"
MESSAGES: Final = "messages"
LABEL_INDEX: Final = "label_index"
COUNTERS: Final = "counters"
THREADS: Final = "threads"
SUBSCRIPTIONS: Final = "subscriptions"
ACCOUNTS: Final = "accounts"
PAYLOAD_REFS: Final = "payload_refs"
PURGE_QUEUE: Final = "purge_queue"
PURGE_POINTER: Final = "purge_pointer"
ACL: Final = "acl"  # a mailbox's ACL entries (RFC 4314)
VISIBLE_MAILBOXES: Final = "visible_mailboxes"  # identifier -> the mailboxes it may look up
ROOTS: Final = "roots"  # user -> virtual root
TRACKING: Final = "tracking"
PROJECTIONS: Final = (MAILBOXES, MAILBOX_NAMES, MESSAGES, LABEL_INDEX, COUNTERS, THREADS,
                      SUBSCRIPTIONS, ACCOUNTS, PAYLOAD_REFS, PURGE_QUEUE, ACL,
                      VISIBLE_MAILBOXES, ROOTS, "rules", "rule_events")
"""Every projection's name (``projections.registry.ALL``, in its order): each tracks the
position it has applied in TRACKING under its name."""
PURGED_FROM: Final = (MESSAGES, LABEL_INDEX, THREADS, PAYLOAD_REFS, PURGE_QUEUE, COUNTERS)
"""The tables a purge deletes cells from (compacted after a purge run on HBase)."""
# not read models: the table store's own bookkeeping
CATALOG: Final = "catalog"  # logical table -> physical table (blue/green rebuilds)
DEAD_LETTERS: Final = "dead_letters"  # poison stream records set aside
DEAD_LETTERS_CLOSED: Final = "dead_letters_closed"  # discarded or redriven ones, kept
STREAM_REDO: Final = "stream_redo"  # a stream batch's mutations until they are all written
VIEWS: Final = "views"  # read-only views (time travel): name -> position, projections

# -- families ----------------------------------------------------------------------------------

F_MAILBOX: Final = "m"  # mailboxes
F_NAME: Final = "n"  # mailbox_names
F_META: Final = "meta"  # messages: what changes
F_DATA: Final = "data"  # messages: what never changes (for one row key)
F_INDEX: Final = "i"  # label_index, threads
F_COUNT: Final = "c"  # counters: the counts, and the position they are exact up to
F_DELETED: Final = "d"  # counters: soft-delete markers (never read with the counts)
F_SUB: Final = "s"  # subscriptions
F_ACCOUNT: Final = "a"  # accounts: the account itself
F_LABEL: Final = "l"  # accounts: one column per label
F_REF: Final = "r"  # payload_refs
F_QUEUE: Final = "q"  # purge_queue
F_POINTER: Final = "p"  # purge_pointer
F_TRACK: Final = "t"  # tracking
F_ACL: Final = "a"  # acl
F_VISIBLE: Final = "v"  # visible_mailboxes
F_ROOT: Final = "r"  # roots
F_CATALOG: Final = "c"  # catalog
F_DEAD: Final = "d"  # dead_letters, dead_letters_closed
F_REDO: Final = "r"  # stream_redo
F_VIEW: Final = "v"  # views

# -- mailboxes ---------------------------------------------------------------------------------

MB_NAME: Final = b"m:name"
MB_ACCOUNT: Final = b"m:account"
MB_ROLE: Final = b"m:role"
MB_UIDVALIDITY: Final = b"m:uidvalidity"
MB_UIDNEXT: Final = b"m:uidnext"
MB_HIGHESTMODSEQ: Final = b"m:highestmodseq"
MB_DELETED: Final = b"m:deleted"

# -- mailbox_names -----------------------------------------------------------------------------

MN_MAILBOX: Final = b"n:mailbox"

# -- messages ----------------------------------------------------------------------------------

META_FLAGS: Final = b"meta:flags"
META_LABELS: Final = b"meta:labels"
META_MODSEQ: Final = b"meta:modseq"
META_STATE: Final = b"meta:state"
META_THREAD: Final = b"meta:thread"
META_POLICY: Final = b"meta:policy"
META_EXTRACTS: Final = b"meta:extracts"

DATA_MESSAGE: Final = b"data:message"
DATA_SUMMARY: Final = b"data:summary"  # JSON [size, internal_date, sha256, subject, sender,
#                                         truncated]: what a listing shows (ADR 0028)
DATA_FIELDS: Final = b"data:fields"  # JSON: account, inline, copied_from, facts, envelope (but
#                                       subject and from), attachments, body_event; before
#                                       ADR 0028 also size, internal_date, sha256 and the whole
#                                       envelope
DATA_BODY: Final = b"data:body"  # written before ADR 0014 only (the inline body)

# -- label_index, threads ----------------------------------------------------------------------

IX_REF: Final = b"i:ref"  # mailbox id (16 bytes) + uid (8 bytes big-endian)

# -- counters ----------------------------------------------------------------------------------

CT_POS: Final = b"c:pos"
CT_MAILBOX: Final = b"c:m"  # + mailbox id (16 bytes) -> b"messages,unread,bytes"
CT_LABEL: Final = b"c:l"  # + label (UTF-8) -> b"messages,unread,bytes"
CT_COUNTS: Final = b"c:"  # the whole count family: what a counters read asks for
CT_DELETED: Final = b"d:"  # + message id (16 bytes): a soft-deleted message's marker

# -- subscriptions, accounts, payload_refs ---------------------------------------------------

SUB_PREFIX: Final = b"s:"  # + mailbox name (UTF-8)
ACC_ADDRESS: Final = b"a:address"
ACC_QUOTA: Final = b"a:quota"  # the account's own quota: b"<bytes>,<messages>" (-1: default)
LABEL_PREFIX: Final = b"l:"  # + label (UTF-8)
REF_PREFIX: Final = b"r:"  # + message id (16 bytes)

# -- purge_queue, purge_pointer ----------------------------------------------------------------

PQ_REASON: Final = b"q:reason"
PQ_SINCE: Final = b"q:since"  # when the queue's TTL starts counting (ISO 8601)
PQ_MESSAGE: Final = b"q:message"
PQ_ACCOUNT: Final = b"q:account"
PP_BUCKET: Final = b"p:bucket"

QUEUES: Final = (QUEUE_DELETED, QUEUE_EXPIRED, QUEUE_EXPIRING, QUEUE_INCOMPLETE)

# -- acl, visible_mailboxes, roots -------------------------------------------------------------

ACL_PREFIX: Final = b"a:"  # + identifier (UTF-8) -> rights (RFC 4314 order)
VIS_ACCOUNT: Final = b"v:account"  # the mailbox's account id (16 bytes)
ROOT_USER: Final = b"r:user"  # the user's name as set
ROOT_ROOT: Final = b"r:root"  # account[/path]

# -- tracking ----------------------------------------------------------------------------------

TR_POSITION: Final = b"t:position"
TR_GENERATION: Final = b"t:generation"  # the catalog generation the position was reached in

# -- catalog -----------------------------------------------------------------------------------

CAT_PHYSICAL: Final = b"c:physical"  # row: the logical table name
CAT_GENERATION_ROW: Final = b"~generation"
CAT_GENERATION: Final = b"c:generation"

# -- views -------------------------------------------------------------------------------------

V_POSITION: Final = b"v:position"  # row: the view's name; the log position it reflects
V_PROJECTIONS: Final = b"v:projections"  # the projections it holds, comma-separated
V_ERASED: Final = b"v:erased"  # purges applied to the view up to this log position

# -- dead_letters, dead_letters_closed ---------------------------------------------------------

DL_ERROR: Final = b"d:error"
DL_VALUE: Final = b"d:value"
DL_KEY: Final = b"d:key"
DL_FIRST_SEEN: Final = b"d:first_seen"
DL_LAST_SEEN: Final = b"d:last_seen"
DL_TIMES: Final = b"d:times"
DL_POSITION: Final = b"d:position"
DL_KAFKA_TIME: Final = b"d:kafka_time"
DL_ATTEMPT: Final = b"d:attempt-"  # + attempt number
DL_OUTCOME: Final = b"d:outcome"
DL_CLOSED_AT: Final = b"d:closed_at"
DL_CLOSED_BY: Final = b"d:closed_by"
DL_REASON: Final = b"d:reason"

# -- stream_redo -------------------------------------------------------------------------------

REDO_MUTATIONS: Final = b"r:m"

# -- rules, rule_events (event rules: domain.rules) --------------------------------------------

RULES: Final = "rules"  # rule id -> the rule as it stands
RULE_EVENTS: Final = "rule_events"  # rule event id -> what was raised, its status
F_RULE: Final = "r"  # rules
F_RULE_EVENT: Final = "e"  # rule_events
RU_NAME: Final = b"r:name"
RU_SPEC: Final = b"r:spec"  # JSON: mailboxes, include, exclude, application, properties
RU_ENABLED: Final = b"r:enabled"
RU_VERSION: Final = b"r:version"  # the rule book's version that set it
RE_RULE: Final = b"e:rule"
RE_RULE_ID: Final = b"e:rule_id"
RE_RULE_VERSION: Final = b"e:rule_version"
RE_MESSAGE: Final = b"e:message"  # 16 bytes
RE_ACCOUNT: Final = b"e:account"  # 16 bytes
RE_MAILBOX_ID: Final = b"e:mailbox_id"  # 16 bytes
RE_MAILBOX: Final = b"e:mailbox"
RE_UID: Final = b"e:uid"
RE_TRIGGER: Final = b"e:trigger"  # delivered, copied, moved
RE_APPLICATION: Final = b"e:application"  # JSON
RE_PROPERTIES: Final = b"e:properties"  # JSON
RE_RAISED_AT: Final = b"e:raised_at"
RE_STATUS: Final = b"e:status"
RE_ATTEMPTS: Final = b"e:attempts"
RE_REASON: Final = b"e:reason"
RE_WHERE: Final = b"e:where"
RE_UPDATED_AT: Final = b"e:updated_at"
RULE_EVENT_QUEUE: Final = "rule_event_queue"  # purge_queue's layout, one queue per status
