"""Text shown on a user's terminal that someone else wrote."""

from __future__ import annotations

import re

from rich.text import Text

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but newline and tab: ESC (OSC and CSI sequences), BEL, CR, C1."""


def printable(value: object, style: str = "") -> Text:
    """Text a job's author or a pod's program controls (messages, log tails, names) as a
    terminal may show it: control characters escaped as \\xNN (an OSC 52 clipboard write, a
    window title, cursor movement that fakes output are shown, not run: kubectl's
    CVE-2021-25743), and no rich markup read into it."""
    return Text(CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value)), style=style)
