"""A node's commit tag (run guarantees, item 6), set for one block: from the moment the node's
run is planned to the end of the node. dbt ends every node's materialization with the adapter's
`post_model_hook`, in a `finally`; the tag leaves the thread's session there, whatever the
node did (succeeded, failed in Python or in Jinja, was a full refresh), so no later node on
that thread commits under it. State per adapter instance (one per invocation), by thread."""

from __future__ import annotations

import threading
import uuid
from typing import Callable, Set

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.recovery.intent import commit_tag
from dbt.adapters.spark_contracts.run.model_run import DELTA_USER_METADATA, ICEBERG_SNAPSHOT_TAG


class CommitTags:
    """Which threads' sessions carry a node's tag now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tagged: Set[int] = set()

    def set(self, spark: Spark, tag: str) -> None:
        """Every commit this thread's session makes from here on carries `tag` (Delta's
        `commitInfo.userMetadata`, Iceberg's snapshot summary), until `clear`."""
        with self._lock:
            self._tagged.add(threading.get_ident())
        spark.set_conf(DELTA_USER_METADATA, tag)
        spark.set_conf(ICEBERG_SNAPSHOT_TAG, tag)

    def start(self, spark: Spark, invocation_id: str, unique_id: str) -> str:
        """A new tag for this run of the node (`commit_tag`, told apart from the node's other
        runs in the invocation), `set` on this thread's session; returned for its intent."""
        tag = commit_tag(invocation_id, unique_id, uuid.uuid4().hex[:8])
        self.set(spark, tag)
        return tag

    def clear(self, spark: Callable[[], Spark]) -> None:
        """The tag out of this thread's session, if it carries one (no statement otherwise).
        The thread counts as tagged until both settings are gone: a failed clear is tried
        again at the end of the thread's next node."""
        with self._lock:
            if threading.get_ident() not in self._tagged:
                return
        session = spark()
        session.set_conf(DELTA_USER_METADATA, None)
        session.set_conf(ICEBERG_SNAPSHOT_TAG, None)
        with self._lock:
            self._tagged.discard(threading.get_ident())

    def tagged(self) -> bool:
        with self._lock:
            return threading.get_ident() in self._tagged
