"""Kubernetes resource quantities (`12Gi`, `11G`, `500m`, `1e3`) as exact numbers."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache

from webhook.errors import QuantityError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# The apiserver's grammar: a signed decimal number, then a binary or decimal suffix or an
# exponent. Anything else (`12GB`, `12 Gi`, `1.5.2`) is rejected by the apiserver too.
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)
MIB = 2**20


def parse_quantity(value: object) -> Fraction:
    """The exact value of a quantity given as a string or a YAML number."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        return _cached(value)  # pod after pod asks for "1" or 8: parse each spelling once
    return _parse(value)


@lru_cache(maxsize=4096)
def _cached(value: str | int) -> Fraction:
    return _parse(value)


def _parse(value: object) -> Fraction:
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is a boolean, not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity")
    try:
        number = Fraction(Decimal(match["num"]))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f"{value!r} is not a Kubernetes quantity") from exc
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def to_mib(value: object) -> Fraction:
    """A byte quantity in MiB, exact."""
    if isinstance(value, str):
        return _mib_of(value)  # the same few peak-memory labels, pod after pod
    return parse_quantity(value) / MIB


@lru_cache(maxsize=1024)
def _mib_of(value: str) -> Fraction:
    return parse_quantity(value) / MIB


def format_mib(mib: Fraction | int) -> str:
    """`12 GiB (12288 MiB)` for humans; MiB rounded up so a reader never sees a fit."""
    whole = -(-Fraction(mib).numerator // Fraction(mib).denominator)
    gib = Fraction(whole, 1024)
    gib_text = f"{float(gib):.2f}".rstrip("0").rstrip(".")
    return f"{gib_text} GiB ({whole} MiB)"


def quantity_or_none(value: object) -> Fraction | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None
