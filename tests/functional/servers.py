"""Local Spark servers for the thrift and connect profiles of the functional tests."""

from typing import Dict, Optional

from spark_contracts_dev.servers import LocalServer, start


def start_local_server(
    kind: str, warehouse_dir: str, conf: Optional[Dict[str, str]] = None
) -> LocalServer:
    """`conf`: Spark settings over the embedded session's (e.g. a REST Iceberg catalog)."""
    return start(kind, warehouse_dir, conf=conf or None)
