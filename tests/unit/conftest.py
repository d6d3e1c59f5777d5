"""What unit tests of more than one module share."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.supervisor import NoGo, built
from tests.require import cannot_run


@pytest.fixture(scope="session")
def supervisor() -> Path:
    """The rank supervisor built from this checkout (supervisor/)."""
    try:
        return built()
    except NoGo as err:
        cannot_run(str(err))
