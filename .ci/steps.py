"""Run `make <step>` for each step in turn, stop at the first that fails, and print the minutes
each took (CI keeps no files: the table is the record).

    python .ci/steps.py lint unit functional-ci cluster-ci dbt112-ci
"""

from __future__ import annotations

import subprocess
import sys
import time


def main(steps: list[str]) -> int:
    took: list[tuple[str, float, int]] = []
    status = 0
    for step in steps:
        began = time.monotonic()
        status = subprocess.call(["make", "--no-print-directory", step])
        took.append((step, (time.monotonic() - began) / 60, status))
        if status:
            break
    total = sum(minutes for _, minutes, _ in took)
    print("\nper-step minutes:")
    for step, minutes, code in took:
        print(f"  {step:<16} {minutes:6.1f}  {'ok' if code == 0 else f'FAILED ({code})'}")
    print(f"  {'total':<16} {total:6.1f}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
