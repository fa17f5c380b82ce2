"""Run `make <step>` for each step and print the minutes each took (CI keeps no files: the table
is the record).

    python .ci/steps.py lint unit functional-ci           # in turn
    python .ci/steps.py "unit functional-ci" "lint cluster-ci"   # two lanes at once

An argument with spaces is a lane: its steps run in turn, and the lanes run at the same time
(Spark's small jobs wait more than they compute, so a second lane uses cores the first leaves
idle). A step's output goes to reports/steps/<step>.log and is printed whole when the step ends,
so lanes do not interleave their lines. After a step fails no lane starts another step; the
steps running then finish.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

LOGS = Path("reports/steps")


class Lanes:
    def __init__(self) -> None:
        self.took: list[tuple[str, float, int]] = []
        self.failed = False
        self.lock = threading.Lock()

    def run_lane(self, steps: list[str], echo_live: bool) -> None:
        for step in steps:
            with self.lock:
                if self.failed:
                    return
            began = time.monotonic()
            status = self._run_step(step, echo_live)
            with self.lock:
                self.took.append((step, (time.monotonic() - began) / 60, status))
                self.failed = self.failed or status != 0

    def _run_step(self, step: str, echo_live: bool) -> int:
        command = ["make", "--no-print-directory", step]
        if echo_live:
            return subprocess.call(command)
        LOGS.mkdir(parents=True, exist_ok=True)
        log = LOGS / f"{step}.log"
        with log.open("wb") as out:
            status = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT)
        with self.lock:
            print(f"\n===== {step} ({'ok' if status == 0 else f'FAILED ({status})'}) =====")
            sys.stdout.flush()
            sys.stdout.buffer.write(log.read_bytes())
            sys.stdout.flush()
        return status


def main(arguments: list[str]) -> int:
    lanes = [argument.split() for argument in arguments]
    if all(len(lane) == 1 for lane in lanes):
        lanes = [[step for lane in lanes for step in lane]]
    runner = Lanes()
    began = time.monotonic()
    live = len(lanes) == 1
    threads = [threading.Thread(target=runner.run_lane, args=(lane, live)) for lane in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = (time.monotonic() - began) / 60
    print("\nper-step minutes:" + ("" if live else f" ({len(lanes)} lanes at once)"))
    for step, minutes, code in runner.took:
        print(f"  {step:<16} {minutes:6.1f}  {'ok' if code == 0 else f'FAILED ({code})'}")
    label = "total" if live else "wall clock"
    print(f"  {label:<16} {wall:6.1f}")
    return 1 if runner.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
