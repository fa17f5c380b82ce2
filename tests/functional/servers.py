"""Local Spark servers for the thrift and connect profiles of the functional tests."""

from spark_contracts_dev.servers import LocalServer, start


def start_local_server(kind: str, warehouse_dir: str) -> LocalServer:
    return start(kind, warehouse_dir)
