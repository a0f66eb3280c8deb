"""Password checks for the passwd-file: Dovecot's ``{SCHEME}value`` password fields.

Schemes: ``PLAIN`` / ``CLEARTEXT``, ``SHA`` / ``SSHA``, ``SHA256`` / ``SSHA256``,
``SHA512`` / ``SSHA512`` (base64, or hex with ``.HEX``), and the crypt(3) ones
(``CRYPT``, ``SHA512-CRYPT``, ``SHA256-CRYPT``, ``MD5-CRYPT``) where the platform's crypt
is available to Python. A field with no ``{SCHEME}`` is ``CRYPT``, as Dovecot reads it; an
empty field or an unknown scheme matches no password. Comparisons take constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import warnings

log = logging.getLogger("letterlog.directory")

_HASHES = {"SHA": "sha1", "SHA256": "sha256", "SHA512": "sha512"}


def verify(field: str, password: str) -> bool:
    """Whether ``password`` matches the stored ``field``."""
    if not field:
        return False
    scheme, value = "CRYPT", field
    if field.startswith("{") and "}" in field:
        scheme, value = field[1:field.index("}")].upper(), field[field.index("}") + 1:]
    given = password.encode("utf-8")
    if scheme in ("PLAIN", "CLEARTEXT"):
        return hmac.compare_digest(value.encode("utf-8"), given)
    encoding = "base64"
    if scheme.endswith(".HEX"):
        scheme, encoding = scheme[:-4], "hex"
    elif scheme.endswith(".B64"):
        scheme = scheme[:-4]
    salted = scheme.startswith("S") and scheme[1:] in _HASHES
    algorithm = _HASHES.get(scheme[1:] if salted else scheme)
    if algorithm is not None:
        try:
            stored = bytes.fromhex(value) if encoding == "hex" else base64.b64decode(value)
        except (ValueError, binascii.Error):
            return False
        size = hashlib.new(algorithm).digest_size
        digest, salt = stored[:size], stored[size:] if salted else b""
        return hmac.compare_digest(hashlib.new(algorithm, given + salt).digest(), digest)
    if scheme in ("CRYPT", "SHA512-CRYPT", "SHA256-CRYPT", "MD5-CRYPT", "DES-CRYPT"):
        return _crypt(value, password)
    log.warning("user directory: password scheme {%s} is not supported", scheme)
    return False


def _crypt(value: str, password: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt  # local: optional (deprecated; gone in Python 3.13), tried where used
    except ImportError:  # Python 3.13 dropped it
        log.warning("user directory: crypt(3) password schemes need Python's crypt module")
        return False
    return hmac.compare_digest(crypt.crypt(password, value) or "", value)
