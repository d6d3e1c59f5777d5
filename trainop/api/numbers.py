"""Whole numbers read from text a job's author writes (labels, annotations, fields), read
strictly: `str.isdigit()` is true of "²", which `int()` refuses, and `int()` takes "٣",
" 3 " and "1_0", which no Kubernetes component does."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"[0-9]+")
_SIGNED = re.compile(r"[+-]?[0-9]+")


def whole_number(value: object, most: int = 2**63 - 1) -> int | None:
    """`value` as a number if it is ASCII digits only (no sign, no space) and at most
    `most`; else None."""
    if not isinstance(value, str) or _DIGITS.fullmatch(value) is None:
        return None
    if len(value.lstrip("0")) > len(str(most)):
        return None  # no int() of a thousand digits
    number = int(value)
    return number if number <= most else None


def go_int(value: object, bits: int = 64) -> int | None:
    """`value` as Go's strconv.ParseInt(value, 10, bits) reads it (an optional sign, ASCII
    digits, within `bits`), or None where Go answers an error."""
    if not isinstance(value, str) or _SIGNED.fullmatch(value) is None:
        return None
    if len(value.lstrip("+-").lstrip("0")) > len(str(2**(bits - 1))):
        return None
    number = int(value)
    return number if -2**(bits - 1) <= number < 2**(bits - 1) else None
