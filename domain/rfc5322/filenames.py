"""An attachment's file name made safe to offer for download and to write to any file
system."""

from __future__ import annotations

import re
import unicodedata

from domain.rfc5322.text import repair_surrogates

MAX_FILENAME_BYTES = 255
_SEPARATORS = re.compile(r"[/\\]")
_SPACES = re.compile(r"\s+")
_DOTS = re.compile(r"\.{2,}")
_RESERVED = re.compile(r'[<>:"|?*]')
_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"{p}{n}" for p in ("COM", "LPT") for n in range(1, 10)]
)


def sanitise_filename(name: str) -> str:
    """A file name safe to offer for download and to write to any file system.

    Only the last path component; no NUL, CR, LF or other control or invisible format
    characters; no ``..``; no leading/trailing dots or spaces; no ``<>:"|?*``; not a
    Windows device name; at most 255 UTF-8 bytes, keeping the extension; ``attachment``
    when nothing is left.
    """
    text = unicodedata.normalize("NFC", repair_surrogates(name))
    text = "".join(" " if ch.isspace() else ch for ch in text if _visible(ch))
    components = [c.strip(" .") for c in _SEPARATORS.split(text)]
    text = next((c for c in reversed(components) if c), "")
    text = _RESERVED.sub("_", _DOTS.sub(".", _SPACES.sub(" ", text)))
    if text.split(".", 1)[0].strip().upper() in _DEVICES:
        text = "_" + text
    return _truncate(text).strip(" .") or "attachment"


def _visible(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch)[0] != "C"


def _truncate(text: str) -> str:
    if len(text.encode()) <= MAX_FILENAME_BYTES:
        return text
    stem, dot, extension = text.rpartition(".")
    if not dot or not stem or len(extension.encode()) > 16:
        stem, extension = text, ""
    suffix = "." + extension if extension else ""
    budget = MAX_FILENAME_BYTES - len(suffix.encode())
    return stem.encode()[:budget].decode("utf-8", "ignore").rstrip(" .") + suffix
