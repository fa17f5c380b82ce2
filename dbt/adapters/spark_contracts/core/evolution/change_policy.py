"""A model's change policy (`schema_evolution.on_additive_change` / `on_destructive_change`):
each planned schema change gets a class (additive or destructive), and the model's setting for
that class, or a run-level var, decides what happens to it. Pure.

- additive: a new column, a new struct field (also inside an array or a map), a widening or a
  dropped NOT NULL the format makes in its metadata (no data file rewritten);
- destructive: a removed column or field, a narrowing, an incompatible type, a changed map key,
  reordered struct fields, and every change the format can only make by rewriting the table's
  files or by a full refresh.

The run-level vars (`allow_column_removal`, `allow_full_refresh`) win where they speak to a
change: given `true`, the change applies; given `false`, it is blocked. When the model sets no
`on_destructive_change`, a destructive change is decided as before the setting existed: blocked
unless its var permits it (a removal, a full refresh, a rewrite the format cannot make
atomically), applied otherwise (an atomic, row-keeping rewrite)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ADDITIVE_KEY, DESTRUCTIVE_KEY = "on_additive_change", "on_destructive_change"


class ChangeClass(enum.Enum):
    ADDITIVE = "additive"
    DESTRUCTIVE = "destructive"

    @property
    def key(self) -> str:
        return ADDITIVE_KEY if self is ChangeClass.ADDITIVE else DESTRUCTIVE_KEY


class OnChange(enum.Enum):
    ALLOW = "allow"  # apply
    WARN = "warn"  # apply, and warn naming the model, the path and the class
    ERROR = "error"  # block before anything changes
    IGNORE = "ignore"  # change nothing in the table; load what fits

    @classmethod
    def parse(cls, model: str, key: str, value: Any) -> OnChange | None:
        if value is None:
            return None
        allowed = ", ".join(v.value for v in cls)
        if not isinstance(value, str) or value.strip().lower() not in {v.value for v in cls}:
            raise ValueError(f"{model}: `schema_evolution.{key}` is {value!r}; allowed: {allowed}")
        return cls(value.strip().lower())


class Cost(enum.Enum):
    METADATA = "metadata only"
    BACKFILL = "metadata, then an UPDATE of the existing rows"
    REWRITE = "rewrite of the table's data files"
    FULL_REFRESH = "full refresh"
    NONE = "nothing (the format does not enforce it)"


@dataclass(frozen=True)
class ChangePolicy:
    """The model's two settings; None: not set (the defaults below)."""

    on_additive: OnChange | None = None
    on_destructive: OnChange | None = None

    @classmethod
    def parse(cls, model: str, raw: Mapping[str, Any]) -> ChangePolicy:
        return cls(
            OnChange.parse(model, ADDITIVE_KEY, raw.get(ADDITIVE_KEY)),
            OnChange.parse(model, DESTRUCTIVE_KEY, raw.get(DESTRUCTIVE_KEY)),
        )

    def setting(self, change_class: ChangeClass) -> OnChange | None:
        if change_class is ChangeClass.ADDITIVE:
            return self.on_additive
        return self.on_destructive

    def to_dict(self) -> dict[str, str | None]:
        return {
            ADDITIVE_KEY: self.on_additive.value if self.on_additive else None,
            DESTRUCTIVE_KEY: self.on_destructive.value if self.on_destructive else None,
        }


@dataclass(frozen=True)
class Verdict:
    """What the policy decided for one change, and what decided it (for the plan file)."""

    change_class: ChangeClass
    cost: Cost
    action: OnChange
    decided_by: str  # "on_destructive_change: error", "--vars allow_column_removal: true", ...
    gate: str | None  # the run var that permits the change, where one does
    files: int | None = None  # the table's data files, where a rewrite's cost names them

    def cost_text(self) -> str:
        """The cost as the plan file shows it: a rewrite names the files it rewrites where the
        table's format counts them (core/evolution/operations.Plan.with_data_files)."""
        if self.cost is Cost.REWRITE and self.files is not None:
            return f"rewrite of {self.files} data file{'' if self.files == 1 else 's'}"
        return self.cost.value

    def permits(self) -> str:
        """How to let a blocked change through."""
        ways = [f"schema_evolution: {{{self.change_class.key}: allow}}"]
        if self.gate is not None:
            ways.append(f"--vars '{{{self.gate}: true}}'")
        return " or ".join(ways)

    def to_dict(self) -> dict[str, str | None]:
        return {
            "class": self.change_class.value,
            "cost": self.cost_text(),
            "action": self.action.value,
            "decided_by": self.decided_by,
        }


def judge(
    change_class: ChangeClass,
    cost: Cost,
    gate: str | None,
    run_vars: Mapping[str, bool | None],
    policy: ChangePolicy,
) -> Verdict:
    """The action for one change. `gate`: the run var a change of this kind needs without a
    model setting (None: none); `run_vars`: each var as the run gave it (None: not given)."""
    given = run_vars.get(gate) if gate is not None else None
    if given is not None:  # the run's var speaks to this change: it wins
        action = OnChange.ALLOW if given else OnChange.ERROR
        return Verdict(change_class, cost, action, f"--vars {gate}: {str(given).lower()}", gate)
    setting = policy.setting(change_class)
    if setting is not None:
        return Verdict(change_class, cost, setting, f"{change_class.key}: {setting.value}", gate)
    if change_class is ChangeClass.ADDITIVE:
        return Verdict(change_class, cost, OnChange.ALLOW, f"{ADDITIVE_KEY}: allow (default)", gate)
    action = OnChange.ERROR if gate is not None else OnChange.ALLOW
    why = (
        f"{DESTRUCTIVE_KEY}: error (default)"
        if gate is not None
        else (f"{DESTRUCTIVE_KEY} not set: an atomic rewrite that keeps every row applies")
    )
    return Verdict(change_class, cost, action, why, gate)
