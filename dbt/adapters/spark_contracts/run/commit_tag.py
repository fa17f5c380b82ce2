"""A node's commit tag (run guarantees, item 6), set for one block: from the first statement of
the node that needs it (a repair before planning, or the planned run carried out: a run whose
commits a later run looks up by the tag, `ModelRun.tags_commits`) to the end of the node. dbt
ends every node's materialization with the adapter's `post_model_hook`, in a `finally`; the tag
leaves the thread's session there, whatever the node did (succeeded, failed in Python or in
Jinja, was a full refresh), so no later node on that thread commits under it. State per adapter
instance (one per invocation), by thread: the tag the thread's session carries and its keys."""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, Sequence, Tuple

from dbt.adapters.spark_contracts.connection.spark_handle import Spark
from dbt.adapters.spark_contracts.core.recovery.intent import commit_tag
from dbt.adapters.spark_contracts.run.model_run import TAG_KEYS


@contextmanager
def tagged_as(spark: Spark, key: str, tag: str) -> Iterator[None]:
    """The commits of the statements inside carry `tag` under the session's `key` (a lease
    taker's marker, say); the node's own tag is set back after, whatever they did."""
    previous = spark.get_conf(key)
    spark.set_conf(key, tag)
    try:
        yield
    finally:
        spark.set_conf(key, previous)


class CommitTags:
    """Which threads' sessions carry a node's tag now, under which keys."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tagged: Dict[int, Tuple[str, Tuple[str, ...]]] = {}

    def set(self, spark: Spark, tag: str, keys: Sequence[str] = TAG_KEYS) -> None:
        """Every commit this thread's session makes from here on carries `tag` under `keys`
        (Delta's `commitInfo.userMetadata`, Iceberg's snapshot summary: `TAG_KEYS`), until
        `clear`. Keys the session carries `tag` under already are not set again."""
        thread = threading.get_ident()
        with self._lock:
            current, held = self._tagged.get(thread, ("", ()))
            missing = tuple(k for k in keys if current != tag or k not in held)
            # recorded before the statements: a failed SET is cleared at the node's end too
            self._tagged[thread] = (tag, tuple(dict.fromkeys(held + missing)))
        for key in missing:
            spark.set_conf(key, tag)

    def new(self, invocation_id: str, unique_id: str) -> str:
        """A new tag for this run of the node (`commit_tag`, told apart from the node's other
        runs in the invocation); not set anywhere yet."""
        return commit_tag(invocation_id, unique_id, uuid.uuid4().hex[:8])

    def start(self, spark: Spark, invocation_id: str, unique_id: str) -> str:
        """A `new` tag, `set` on this thread's session under every key; returned for its
        intent."""
        tag = self.new(invocation_id, unique_id)
        self.set(spark, tag)
        return tag

    def clear(self, spark: Callable[[], Spark]) -> None:
        """The tag out of this thread's session, if it carries one (no statement otherwise).
        The thread counts as tagged until every key it set is gone: a failed clear is tried
        again at the end of the thread's next node."""
        with self._lock:
            found = self._tagged.get(threading.get_ident())
        if found is None:
            return
        session = spark()
        for key in found[1]:
            session.set_conf(key, None)
        with self._lock:
            self._tagged.pop(threading.get_ident(), None)

    def tagged(self) -> bool:
        with self._lock:
            return threading.get_ident() in self._tagged

    def carries(self) -> str:
        """The tag this thread's session carries ("" for none)."""
        with self._lock:
            return self._tagged.get(threading.get_ident(), ("", ()))[0]
