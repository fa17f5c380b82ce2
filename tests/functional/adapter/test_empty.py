"""dbt-tests-adapter's `--empty` suites (dbt.tests.adapter.empty): `dbt run --empty` on refs,
ephemeral models and sources (the two dbt-spark runs), and, on dbt-core 1.12+, `dbt seed
--empty` / `dbt build --empty` (BaseTestEmptySeedFlag: the seed's table is created with its
inferred column types and no rows)."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.empty.test_empty import BaseTestEmpty, BaseTestEmptyInlineSourceRef
from dbt.version import __version__ as dbt_version
from packaging.version import Version

try:  # dbt-tests-adapter 1.20+
    from dbt.tests.adapter.empty.test_empty import BaseTestEmptySeedFlag
except ImportError:  # pragma: no cover - older dbt-tests-adapter
    BaseTestEmptySeedFlag = object  # type: ignore[assignment,misc]

SEED_EMPTY = Version(dbt_version).release[:2] >= (1, 12) and BaseTestEmptySeedFlag is not object


class TestSparkEmpty(BaseTestEmpty):
    pass


class TestSparkEmptyInlineSourceRef(BaseTestEmptyInlineSourceRef):
    pass


@pytest.mark.skipif(
    not SEED_EMPTY, reason=f"`dbt seed --empty` is dbt-core 1.12+ (this is {dbt_version})"
)
class TestSparkEmptySeedFlag(BaseTestEmptySeedFlag):  # type: ignore[misc,valid-type]
    pass
