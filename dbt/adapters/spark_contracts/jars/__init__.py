"""Where the Delta Lake and Iceberg jars come from: a local folder, or Spark's package resolver.

Run ``python -m dbt.adapters.spark_contracts.jars fetch <dir>`` to fill a folder from Maven Central.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

JARS_ENV_VAR = "DBT_SPARK_CONTRACTS_JARS"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class MavenJar:
    group: str
    artifact: str
    version: str
    classifier: str = ""  # e.g. "tests", "test-fixtures": a jar published beside the main one

    @property
    def coordinate(self) -> str:
        tail = f":{self.classifier}" if self.classifier else ""
        return f"{self.group}:{self.artifact}:{self.version}{tail}"

    @property
    def file_name(self) -> str:
        tail = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{tail}.jar"

    @property
    def url(self) -> str:
        return f"{MAVEN_CENTRAL}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


# The jars the embedded session needs on top of pyspark's own (Spark 4.1, Scala 2.13).
# delta-spark 4.3.1 is built on Spark 4.1.0 and pins pyspark <= 4.1.1.
REQUIRED_JARS: tuple[MavenJar, ...] = (
    MavenJar("io.delta", "delta-spark_2.13", "4.3.1"),
    MavenJar("io.delta", "delta-storage", "4.3.1"),
    MavenJar("org.apache.iceberg", "iceberg-spark-runtime-4.1_2.13", "1.12.0"),
)
# Spark's resolver pulls delta-storage in transitively from delta-spark.
PACKAGE_COORDINATES: tuple[str, ...] = (REQUIRED_JARS[0].coordinate, REQUIRED_JARS[2].coordinate)
# The local standalone cluster (spark_contracts_dev/cluster.py, in the repository, not the
# wheel) on top: a Derby network server as the shared Hive metastore, and its JDBC client for
# the drivers. pyspark ships Derby's engine jars (derby, derbyshared, derbytools 10.16.1.1) but
# neither of these.
CLUSTER_JARS: tuple[MavenJar, ...] = (
    MavenJar("org.apache.derby", "derbynet", "10.16.1.1"),
    MavenJar("org.apache.derby", "derbyclient", "10.16.1.1"),
)
ALL_JARS: tuple[MavenJar, ...] = REQUIRED_JARS + CLUSTER_JARS


class JarsNotFound(RuntimeError):
    pass


def configured_jars_dir(profile_value: Optional[str]) -> Optional[Path]:
    """The jar folder from the profile key `jars_dir`, else the environment variable, else None."""
    value = profile_value or os.environ.get(JARS_ENV_VAR)
    return Path(value).expanduser().resolve() if value else None


def jar_paths(jars_dir: Path, jars: Sequence[MavenJar] = REQUIRED_JARS) -> list[Path]:
    """The required jars inside `jars_dir`; raise naming every missing one and the fix."""
    missing = [jar.file_name for jar in jars if not (jars_dir / jar.file_name).is_file()]
    if missing:
        raise JarsNotFound(
            f"The jar folder {jars_dir} (profile key `jars_dir` or ${JARS_ENV_VAR}) lacks "
            f"{', '.join(missing)}. Fill it with "
            f"`python -m dbt.adapters.spark_contracts.jars fetch {jars_dir}` (or `make jars` in a "
            "clone of dbt-spark-contracts), or unset both to let Spark resolve "
            f"{', '.join(PACKAGE_COORDINATES)} itself."
        )
    return [jars_dir / jar.file_name for jar in jars]


def cluster_jar_paths(jars_dir: Path) -> dict[str, Path]:
    """The jars only the local cluster needs (by artifact), checked like `jar_paths`."""
    return {
        jar.artifact: path
        for jar, path in zip(CLUSTER_JARS, jar_paths(jars_dir, CLUSTER_JARS), strict=True)
    }


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dbt-spark-contracts</groupId><artifactId>jars</artifactId><version>1</version>
  <dependencies>{deps}</dependencies>
</project>
"""
_DEP = (
    "<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>{c}"
    "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion>"
    "</exclusions></dependency>"
)


def _fetch_with_maven(target: Path, mvn: str, jars: Sequence[MavenJar]) -> None:
    deps = "".join(
        _DEP.format(
            g=j.group,
            a=j.artifact,
            v=j.version,
            c=f"<classifier>{j.classifier}</classifier>" if j.classifier else "",
        )
        for j in jars
    )
    with tempfile.TemporaryDirectory() as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_POM.format(deps=deps))
        subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={target}",
            ],
            check=True,
        )


def _fetch_with_https(target: Path, jars: Sequence[MavenJar]) -> None:
    for jar in jars:
        with urllib.request.urlopen(jar.url, timeout=120) as response:
            payload = response.read()
        with urllib.request.urlopen(jar.url + ".sha1", timeout=60) as response:
            expected = response.read().decode().split()[0].strip()
        actual = hashlib.sha1(payload).hexdigest()  # noqa: S324 - Maven Central publishes sha1
        if actual != expected:
            raise JarsNotFound(f"{jar.url}: sha1 {actual} != published {expected}")
        (target / jar.file_name).write_bytes(payload)


def fetch(target: Path, jars: Sequence[MavenJar] = ALL_JARS) -> list[Path]:
    """Fill `target` with `jars` (by default the required and the cluster's) from Maven Central
    (mvn when present, else HTTPS); only the missing ones are fetched. Each jar is fetched
    alone, without its dependencies: a list names every jar it needs."""
    target.mkdir(parents=True, exist_ok=True)
    missing = [jar for jar in jars if not (target / jar.file_name).is_file()]
    if missing:
        mvn = shutil.which("mvn")
        if mvn:
            _fetch_with_maven(target, mvn, missing)
        else:
            _fetch_with_https(target, missing)
    return jar_paths(target, jars)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dbt.adapters.spark_contracts.jars")
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_cmd = sub.add_parser(
        "fetch", help="download the Delta, Iceberg (and the local cluster's Derby) jars"
    )
    fetch_cmd.add_argument("target", type=Path)
    sub.add_parser("list", help="print the Maven coordinates `fetch` downloads")
    args = parser.parse_args(argv)
    if args.command == "list":
        for jar in ALL_JARS:
            print(jar.coordinate)
        return 0
    for path in fetch(args.target.expanduser().resolve()):
        print(path)
    return 0
