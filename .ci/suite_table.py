"""Per-suite pass counts from pytest's JUnit XML, as the README's suite table rows.

    python .ci/suite_table.py session=reports/session.xml [thrift=reports/thrift.xml ...]

Each row is one official dbt-tests-adapter suite (its `Base...` class, under tests/functional/
adapter; other tests in the same XML are left out) with, per connection method, `passed/total`
and the number skipped; a failed or erroring test shows as `F`.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

SUITES_PACKAGE = "tests.functional.adapter."  # the official suites' test modules


@dataclass
class Counts:
    passed: int = 0
    skipped: int = 0
    failed: int = 0
    skip_reasons: List[str] = field(default_factory=list)

    def cell(self) -> str:
        total = self.passed + self.skipped + self.failed
        text = f"{self.passed}/{total}"
        if self.skipped:
            text += f" ({self.skipped} skipped)"
        if self.failed:
            text += f" **{self.failed} F**"
        return text


def read(path: str) -> Dict[Tuple[str, str], Counts]:
    """(module, test class) -> counts, from one JUnit XML file."""
    counts: Dict[Tuple[str, str], Counts] = defaultdict(Counts)
    for case in ET.parse(path).getroot().iter("testcase"):
        if not case.get("classname", "").startswith(SUITES_PACKAGE):
            continue  # one of the project's own functional tests (a run of both)
        module, _, cls = case.get("classname", "").rpartition(".")
        entry = counts[(module.rpartition(".")[2], cls)]
        if case.find("skipped") is not None:
            entry.skipped += 1
            entry.skip_reasons.append(case.find("skipped").get("message", ""))  # type: ignore[union-attr]
        elif case.find("failure") is not None or case.find("error") is not None:
            entry.failed += 1
        else:
            entry.passed += 1
    return counts


def main(argv: List[str]) -> int:
    runs = [arg.split("=", 1) for arg in argv]
    if not runs or any(len(r) != 2 for r in runs):
        print(__doc__, file=sys.stderr)
        return 2
    tables = {method: read(path) for method, path in runs}
    keys = sorted({k for t in tables.values() for k in t})
    print("| suite (test class) | file | " + " | ".join(m for m, _ in runs) + " |")
    print("|---|---|" + "---|" * len(runs))
    failed = 0
    for module, cls in keys:
        cells = []
        for method, _ in runs:
            entry = tables[method].get((module, cls))
            cells.append(entry.cell() if entry else "–")
            failed += entry.failed if entry else 0
        print(f"| `{cls}` | {module} | " + " | ".join(cells) + " |")
    totals = []
    for method, _ in runs:
        t = tables[method].values()
        passed, n = sum(c.passed for c in t), sum(c.passed + c.skipped + c.failed for c in t)
        totals.append(f"**{passed}/{n}**")
    print("| **all** | | " + " | ".join(totals) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
