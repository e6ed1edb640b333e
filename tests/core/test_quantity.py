"""Kubernetes quantities as exact numbers, and MiB for messages; bounded for any input."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from webhook.core.kit.quantity import (
    MAX_VALUE,
    format_mib,
    parse_quantity,
    quantity_or_none,
    to_mib,
)
from webhook.errors import QuantityError


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        (1, 1),
        ("0", 0),
        ("12Gi", 12 * 2**30),
        ("12000Mi", 12000 * 2**20),
        ("11G", 11 * 10**9),
        ("1.5Gi", 3 * 2**29),
        ("500m", Fraction(1, 2)),
        ("100u", Fraction(1, 10**4)),
        ("3n", Fraction(3, 10**9)),
        ("1k", 1000),
        ("1Ki", 1024),
        ("2Ti", 2 * 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("1E", 10**18),
        ("1e3", 1000),
        ("1E3", 1000),
        ("5e-1", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.", 1),
        ("+2", 2),
        ("-1", -1),
        ("  4Gi ", 4 * 2**30),
        (1.5, Fraction(3, 2)),
        (0.1, Fraction(1, 10)),  # exact decimal, not the binary float
        # The apiserver keeps values down to nano, rounding a finer one away from zero.
        ("0.9n", Fraction(1, 10**9)),
        ("1.0000000001", 1 + Fraction(1, 10**9)),
        ("-0.5n", Fraction(-1, 10**9)),
        ("1e-99999999", Fraction(1, 10**9)),  # tiny, not 10**-99999999
        (1e-300, Fraction(1, 10**9)),
        # The edges of the range: 2^63-1 in any spelling.
        ("9223372036854775807", MAX_VALUE),
        ("-9223372036854775807", -MAX_VALUE),
        ("9223372036854775807000m", MAX_VALUE),
        ("7Ei", 7 * 2**60),
        ("9.223372036854775807E", MAX_VALUE),
        (MAX_VALUE, MAX_VALUE),
        ("0e99999999", 0),
        ("000000000000000000000000000000000000000001", 1),
    ],
)
def test_parses(text: object, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("12GB", "'12GB' is not a Kubernetes quantity"),
        ("12 Gi", "'12 Gi' is not a Kubernetes quantity"),
        ("1.5.2", "'1.5.2' is not a Kubernetes quantity"),
        ("Gi", "'Gi' is not a Kubernetes quantity"),
        ("", "'' is not a Kubernetes quantity"),
        ("12gi", "'12gi' is not a Kubernetes quantity"),
        ("0x10", "'0x10' is not a Kubernetes quantity"),
        (True, "True is a boolean, not a quantity"),
        (None, "None is not a quantity"),
        ([1], r"\[1\] is not a quantity"),
        ({"a": [1, 2, 3, 4]}, r"\{'a': \[1, 2, 3, \.\.\.\]\} is not a quantity"),
        # Past the apiserver's range (2^63-1) or its int32 exponent: refused, not computed.
        ("1e99999999", "'1e99999999' is out of range: beyond 2\\^63-1"),
        ("1E19", "'1E19' is out of range: beyond 2\\^63-1"),
        ("9223372036854775808", "'9223372036854775808' is out of range: beyond 2\\^63-1"),
        ("8Ei", "'8Ei' is out of range: beyond 2\\^63-1"),
        ("1e2147483648", "'1e2147483648' has an exponent beyond \\+-2\\^31-1"),
        (2**63, "9223372036854775808 is out of range: beyond 2\\^63-1"),
        (10**4000, "<an integer of 13288 bits> is out of range: beyond 2\\^63-1"),
        (1e300, "'1e\\+300' is out of range: beyond 2\\^63-1"),
        (float("nan"), "'nan' is not a Kubernetes quantity"),
        (float("inf"), "'inf' is not a Kubernetes quantity"),
        # ASCII digits only, as the apiserver's scanner reads them.
        ("\u0663Gi", "'\u0663Gi' is not a Kubernetes quantity"),
        ("\u00b2", "'\u00b2' is not a Kubernetes quantity"),
        ("1" * 65, "'" + "1" * 39 + "…' is longer than 64 characters"),
    ],
)
def test_rejects(text: object, error: str) -> None:
    with pytest.raises(QuantityError, match=f"^{error}$"):
        parse_quantity(text)


@pytest.mark.parametrize(
    "text",
    [
        "1e99999999",
        "1e-99999999",
        "9" * 64,
        "1" * 3_000_000,
        "1" * 3_000_000 + "x",  # a failing match that could backtrack
        "1." + "1" * 3_000_000 + "x",
        "." * 3_000_000,
    ],
)
def test_any_text_costs_microseconds(text: str) -> None:
    started = time.perf_counter()
    for _ in range(100):
        quantity_or_none(text)
    assert time.perf_counter() - started < 0.1  # about 1 us each; 10**99999999 took minutes


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("one", None), (None, None)])
def test_quantity_or_none(text: object, value: int | None) -> None:
    assert quantity_or_none(text) == value


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("12Gi", 12288),
        ("9856Mi", 9856),
        ("11G", Fraction(11 * 10**9, 2**20)),
        ("1Ki", Fraction(1, 1024)),
    ],
)
def test_to_mib(text: str, mib: Fraction | int) -> None:
    assert to_mib(text) == mib


@pytest.mark.parametrize(
    ("mib", "text"),
    [
        (12288, "12 GiB (12288 MiB)"),
        (9856, "9.62 GiB (9856 MiB)"),  # 9.625: two decimals, half to even
        (Fraction(11 * 10**9, 2**20), "10.25 GiB (10491 MiB)"),  # 10490.4 MiB, rounded up
        (Fraction(1, 3), "0 GiB (1 MiB)"),
        (1536, "1.5 GiB (1536 MiB)"),
    ],
)
def test_format_mib_rounds_up(mib: Fraction | int, text: str) -> None:
    assert format_mib(mib) == text
