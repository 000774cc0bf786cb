"""Helpers shared by the unit and integration tests (tests/README.md)."""

from __future__ import annotations

import os


def examples(n: int) -> int:
    """How many cases a property test runs: `n` in the default run, scaled by
    COLLCHECK_TEST_EXAMPLES (3 when the slow suite's command selects the property tests again)."""
    return max(1, round(n * float(os.environ.get("COLLCHECK_TEST_EXAMPLES", "1"))))
