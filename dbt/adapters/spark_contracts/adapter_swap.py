"""The adapter's face for rebuilds that cannot replace in one statement: the table built beside
the relation and swapped in by two renames (core/swap.py, run/swap.py), and the next run's
recovery of a swap or a Parquet rewrite stopped between its renames."""

from __future__ import annotations

from typing import Optional

from dbt.adapters.base import available
from dbt.adapters.base.meta import AdapterMeta
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_contracts.connection.spark_handle import _ConnectionSpark
from dbt.adapters.spark_contracts.core.intent import find_intent
from dbt.adapters.spark_contracts.core.render import BACKUP_SUFFIX, REWRITE_SUFFIX, suffixed
from dbt.adapters.spark_contracts.core.swap import Swap, between_renames, unmark
from dbt.adapters.spark_contracts.run.swap import swap_in

logger = AdapterLogger("SparkContracts")


class SwapMethods(metaclass=AdapterMeta):
    """Mixed into `SparkContractsAdapter`."""

    def _sibling(self, relation: BaseRelation, suffix: str) -> Optional[BaseRelation]:
        """The sibling `<relation><suffix>` as dbt's relation cache holds it, None when it is
        not there (no Spark call where the cache knows the schema, as in `dbt run`)."""
        sibling = suffixed(relation.identifier, suffix)
        return self.get_relation(relation.database, relation.schema, sibling)  # type: ignore[attr-defined]

    @available
    def swap_beside(self, relation: BaseRelation) -> BaseRelation:
        """Where a rebuild of `relation` builds its table before the swap (any table a failed
        or killed build left there dropped first)."""
        beside = relation.incorporate(
            path={"identifier": suffixed(relation.identifier, REWRITE_SUFFIX)}, type="table"
        )
        _ConnectionSpark(self).run(f"drop table if exists {beside}")
        return beside

    @available
    def swap_in(self, existing: BaseRelation, marker: str) -> None:
        """The table `swap_beside` built takes `existing`'s name; `existing` is dropped. On a
        failure before the new table holds the name, `existing` is put back and the error
        raised."""
        backup = self._sibling(existing, BACKUP_SUFFIX)
        swap = Swap(str(existing), bool(existing.is_view), bool(backup and backup.is_view))
        swap_in(_ConnectionSpark(self), swap, marker)
        for gone in (existing, backup):
            if gone is not None:
                self.cache_dropped(gone)  # type: ignore[attr-defined]

    @available
    def recover_rewrite(self, relation: BaseRelation) -> Optional[BaseRelation]:
        """`relation` is missing: if a swap or a Parquet rewrite stopped between its two renames,
        the old relation waits under its backup name. Put it back (and drop the new table
        beside it). A swap's evidence is its marker on the backup with the new table still
        beside it; a rewrite's, the intent on the backup naming the renames (which then has the
        run repair the table as usual). Found through dbt's relation cache, so a missing table
        costs no Spark call unless there is something to recover."""
        backup = self._sibling(relation, BACKUP_SUFFIX)
        if backup is None:
            return None
        properties = self._listed_properties(backup)  # type: ignore[attr-defined]
        beside = self._sibling(relation, REWRITE_SUFFIX)
        swapped = between_renames(properties, beside is not None)
        intent = find_intent(properties)
        renames = [s for s in (intent.statements if intent else ()) if "RENAME TO" in s]
        if not swapped and not any(BACKUP_SUFFIX in s for s in renames):
            return None  # a leftover of a finished swap, not one that stopped midway
        logger.warning(
            f"{relation} is missing and {backup} holds it: a rebuild stopped between its two "
            "renames; renaming it back"
        )
        if beside is not None:
            self.drop_relation(beside)  # type: ignore[attr-defined]
        self.rename_relation(backup, relation)  # type: ignore[attr-defined]
        if swapped:
            _ConnectionSpark(self).run(unmark(str(relation), bool(backup.is_view)))
        return self.get_relation(relation.database, relation.schema, relation.identifier)  # type: ignore[attr-defined]
