"""`Is`: one definition of a plan's read-only flags, each true when an enum field of the plan
holds one member (`no_op = Is("action", CloneAction.NO_OP)`), for Jinja and callers asking by
name. Pure."""

from __future__ import annotations

from enum import Enum
from typing import Any, overload


class Is:
    """A read-only attribute: `getattr(plan, field) is member`."""

    def __init__(self, field: str, member: Enum) -> None:
        self.field = field
        self.member = member

    @overload
    def __get__(self, plan: None, owner: Any = None) -> Is: ...

    @overload
    def __get__(self, plan: object, owner: Any = None) -> bool: ...

    def __get__(self, plan: object | None, owner: Any = None) -> Is | bool:
        if plan is None:
            return self
        return getattr(plan, self.field) is self.member
