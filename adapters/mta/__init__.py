"""Mail from an MTA: the local delivery agent (``lda``, one message on standard input, an
exit status as sysexits.h defines them) and the LMTP server (``lmtp``, RFC 2033), both
speaking the MTA's contract: temporary failures are 75 / 4.x.x, so no fault loses mail.

The LMTP server is ``lmtp`` (its process) over ``handoffserver`` (the lda's fast path) and
``listeners`` (its socket), over ``lmtphandler`` (a transaction's hooks), over
``lmtpprotocol`` (aiosmtpd's protocol, extended).

May import: ``adapters.embedded`` (the store), ``domain`` (errors, values); the lmtp modules
import aiosmtpd. Imported by ``adapters.cli.mta`` (``lda``), ``adapters.cli.lmtpserver``
(``lmtp``) and the benchmarks.
"""
