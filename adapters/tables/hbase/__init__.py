"""The table store port on a real HBase: ``HBaseTableStore`` (Thrift1 through happybase,
optionally Thrift2 for writes), in parts: ``calls`` (connections, retries, errors),
``schema`` (tables), ``writes``, ``reads``, ``store`` (the class that puts them together).

May import: ``projections`` (the port), happybase, thriftpy2, tenacity and
``adapters.tables.hbase_thrift2``; never ``streaming``, ``cli`` or ``devtools``.
"""

from adapters.tables.hbase.schema import SALT_SPLIT_KEYS, hbase_shell_create
from adapters.tables.hbase.store import HBaseTableStore

__all__ = ["HBaseTableStore", "SALT_SPLIT_KEYS", "hbase_shell_create"]
