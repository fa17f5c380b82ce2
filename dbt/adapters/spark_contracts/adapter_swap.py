"""The adapter's face for rebuilds that cannot replace in one statement: the table built beside
the relation and swapped in by two renames under the model's lease (core/recovery/swap.py,
run/swap.py), and the next run's recovery of a swap or a Parquet rewrite stopped between its
renames."""

from __future__ import annotations

from typing import Any, Optional

from dbt.adapters.base import available
from dbt.adapters.base.meta import AdapterMeta
from dbt.adapters.base.relation import BaseRelation
from dbt_common.exceptions import DbtRuntimeError
from dbt_common.invocation import get_invocation_id

from dbt.adapters.spark_contracts.connection.spark_handle import _ConnectionSpark
from dbt.adapters.spark_contracts.core.evolution.render import (
    BACKUP_SUFFIX,
    REWRITE_SUFFIX,
    suffixed,
)
from dbt.adapters.spark_contracts.core.recovery.swap import Swap
from dbt.adapters.spark_contracts.run import swap as swaps
from dbt.adapters.spark_contracts.run.lease import ModelKey


class DryRunOverStoppedSwap(DbtRuntimeError):
    """A dry run of a model whose relation is missing while its backup is there: a swap or a
    Parquet rewrite may have stopped between its renames. Only a run that is not a dry run puts
    it back (a dry run changes nothing); planned as a new table, the dry run would build one
    over the missing relation."""

    def __init__(self, relation: str, backup: str) -> None:
        super().__init__(
            f"{relation} is missing and {backup} is there: a swap or rewrite may have stopped "
            "between its renames. A dry run changes nothing, so it does not put the table back "
            "and cannot plan against it; nothing was changed. Run the model without "
            "schema_evolution_dry_run once (it puts the table back first), then the dry run."
        )


class SwapMethods(metaclass=AdapterMeta):
    """Mixed into `SparkContractsAdapter`."""

    def _sibling(self, relation: BaseRelation, suffix: str) -> Optional[BaseRelation]:
        """The sibling `<relation><suffix>` as dbt's relation cache holds it, None when it is
        not there (no Spark call where the cache knows the schema, as in `dbt run`)."""
        sibling = suffixed(relation.identifier, suffix)
        return self.get_relation(relation.database, relation.schema, sibling)  # type: ignore[attr-defined]

    def _swap(self, existing: BaseRelation) -> Swap:
        backup = self._sibling(existing, BACKUP_SUFFIX)
        return Swap(str(existing), bool(existing.is_view), bool(backup and backup.is_view))

    def _swap_key(self, existing: BaseRelation, unique_id: str, invocation_id: str) -> ModelKey:
        fmt = self.table_format_of(existing)  # type: ignore[attr-defined]
        return ModelKey(str(existing), invocation_id, fmt, unique_id)

    def _swapped(self, existing: BaseRelation, swap: Swap) -> None:
        """dbt's cache after a swap: the old relation and any backup gone (the materialization
        returns the new table, which dbt caches)."""
        for gone in (existing, self._sibling(existing, BACKUP_SUFFIX)):
            if gone is not None:
                self.cache_dropped(gone)  # type: ignore[attr-defined]

    def _swap_build(
        self, existing: BaseRelation, create_sql: str, unique_id: str, invocation_id: str
    ) -> Any:
        """A rebuild of `existing` built beside it by `create_sql` and swapped in, under the
        model's lease (run/swap.build_and_swap); `existing` as it was on any failure."""
        swap = self._swap(existing)
        spark = _ConnectionSpark(self)
        key = self._swap_key(existing, unique_id, invocation_id)
        response = swaps.build_and_swap(spark, key, swap, create_sql)
        self._swapped(existing, swap)
        return response

    def dry_run_relation(
        self, relation: BaseRelation, existing: Optional[BaseRelation]
    ) -> Optional[BaseRelation]:
        """A dry run's relation: `existing`; refused (`DryRunOverStoppedSwap`) where it is
        missing and its backup is there (`recover_rewrite` would put it back first)."""
        backup = self._sibling(relation, BACKUP_SUFFIX) if existing is None else None
        if backup is not None:
            raise DryRunOverStoppedSwap(str(relation), str(backup))
        return existing

    @available
    def recover_rewrite(self, relation: BaseRelation) -> Optional[BaseRelation]:
        """`relation` is missing: if a swap or a Parquet rewrite stopped between its two renames
        (core/recovery/swap.recovery: the run's record, the backup and the table beside), put
        the old relation back under its name and drop the new table beside it, unless the run
        that left them may be alive. A rewrite's intent then has the run repair the table as
        usual. Found through dbt's relation cache, so a missing table costs no Spark call unless
        a backup is there."""
        backup = self._sibling(relation, BACKUP_SUFFIX)
        if backup is None:
            return None
        properties = self._listed_properties(backup)  # type: ignore[attr-defined]
        fmt = self.table_format_of(backup)  # type: ignore[attr-defined]
        key = ModelKey(str(relation), get_invocation_id(), fmt, str(relation))
        if not swaps.recover(_ConnectionSpark(self), key, properties, bool(backup.is_view)):
            return None  # a leftover of a finished swap, not one that stopped midway
        beside = self._sibling(relation, REWRITE_SUFFIX)
        if beside is not None:
            self.cache_dropped(beside)  # type: ignore[attr-defined]
        self.cache_renamed(backup, relation.incorporate(type=backup.type))  # type: ignore[attr-defined]
        return self.get_relation(relation.database, relation.schema, relation.identifier)  # type: ignore[attr-defined]
