"""Unit tests of the pure schema-evolution core: make the repository root importable."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Property tests check what is decided, never how fast: no per-example deadline (Hypothesis's
# 200 ms failed `test_every_plan_is_consistent_and_renders` once on 2026-11-29, on a 2-core
# machine busy with a cluster beside the unit suite; it passed alone in 33 s).
from hypothesis import settings  # noqa: E402

settings.register_profile("no_deadline", deadline=None)
settings.load_profile("no_deadline")
