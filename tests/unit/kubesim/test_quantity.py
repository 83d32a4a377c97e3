"""resource.Quantity parsing and printing, against apimachinery's quantity_test.go cases."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kubesim.cluster.quantity import (
    ERR_FORMAT,
    ERR_SUFFIX,
    NANO,
    Quantity,
    QuantityError,
    canonical,
    parse_or_zero,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "printed", "fmt"),
    [
        ("0", "0", "DecimalSI"),
        ("1", "1", "DecimalSI"),
        ("1000", "1k", "DecimalSI"),
        ("1500", "1500", "DecimalSI"),
        ("1.5", "1500m", "DecimalSI"),
        ("1500m", "1500m", "DecimalSI"),
        ("2000m", "2", "DecimalSI"),
        ("0.5", "500m", "DecimalSI"),
        (".5", "500m", "DecimalSI"),
        ("5.", "5", "DecimalSI"),
        ("100M", "100M", "DecimalSI"),
        ("1E", "1E", "DecimalSI"),
        ("1n", "1n", "DecimalSI"),
        ("0.1n", "1n", "DecimalSI"),  # rounded up to the smallest unit
        ("1.5n", "2n", "DecimalSI"),
        ("-1", "-1", "DecimalSI"),
        ("100Mi", "100Mi", "BinarySI"),
        ("1024Mi", "1Gi", "BinarySI"),
        ("0.5Gi", "512Mi", "BinarySI"),
        ("-1.5Gi", "-1536Mi", "BinarySI"),
        ("1.1Ki", "1126400m", "BinarySI"),  # not an integer: printed as DecimalSI
        ("0.5Ki", "512", "BinarySI"),  # below 1024: printed as DecimalSI
        ("0.5Mi", "512Ki", "BinarySI"),
        ("8Ei", "9223372036854775807", "BinarySI"),  # capped at 2^63-1
        ("1e3", "1e3", "DecimalExponent"),
        ("1E3", "1e3", "DecimalExponent"),
        ("12e6", "12e6", "DecimalExponent"),
        ("1e-3", "1e-3", "DecimalExponent"),
        ("1000e0", "1e3", "DecimalExponent"),
        ("+", "0", "DecimalSI"),  # upstream's parser reads a bare sign as zero
        ("00Ki", "0", "BinarySI"),
    ],
)
def test_parse_and_print_like_upstream(text: str, printed: str, fmt: str) -> None:
    q = parse_quantity(text)
    assert str(q) == printed
    assert q.format == fmt


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", ERR_FORMAT),
        ("abc", ERR_FORMAT),
        ("1.5.5", ERR_FORMAT),
        ("1 Mi", ERR_FORMAT),
        ("1Qi", ERR_FORMAT),
        ("1e", ERR_SUFFIX),
        ("1e+", ERR_SUFFIX),
        ("--1", ERR_SUFFIX),
        ("1ki", ERR_SUFFIX),
        ("1MM", ERR_SUFFIX),
    ],
)
def test_rejects_what_upstream_rejects(text: str, error: str) -> None:
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text)
    assert str(raised.value) == error


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [("100m", 1, 100), ("1.5", 2, 1500), ("2", 2, 2000), ("1Ki", 1024, 1024000),
     ("0.1m", 1, 1), ("-1.5", -2, -1500), ("128974848", 128974848, 128974848000)],
)  # fmt: skip
def test_value_and_milli_value_round_up(text: str, value: int, milli: int) -> None:
    q = parse_quantity(text)
    assert q.value() == value
    assert q.milli_value() == milli


def test_new_quantity_prints_like_the_summary_api() -> None:
    assert str(Quantity.from_int(91226112, "BinarySI")) == "87Mi"
    assert str(Quantity.from_int(314572800, "BinarySI")) == "300Mi"
    assert str(Quantity.from_int(314572801, "BinarySI")) == "314572801"
    assert str(Quantity.from_int(87, "DecimalSI")) == "87"
    assert str(Quantity.from_milli(250)) == "250m"


def test_parse_or_zero_is_lenient() -> None:
    assert parse_or_zero(None) == Quantity(0)
    assert parse_or_zero("garbage") == Quantity(0)
    assert parse_or_zero(2).value() == 2


# properties

_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "e3", "e-2"]

quantity_texts = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{'.' + frac if frac else ''}{suffix}",
    st.sampled_from(["", "-", "+"]),
    st.integers(min_value=0, max_value=10**12).map(str),
    st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=6)),
    st.sampled_from(_SUFFIXES),
)


@given(quantity_texts)
def test_printing_is_a_fixed_point(text: str) -> None:
    q = parse_quantity(text)
    again = parse_quantity(str(q))
    assert again.nanos == q.nanos
    assert str(again) == str(q)


@given(quantity_texts)
def test_value_is_exact_up_to_a_nano_rounded_away_from_zero(text: str) -> None:
    q = parse_quantity(text)
    exact = _exact(text)
    assume(not (q.format == "BinarySI" and abs(exact) > 2**63 - 1))  # capped, tested above
    assert abs(q.nanos - exact * NANO) < 1
    assert abs(q.nanos) >= abs(exact * NANO)


def _exact(text: str) -> Fraction:
    factors: dict[str, Fraction] = {
        "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30),
        "Ti": Fraction(2**40), "e3": Fraction(10**3), "e-2": Fraction(1, 100),
        "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
        "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
        "P": Fraction(10**15),
    }  # fmt: skip
    for suffix in sorted(factors, key=len, reverse=True):
        if text.endswith(suffix):
            return Fraction(text[: -len(suffix)] or "0") * factors[suffix]
    return Fraction(text)


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_binary_integers_print_with_the_largest_exact_suffix(value: int) -> None:
    printed = canonical(Quantity.from_int(value, "BinarySI"))
    assert parse_quantity(printed).value() == value
    if abs(value) >= 1024 and value % 1024 == 0:
        assert printed.endswith("i")


@given(st.integers(min_value=-(10**15), max_value=10**15), st.integers(-(10**15), 10**15))
def test_ordering_follows_the_numbers(a: int, b: int) -> None:
    qa, qb = Quantity.from_milli(a), Quantity.from_milli(b)
    assert qa.cmp(qb) == (a > b) - (a < b)
    assert (qa + qb).milli_value() == a + b
