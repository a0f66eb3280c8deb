"""HBase's Thrift2 protocol for the HBase table store: its IDL, loaded with thriftpy2, and
clients of the Thrift2 gateway.

Thrift2's IDL is not on PyPI and nothing of HBase is kept in this repository: it is HBase's
own ``org/apache/hadoop/hbase/thrift2/hbase.thrift``, taken from an ``hbase-thrift`` jar
(``extract_idl``). Without an explicit path, ``default_idl`` looks in the jar cache
(``$LETTERLOG_CACHE``, default ``~/.cache/letterlog``) where ``python -m devtools.devservers
install`` resolves HBase's jars.
"""

from __future__ import annotations

import os
import threading
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import thriftpy2
from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TCyBufferedTransportFactory

THRIFT2_IDL_ENTRY = "org/apache/hadoop/hbase/thrift2/hbase.thrift"
THRIFT2_MODULE = "letterlog_hbase2_thrift"  # thriftpy2 wants the suffix _thrift


class Thrift2IdlMissing(OSError):
    """No readable Thrift2 IDL (no hbase-thrift jar, or the entry is not in it)."""


def extract_idl(lib: Path) -> Path:
    """The IDL from the ``hbase-thrift`` jar in HBase's ``lib`` directory, extracted (once,
    atomically) to ``<lib>/../thrift2/hbase.thrift``."""
    target = lib.parent / "thrift2" / "hbase.thrift"
    if target.is_file():
        return target
    jars = sorted(lib.glob("hbase-thrift-*.jar"))
    if not jars:
        raise Thrift2IdlMissing(f"hbase: no hbase-thrift jar in {lib}, so no Thrift2 IDL")
    try:
        with zipfile.ZipFile(jars[-1]) as jar:
            data = jar.read(THRIFT2_IDL_ENTRY)
    except (KeyError, OSError, zipfile.BadZipFile) as exc:
        raise Thrift2IdlMissing(
            f"hbase: {THRIFT2_IDL_ENTRY} not readable in {jars[-1]}: {exc}"
        ) from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return target


def default_idl() -> Path:
    """The IDL of the newest HBase in the jar cache."""
    raw = os.environ.get("LETTERLOG_CACHE") or os.path.join("~", ".cache", "letterlog")
    cache = Path(raw).expanduser()
    for lib in sorted(cache.glob("hbase-*/lib"), reverse=True):
        if (lib.parent / ".complete").exists():
            return extract_idl(lib)
    raise Thrift2IdlMissing(f"hbase: no HBase jars in {cache}, so no Thrift2 IDL")


_lock = threading.Lock()
_module: ModuleType | None = None


def load_thrift2(idl: str | os.PathLike[str] | None = None) -> ModuleType:
    """The Thrift2 IDL as a thriftpy2 module (``THBaseService``, ``TPut``, ``TColumnValue``,
    ...), loaded once per process (a later call's ``idl`` is ignored)."""
    global _module
    with _lock:
        if _module is None:
            path = Path(idl) if idl is not None else default_idl()
            _module = thriftpy2.load(str(path), module_name=THRIFT2_MODULE)
        return _module


def thrift2_client(host: str, port: int, *, timeout_ms: int = 60_000) -> Any:
    """A thriftpy2 client of the Thrift2 ``THBaseService`` (buffered transport, binary
    protocol, as HBase's gateway serves it by default). Close it with ``client.close()``."""
    return make_client(
        load_thrift2().THBaseService,
        host,
        port,
        timeout=timeout_ms,
        proto_factory=TCyBinaryProtocolFactory(decode_response=True),
        trans_factory=TCyBufferedTransportFactory(),
    )
