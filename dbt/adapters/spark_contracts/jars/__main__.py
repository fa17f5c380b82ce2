"""`python -m dbt.adapters.spark_contracts.jars fetch <folder>` (a package's `__main__`: the
adapter package imports `jars` first, and running a module already imported would warn)."""

import sys

from dbt.adapters.spark_contracts.jars import main

sys.exit(main())
