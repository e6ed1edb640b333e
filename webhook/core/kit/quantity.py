"""Kubernetes resource quantities (`12Gi`, `11G`, `500m`, `1e3`) as exact numbers.

What counts as a quantity is what the apiserver can hold, read from
k8s.io/apimachinery/pkg/api/resource (quantity.go `ParseQuantity`, suffix.go
`interpret`):

- the grammar `<signedNumber><suffix>`, ASCII digits only: `12GB` and `12 Gi` are refused
  there too;
- an exponent (`1e3`) is read as an int64 and then kept as an int32 (`int32(parsed)`), so
  past +-2^31-1 it wraps and the value is not the one written: refused here;
- a value is kept only down to nano, a finer non-zero value rounded away from zero
  ("0.9n" becomes "1n"): done here too, which keeps every denominator at most 10^9;
- a binarySI value is capped silently at 2^63-1, and the int64 accessors that the
  scheduler, the kubelet and quota read (`Value`, `MilliValue`) overflow past it: a
  quantity beyond 2^63-1 in magnitude means nothing any consumer can count, and is
  refused here as out of range.

So `1e99999999` is an error that costs as little as `12GB`, never `10 ** 99999999`.
Parsing is linear in the length of the text, and a text longer than MAX_LENGTH (no
quantity within range needs half of it) is refused before any work.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from webhook.core.kit.text import shown
from webhook.errors import QuantityError

MAX_VALUE = 2**63 - 1  # the apiserver's maxAllowed, and every int64 accessor's limit
MAX_LENGTH = 64  # 19 integer digits, 9 fractional, a sign and an exponent fit in half
_MAX_EXPONENT = 2**31 - 1  # the exponent is an int32 in the apiserver
_NANO = 10**9
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of two
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Possessive quantifiers: no backtracking, so a failing match is linear too.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*+)(?:\.(?P<frac>[0-9]*+))?"
    r"(?P<suffix>[eE][+-]?[0-9]++|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?",
    re.ASCII,
)
_CACHED_LENGTH = 24  # longer spellings are rare: parsed each time, never kept
MIB = 2**20


def parse_quantity(value: object) -> Fraction:
    """The value of a quantity given as a string or a YAML/JSON number, nano-exact."""
    if type(value) is str:
        if len(value) <= _CACHED_LENGTH:
            return _cached(value)  # pod after pod asks for "1" or 8: parse each spelling once
        return _parse_text(value)
    if type(value) is int and -MAX_VALUE <= value <= MAX_VALUE:
        return _cached(value)
    return _parse(value)


@lru_cache(maxsize=4096)
def _cached(value: str | int) -> Fraction:
    return _parse(value)


def _parse(value: object) -> Fraction:
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is a boolean, not a quantity")
    if isinstance(value, int):
        if not -MAX_VALUE <= value <= MAX_VALUE:
            raise QuantityError(f"{shown(value)} is out of range: beyond 2^63-1")
        return Fraction(value)
    if isinstance(value, float):
        return _parse_text(repr(value))  # 0.1 is the decimal 0.1, nan and inf are errors
    if not isinstance(value, str):
        raise QuantityError(f"{shown(value)} is not a quantity")
    return _parse_text(value)


def _parse_text(text: str) -> Fraction:
    if len(text) > MAX_LENGTH:
        raise QuantityError(f"{shown(text)!r} is longer than {MAX_LENGTH} characters")
    match = _QUANTITY.fullmatch(text.strip())
    if match is None or not (match["whole"] or match["frac"]):
        raise QuantityError(f"{text!r} is not a Kubernetes quantity")
    frac = match["frac"] or ""
    digits = (match["whole"] + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        magnitude = Fraction(int(digits) << _BINARY[suffix], 10 ** len(frac))
    else:
        exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"{text!r} has an exponent beyond +-2^31-1")
        magnitude = _decimal(digits, exponent - len(frac), text)
    if magnitude > MAX_VALUE:
        raise QuantityError(f"{text!r} is out of range: beyond 2^63-1")
    nanos = -(-magnitude.numerator * _NANO // magnitude.denominator)  # away from zero
    return Fraction(-nanos if match["sign"] == "-" else nanos, _NANO)


def _decimal(digits: str, scale: int, text: str) -> Fraction:
    """int(digits) * 10**scale, without ever raising 10 to a large power."""
    if len(digits) + scale > 19:  # at least 10^19, past 2^63-1 (about 9.2 * 10^18)
        raise QuantityError(f"{text!r} is out of range: beyond 2^63-1")
    if len(digits) + scale < -9:  # below 10^-10: the apiserver rounds it up to 1n
        return Fraction(1, _NANO)
    if scale >= 0:
        return Fraction(int(digits) * 10**scale)
    return Fraction(int(digits), 10**-scale)


def to_mib(value: object) -> Fraction:
    """A byte quantity in MiB, exact."""
    if type(value) is str and len(value) <= _CACHED_LENGTH:
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
