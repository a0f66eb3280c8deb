"""HBase's files for the dev server (``hbase``): its jars resolved with Maven from the pom
(``install_hbase``), the Thrift2 IDL extracted from them (``thrift2_idl``), the Java classes
it runs, its log4j2 settings and ``hbase-site.xml``.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

from adapters.tables.hbase_thrift2 import Thrift2IdlMissing, extract_idl

from ._common import ServiceFailed
from .toolchain import maven_lib, pom_property

__all__ = ["COMPACTOR_CLASS", "HBASE_POM", "LOG4J2_PROPERTIES", "MASTER_CLASS", "MASTER_READY",
           "THRIFT2_CLASS", "THRIFT_CLASS", "install_hbase", "thrift2_idl"]

HBASE_POM = Path(__file__).parent / "maven" / "hbase" / "pom.xml"

MASTER_CLASS = "org.apache.hadoop.hbase.master.HMaster"
THRIFT_CLASS = "org.apache.hadoop.hbase.thrift.ThriftServer"
THRIFT2_CLASS = "org.apache.hadoop.hbase.thrift2.ThriftServer"
COMPACTOR_CLASS = "org.apache.hadoop.hbase.util.compaction.MajorCompactor"
MASTER_READY = "Master has completed initialization"

LOG4J2_PROPERTIES = """\
# written by devtools/devservers/hbase.py
status = warn
name = letterlog-hbase
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:letterlog.log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger = INFO, file
logger.zookeeper.name = org.apache.zookeeper
logger.zookeeper.level = WARN
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = WARN
logger.hbase.name = org.apache.hadoop.hbase
logger.hbase.level = INFO
logger.hbasezk.name = org.apache.hadoop.hbase.zookeeper
logger.hbasezk.level = WARN
"""


def install_hbase() -> Path:
    """Resolve the HBase jars (once), extract the Thrift2 IDL, and return the lib dir."""
    version = pom_property(HBASE_POM, "hbase.version")
    lib = maven_lib(HBASE_POM, prefix=f"hbase-{version}")
    thrift2_idl(lib)
    return lib


def thrift2_idl(lib: Path | None = None, *, install: bool = False) -> Path:
    """HBase's Thrift2 IDL, extracted (once) from the cached hbase-thrift jar.

    `lib` is the HBase lib dir (default: this pom's cached one; with `install=False` a missing
    cache raises `ServiceFailed` instead of running Maven). The file lands next to `lib`, in
    `<cache>/hbase-<version>-<hash>/thrift2/hbase.thrift`, written atomically."""
    if lib is None:
        lib = maven_lib(
            HBASE_POM, prefix=f"hbase-{pom_property(HBASE_POM, 'hbase.version')}", install=install
        )
    try:
        return extract_idl(lib)
    except Thrift2IdlMissing as exc:
        raise ServiceFailed(str(exc)) from exc


def _site_xml(props: dict[str, str]) -> str:
    body = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
        for k, v in props.items()
    )
    return (
        '<?xml version="1.0"?>\n<!-- written by devtools/devservers/hbase.py -->\n'
        f"<configuration>\n{body}\n</configuration>\n"
    )
