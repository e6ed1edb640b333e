"""Kubernetes quantities as exact numbers, and MiB for messages."""

from __future__ import annotations

from fractions import Fraction

import pytest

from webhook.core.quantity import format_mib, parse_quantity, quantity_or_none, to_mib
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
    ],
)
def test_rejects(text: object, error: str) -> None:
    with pytest.raises(QuantityError, match=f"^{error}$"):
        parse_quantity(text)


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
