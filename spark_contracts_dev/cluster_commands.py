"""The processes of the local standalone cluster, as command lines and confs (pure: nothing
starts here; cluster.py starts them)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from spark_contracts_dev.servers import spark_home

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DERBY_CLASS = "org.apache.derby.drda.NetworkServerControl"
DERBY_CLIENT_DRIVER = "org.apache.derby.jdbc.ClientDriver"
# pyspark ships Derby's engine; the cluster adds derbynet (server) and derbyclient (JDBC client).
DERBY_ENGINE_JARS = ("derby-10.16.1.1.jar", "derbyshared-10.16.1.1.jar", "derbytools-10.16.1.1.jar")


@dataclass(frozen=True)
class Sizing:
    """Resources: sized so both servers get executors at once on a 2-core machine (Spark
    schedules by declared cores, not by real ones)."""

    workers: int = 2
    worker_cores: int = 2
    worker_memory: str = "2g"
    app_cores_max: int = 2
    executor_cores: int = 1
    executor_memory: str = "1g"
    daemon_memory: str = "512m"  # the master's and the workers' own JVMs
    server_memory: str = "2g"  # each server's driver: it plans every statement of every test


def cluster_conf(
    kind: str, master_url: str, derby_port: int, metastore: str, sizing: Sizing
) -> dict[str, str]:
    """What a server needs on top of the embedded session's conf to run on the cluster and share
    its metastore (the warehouse and the Iceberg catalog come from EmbeddedSparkConfig)."""
    return {
        "spark.master": master_url,
        "spark.app.name": f"dbt-spark-contracts-{kind}",
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.cores.max": str(sizing.app_cores_max),
        "spark.executor.cores": str(sizing.executor_cores),
        "spark.executor.memory": sizing.executor_memory,
        "spark.driver.memory": sizing.server_memory,
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby://{HOST}:{derby_port}/{metastore};create=true"
        ),
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": DERBY_CLIENT_DRIVER,
        # the first server creates the metastore's tables in the new Derby database
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    }


def derby_command(java: str, class_path: Sequence[Path], port: int, home: Path) -> list[str]:
    return [
        java,
        "-Xmx256m",
        f"-Dderby.system.home={home}",
        "-cp",
        os.pathsep.join(str(p) for p in class_path),
        DERBY_CLASS,
        "start",
        "-h",
        HOST,
        "-p",
        str(port),
        "-noSecurityManager",
    ]


def master_command(port: int, web_ui_port: int) -> list[str]:
    spark_class = str(spark_home() / "bin" / "spark-class")
    return [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(port)] + [
        "--webui-port",
        str(web_ui_port),
    ]


def worker_command(master_url: str, web_ui_port: int, work_dir: Path, sizing: Sizing) -> list[str]:
    spark_class = str(spark_home() / "bin" / "spark-class")
    return [
        spark_class,
        WORKER_CLASS,
        "--host",
        HOST,
        "--cores",
        str(sizing.worker_cores),
        "--memory",
        sizing.worker_memory,
        "--webui-port",
        str(web_ui_port),
        "--work-dir",
        str(work_dir),
        master_url,
    ]
