"""Mail from an MTA: the local delivery agent (``lda``, one message on standard input, an
exit status as sysexits.h defines them) and the LMTP server (``lmtp``, RFC 2033), both
speaking the MTA's contract: temporary failures are 75 / 4.x.x, so no fault loses mail.

May import: ``adapters.embedded`` (the store), ``domain`` (errors, values); ``lmtp`` imports
aiosmtpd. Imported by ``adapters.cli.mta`` and the benchmarks.
"""
