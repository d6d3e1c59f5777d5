"""Kubernetes resource quantities: parse, add, format (for gang minResources)."""

from __future__ import annotations

import re
from fractions import Fraction

_SUFFIX = {
    "": Fraction(1), "m": Fraction(1, 1000), "k": Fraction(10**3), "M": Fraction(10**6),
    "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse(value: int | float | str) -> Fraction:
    """The exact amount of a quantity; ValueError for a malformed one."""
    if isinstance(value, int | float):
        return Fraction(value)
    m = _QUANTITY.match(value.strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {value!r}")
    return Fraction(m.group(1)) * _SUFFIX[m.group(2)]


def fmt(amount: Fraction) -> str:
    """Whole amounts as integers, others in milli-units, rounded up ("1500m")."""
    if amount.denominator == 1:
        return str(amount.numerator)
    milli = -((-amount * 1000) // 1)
    return f"{milli}m"
