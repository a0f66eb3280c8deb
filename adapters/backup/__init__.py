"""Online backup and restore of an embedded store (``letterlog backup``, ``restore-backup``).

A backup is a directory: a copy of every SQLite file of the data directory, the payload
files, and ``manifest.json`` (written last: a directory without it is not a backup). The
SQLite files are copied with SQLite's backup API from a connection holding a read
transaction, so each copy is one consistent snapshot while deliveries go on; in this order:

1. the read models (``tables.sqlite``, ``stream-tables.sqlite``): derived from the log, so
   copied *before* it, they are never ahead of the log in the copy (they catch up when the
   restored store is opened);
2. the log (``events.sqlite``): its head is the backup's position;
3. the payload files (a payload is stored before the event that refers to it commits, so
   every payload the copied log refers to is there, unless it was purged meanwhile);
4. every other SQLite file, the key files (``keys.sqlite``, ``vault.sqlite``) among them:
   keys are only ever added or destroyed, so copies taken after the log hold every key the
   copied log uses. They are copied together while a write lock is held on each (readers go
   on; a writer waits the few milliseconds the copies take), so a key table and the vault
   of its key-encryption keys are copied as they stood at one moment (a rotation between
   two copies would leave keys wrapped under a KEK the copied vault does not have).

A restore checks every file against the manifest's SHA-256, builds the store beside the
target, then puts it in place. An erasure made in the store being replaced after the
backup was taken is made again on the restored store (``ErasureRecord``): ADR 0046.

The package: ``common`` (the format, the errors), ``sqlitecopies`` and ``filecopies``
(consistent file copies), ``logfacts`` (what a copied log holds), ``copying`` (taking a
backup), ``erasures`` (the erasure record), ``reapplying`` (its erasures made again on a
restored store), ``restoring`` (putting a backup in place).

May import: ``domain``, ``datadir``, ``filemodes``, ``payloads``, ``eventlog`` and
``lifecycle``; never ``bootstrap`` (the entry point hands ``open_store`` over), the CLI or
the tools.
"""

from adapters.backup.common import (
    FORMAT,
    MANIFEST,
    RECORD_FORMAT,
    RECORD_SUFFIX,
    BackupError,
    BackupInvalid,
    KeksMissing,
    NoErasureRecord,
    read_manifest,
)
from adapters.backup.copying import backup, erased_while_copied
from adapters.backup.erasures import (
    ErasureRecord,
    erasure_record,
    export_erasures,
    read_erasure_record,
)
from adapters.backup.reapplying import reapply
from adapters.backup.restoring import records_beside, restore

__all__ = ["FORMAT", "MANIFEST", "RECORD_FORMAT", "RECORD_SUFFIX", "BackupError",
           "BackupInvalid", "ErasureRecord", "KeksMissing", "NoErasureRecord", "backup",
           "erased_while_copied", "erasure_record", "export_erasures", "read_erasure_record",
           "read_manifest", "reapply", "records_beside", "restore"]
