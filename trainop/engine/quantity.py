"""Kubernetes resource quantities: parse, add, format (for gang minResources)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_SUFFIX = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6),
    "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE]([+-]?[0-9]+))?([a-zA-Z]*)")
MOST_DIGITS = 64
"""Digits of a mantissa, and the size of an exponent, counted at most: the API server takes
`1e999999999` (an exponent is an int32 to it), whose exact amount would take Python
minutes and gigabytes to compute."""


def parse(value: int | float | str) -> Fraction:
    """The exact amount of a quantity; ValueError for a malformed one (whatever JSON it
    is: null, an object, a boolean, a float that is no number), or one too large (or too
    finely divided) to count."""
    if isinstance(value, bool) or not isinstance(value, int | float | str) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"not a quantity: {str(value)[:40]!r}")
    if isinstance(value, int | float):
        return Fraction(value)
    m = _QUANTITY.fullmatch(value.strip())
    if not m or m.group(3) not in _SUFFIX:
        raise ValueError(f"not a quantity: {value!r}")
    mantissa, exponent = m.group(1), m.group(2) or "0"
    if len(mantissa) > MOST_DIGITS or len(exponent) > 4 or abs(int(exponent)) > MOST_DIGITS:
        raise ValueError(f"a quantity too large to count: {value[:40]!r}")
    return Fraction(mantissa) * Fraction(10) ** int(exponent) * _SUFFIX[m.group(3)]


def fmt(amount: Fraction) -> str:
    """Whole amounts as integers, others in milli-units, rounded up ("1500m")."""
    if amount.denominator == 1:
        return str(amount.numerator)
    milli = -((-amount * 1000) // 1)
    return f"{milli}m"
