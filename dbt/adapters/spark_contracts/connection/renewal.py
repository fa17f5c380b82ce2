"""A connection's current server session and the sessions it left (Spark Connect, Thrift).

A write Spark gave no answer for (a lost connection, a cancel the server answers at once) may
still run on the server and read its session's settings (the lease's transaction id) when it
commits: that session gets no statement again, so nothing changes what the write reads. The
connection goes on in a new session, opened as the first was, with the settings the connection
itself set and names as carried (the node's commit tag) set there too; the session left is
never asked for them. Where the new one cannot be opened, or its settings cannot be set in it,
it is discarded and each later statement tries again first: none runs in the old one.
"""

from __future__ import annotations

from typing import Callable, Dict, Generic, List, Optional, Sequence, TypeVar

S = TypeVar("S")


class SessionSwitch(Generic[S]):
    """`current`: the session statements run in (open one first where `renewing`); `left`:
    those left, closed with the connection; `settings`: what the connection set in the current
    one. `open_new` opens another like the first (None: the method has one session only);
    `set_in` sets one setting in a session; `discard` closes one not opened whole."""

    def __init__(
        self,
        first: S,
        open_new: Optional[Callable[[], S]],
        set_in: Callable[[S, str, str], None],
        discard: Callable[[S], None],
    ) -> None:
        self.current = first
        self.left: List[S] = []
        self.settings: Dict[str, str] = {}
        self.renewing = False  # the current session is left: the next use opens a new one
        self.open_new = open_new
        self._set_in, self._discard = set_in, discard

    def session(self) -> S:
        """The session to run the next statement in (a new one opened first, if due)."""
        if self.renewing:
            self._open()
        return self.current

    def record(self, key: str, value: Optional[str]) -> None:
        """The connection set (None: unset) `key` in the current session."""
        if value is None:
            self.settings.pop(key, None)
        else:
            self.settings[key] = value

    def leave(self, carried: Sequence[str] = ()) -> bool:
        """Leave the current session as it is and open a new one, with the `settings` among
        `carried` set in it. False where there is no way to open one. Where opening fails, it
        raises, and each later `session()` tries again first."""
        if self.open_new is None:
            return False
        if not self.renewing:
            self.left.append(self.current)
            self.settings = {k: v for k, v in self.settings.items() if k in carried}
            self.renewing = True
        self._open()
        return True

    def opened(self) -> List[S]:
        """Every session opened whole and not closed yet: those left, and the current one."""
        return [*self.left, *([] if self.renewing else [self.current])]

    def _open(self) -> None:
        assert self.open_new is not None
        fresh = self.open_new()
        try:
            for key, value in self.settings.items():
                self._set_in(fresh, key, value)
        except BaseException:
            self._discard(fresh)
            raise
        self.current, self.renewing = fresh, False
