"""A statement refused by a concurrent run's commit, sent again (run/quarantine_steps.py: the
quarantine's create, the run's insert into it)."""

import time
from typing import Any, Callable

from dbt_common.exceptions import DbtDatabaseError

# times the quarantine's create or the run's insert into it is sent again after a refusal
INSERT_ATTEMPTS = 3


def tried_again(
    action: Callable[[], Any],
    settled: Callable[[], bool],
    first_at_once: bool,
    before: Callable[[], Any] = lambda: None,
) -> None:
    """`action` sent until it goes through, `INSERT_ATTEMPTS` times after a first try (at once,
    or a second after the refusal that called for it: `first_at_once`), a second longer before
    each, `before` each (the lease's fence: what it raises is raised, never tried again); a
    refusal after which `settled()` holds ends it (the other run did it). The last refusal is
    raised."""
    first = 0 if first_at_once else 1
    for attempt in range(first, INSERT_ATTEMPTS + 1):
        if attempt:
            time.sleep(attempt)
        before()
        try:
            action()
            return
        except DbtDatabaseError:
            if settled():
                return
            if attempt == INSERT_ATTEMPTS:
                raise
