"""Run `make <step>` for each step and print the minutes each took (CI keeps no files: the table
is the record).

    python .ci/steps.py lint unit functional-ci           # in turn
    python .ci/steps.py "unit functional-ci" "lint cluster-ci"   # two lanes at once

An argument with spaces is a lane: its steps run in turn, and the lanes run at the same time.
Every line a step prints is printed as it comes (with more than one lane, prefixed with the
step's name: `[cluster-ci] ...`) and kept in reports/steps/<step>.log, written afresh. After a step fails no
lane starts another step; the steps running then finish. A lane that breaks (make cannot be
started, say) counts as a failed step. A CI log keeps only its tail, so the last lines printed
are each failed step's pytest verdicts (`FAILED ...`, `ERROR ...`) and make errors.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

LOGS = Path("reports/steps")


class Lanes:
    def __init__(self, prefixed: bool) -> None:
        self.took: list[tuple[str, float, str]] = []
        self.failed = False
        self.prefixed = prefixed
        self.lock = threading.Lock()

    def run_lane(self, steps: list[str]) -> None:
        for step in steps:
            with self.lock:
                if self.failed:
                    return
            began = time.monotonic()
            try:
                status = self._run_step(step)
                result = "ok" if status == 0 else f"FAILED ({status})"
            except BaseException as exc:  # the lane broke: a failed step, never a pass
                status, result = 1, f"FAILED ({type(exc).__name__}: {exc})"
            with self.lock:
                self.took.append((step, (time.monotonic() - began) / 60, result))
                self.failed = self.failed or status != 0

    def _run_step(self, step: str) -> int:
        """The step's output printed as it comes (prefixed with its name where lanes run at
        once) and written afresh to its log (an older run's log is overwritten)."""
        command = ["make", "--no-print-directory", step]
        prefix = f"[{step}] ".encode() if self.prefixed else b""
        LOGS.mkdir(parents=True, exist_ok=True)
        with (LOGS / f"{step}.log").open("wb") as log:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                with self.lock:
                    sys.stdout.buffer.write(prefix + line)
                    sys.stdout.flush()
            return process.wait()


VERDICTS = ("FAILED ", "ERROR ", "make[", "make: ***", "Timeout", "error:")


def verdicts(log: str, most: int = 40) -> list[str]:
    """The lines of a step's log that say what failed: pytest's short summary lines, make's
    errors, timeouts (the last `most` of them)."""
    lines = [line.strip() for line in log.splitlines()]
    return [line for line in lines if line.startswith(VERDICTS) or " FAILED" in line][-most:]


def main(arguments: list[str]) -> int:
    lanes = [argument.split() for argument in arguments]
    if all(len(lane) == 1 for lane in lanes):
        lanes = [[step for lane in lanes for step in lane]]
    runner = Lanes(prefixed=len(lanes) > 1)
    began = time.monotonic()
    threads = [threading.Thread(target=runner.run_lane, args=(lane,)) for lane in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = (time.monotonic() - began) / 60
    print("\nper-step minutes:" + (f" ({len(lanes)} lanes at once)" if len(lanes) > 1 else ""))
    for step, minutes, result in runner.took:
        print(f"  {step:<16} {minutes:6.1f}  {result}")
    print(f"  {'wall clock':<16} {wall:6.1f}")
    for step, _, result in runner.took:
        if result != "ok" and (LOGS / f"{step}.log").exists():
            print(f"\n{step} failed; its verdicts:")
            for line in verdicts((LOGS / f"{step}.log").read_text(errors="replace")):
                print(f"  {line}")
    return 1 if runner.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
