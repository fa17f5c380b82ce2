"""A change's steps as values: the SQL of each and its typed inverse, so what takes a stopped
change back is computed from the steps that ran, never read back from their text. Pure.

The renderer (core/evolution/render.py) and the swap (core/recovery/swap.py) make the steps; a
run keeps the ones that completed, in order, and `undo` turns them into the inverses to run:
newest first, each once, none when a step that makes the change stand has run (the new table
holds the name). A table whose log puts it back whole (Delta's RESTORE, schema included) needs
no inverse; Iceberg's rollback keeps the schema, so the columns a run added are dropped by their
inverse; a table without a log (Parquet) is put back by the inverses alone (run/table_log.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from dbt.adapters.spark_contracts.core.schema.types import quote_identifier, sql_string


def kind(is_view: bool) -> str:
    """The word naming a relation's kind in DDL."""
    return "VIEW" if is_view else "TABLE"


@dataclass(frozen=True)
class Rename:
    """Rename back: `src` takes the name `dst` again."""

    src: str
    dst: str
    is_view: bool = False

    @property
    def sql(self) -> str:
        return f"ALTER {kind(self.is_view)} {self.src} RENAME TO {self.dst}"


@dataclass(frozen=True)
class DropTable:
    """Drop what the run created (or built under a name it made its own)."""

    relation: str

    @property
    def sql(self) -> str:
        return f"DROP TABLE IF EXISTS {self.relation}"


@dataclass(frozen=True)
class DropAdded:
    """Drop the columns (paths) the run's own ADD COLUMNS added."""

    relation: str
    paths: tuple[tuple[str, ...], ...]

    @property
    def sql(self) -> str:
        paths = ", ".join(".".join(quote_identifier(s) for s in p) for p in self.paths)
        return f"alter table {self.relation} drop columns ({paths})"


@dataclass(frozen=True)
class UnsetProperty:
    """Take off a table property the run set."""

    relation: str
    key: str
    is_view: bool = False

    @property
    def sql(self) -> str:
        return (
            f"ALTER {kind(self.is_view)} {self.relation} UNSET TBLPROPERTIES IF EXISTS "
            f"({sql_string(self.key)})"
        )


Inverse = Union[Rename, DropTable, DropAdded, UnsetProperty]
_INVERSES: dict[str, type] = {c.__name__: c for c in (Rename, DropTable, DropAdded, UnsetProperty)}


# how a plan's listing (the console's dry run, the plan file) marks a step sent after the load
AFTER_LOAD_MARK = "  -- after the load"


@dataclass(frozen=True)
class Step:
    """One statement of a change. `inverse`: what takes it back where one exists (None: nothing
    of its own to take back, or only the table's log can); `stands`: once it ran, the change
    stands and nothing before it is taken back (the new table took the name); `writes`: it
    writes the table's rows (a backfill, a rewrite in place), so the run sends it under its
    lease's transaction id where the format fences inside the commit (an ALTER takes no id:
    run/fence.py; not kept in the intent: only the run sending it needs it); `after_load`:
    sent after the load, as the run's last change (a column removal where a rollback keeps
    the schema: core/evolution/capabilities `drops_columns_after_load`)."""

    sql: str
    inverse: Inverse | None = None
    stands: bool = False
    writes: bool = False
    after_load: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Its record in the intent: what is not set is left out (a table property is small)."""
        data: dict[str, Any] = {"sql": self.sql}
        if self.inverse is not None:
            data["inverse"] = {"kind": type(self.inverse).__name__, **vars(self.inverse)}
        if self.stands:
            data["stands"] = True
        if self.after_load:
            data["after_load"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        found = data.get("inverse")
        inverse = None
        if found is not None:
            fields = {k: v for k, v in found.items() if k != "kind"}
            if "paths" in fields:
                fields["paths"] = tuple(tuple(p) for p in fields["paths"])
            inverse = _INVERSES[found["kind"]](**fields)
        stands, after = bool(data.get("stands", False)), bool(data.get("after_load", False))
        return cls(str(data["sql"]), inverse, stands, after_load=after)


def undo(done: Iterable[Step]) -> tuple[Inverse, ...]:
    """What takes back the steps that completed (`done`, in the order they ran): their inverses,
    newest first, each once; nothing once a step that makes the change stand has run."""
    steps = list(done)
    if any(s.stands for s in steps):
        return ()
    inverses: list[Inverse] = []
    for step in reversed(steps):
        if step.inverse is not None and step.inverse not in inverses:
            inverses.append(step.inverse)
    return tuple(inverses)
