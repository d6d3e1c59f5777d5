"""What a suite does where a component it needs (a built binary, root, a framework) is not
here: it skips and says why, or, with TRAINOP_REQUIRE=1 (set by CI), fails."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

SWITCH = "TRAINOP_REQUIRE"


def cannot_run(reason: str) -> NoReturn:
    """Skip the test with `reason`, or fail it where every component is required."""
    if os.environ.get(SWITCH) == "1":
        pytest.fail(f"{reason} ({SWITCH}=1: every suite's components are required)",
                    pytrace=False)
    pytest.skip(reason)
