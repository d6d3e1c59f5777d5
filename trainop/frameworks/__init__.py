"""One plugin per framework: adding a framework is adding its module to this package.

Every module here is imported with the package; a framework's module declares its kind
(registry.declare) as it is imported, so no table names the frameworks.
"""

from __future__ import annotations

import importlib
import pkgutil

from trainop.frameworks.registry import (
    FRAMEWORKS,
    declare,
    declare_persona,
    framework_for,
    framework_of,
    withdraw,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["FRAMEWORKS", "declare", "declare_persona", "framework_for", "framework_of", "withdraw"]
