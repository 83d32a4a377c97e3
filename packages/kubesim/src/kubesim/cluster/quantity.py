"""`resource.Quantity` as k8s.io/apimachinery/pkg/api/resource/quantity.go parses and prints it.

A quantity is kept as an exact count of nano-units plus the format its suffix
chose (DecimalSI, BinarySI or DecimalExponent). Parsing follows
`parseQuantityString` and `ParseQuantity`: values are rounded up (away from
zero) to the nearest nano, BinarySI is capped at 2^63-1 and falls back to
DecimalSI below one. `str()` is `Quantity.String()`: the canonical form
(`CanonicalizeBytes`), which is what the kubelet and scheduler print in
messages ("300Mi", "1500m", "1k").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

NANO = 10**9
MAX_INT64 = 2**63 - 1

ERR_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
ERR_SUFFIX = "unable to parse quantity's suffix"

_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXPONENT = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {0: "", **{v: k for k, v in _BINARY_SUFFIXES.items()}}
_SUFFIX_CHARS = set("eEinumkKMGTP")
_DIGITS = set("0123456789")
_MAX_EXPONENT = 1000


class QuantityError(ValueError):
    """A string that is not a quantity; the message is upstream's error text."""


@dataclass(frozen=True, slots=True, order=False)
class Quantity:
    nanos: int
    format: Format = "DecimalSI"

    # construction

    @classmethod
    def parse(cls, text: str) -> Quantity:
        return parse_quantity(text)

    @classmethod
    def from_int(cls, value: int, fmt: Format = "DecimalSI") -> Quantity:
        """`resource.NewQuantity(value, format)`."""
        return cls(value * NANO, fmt)

    @classmethod
    def from_milli(cls, milli: int, fmt: Format = "DecimalSI") -> Quantity:
        """`resource.NewMilliQuantity(milli, format)`."""
        return cls(milli * (NANO // 1000), fmt)

    # reading

    def value(self) -> int:
        """`Value()`: the integer value, rounded up away from zero."""
        return _div_away_from_zero(self.nanos, NANO)

    def milli_value(self) -> int:
        """`MilliValue()`: thousandths, rounded up away from zero."""
        return _div_away_from_zero(self.nanos, NANO // 1000)

    def is_zero(self) -> bool:
        return self.nanos == 0

    # arithmetic keeps the left operand's format, as Quantity.Add/Sub do

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos + other.nanos, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos - other.nanos, self.format)

    def cmp(self, other: Quantity) -> int:
        return (self.nanos > other.nanos) - (self.nanos < other.nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    def __str__(self) -> str:
        return canonical(self)


def _div_away_from_zero(numerator: int, denominator: int) -> int:
    quotient, remainder = divmod(abs(numerator), denominator)
    if remainder:
        quotient += 1
    return quotient if numerator >= 0 else -quotient


def _split(text: str) -> tuple[bool, str, str, str]:
    """`parseQuantityString`: (positive, numerator, denominator, suffix)."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(ERR_FORMAT)
    return positive, num, denom, text[suffix_start:end]


def _interpret(suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) for a suffix, as `suffixHandler.interpret`."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:]
        body = exponent[1:] if exponent[0] in "+-" else exponent
        # Go parses an int64; exponents this far out only ever come from fuzzing.
        if body and set(body) <= _DIGITS and abs(int(exponent)) <= _MAX_EXPONENT:
            return 10, int(exponent), "DecimalExponent"
    raise QuantityError(ERR_SUFFIX)


def parse_quantity(text: str) -> Quantity:
    """`resource.ParseQuantity`; raises QuantityError with upstream's message."""
    if not text:
        raise QuantityError(ERR_FORMAT)
    positive, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)
    # exact value = (num.denom) * base**exponent, as a fraction over 10**len(denom)
    numerator = int(num + denom)
    denominator = 10 ** len(denom)
    if base == 10:
        if exponent >= 0:
            numerator *= 10**exponent
        else:
            denominator *= 10**-exponent
    else:
        numerator *= 2**exponent
    nanos = _div_away_from_zero(numerator * NANO, denominator)
    if fmt == "BinarySI" and nanos > MAX_INT64 * NANO:
        nanos = MAX_INT64 * NANO
    if fmt == "BinarySI" and 0 < nanos < NANO:
        fmt = "DecimalSI"
    return Quantity(nanos if positive else -nanos, fmt)


def _remove_factors(value: int, base: int) -> tuple[int, int]:
    """`removeInt64Factors`: strip `base` factors while the magnitude stays >= base."""
    negative, result, times = value < 0, abs(value), 0
    while result >= base and result % base == 0:
        result //= base
        times += 1
    return (-result if negative else result), times


def canonical(q: Quantity) -> str:
    """`Quantity.String()` / `CanonicalizeBytes`."""
    if q.nanos == 0:
        return "0"
    fmt = q.format
    if fmt == "BinarySI" and (-1024 * NANO < q.nanos < 1024 * NANO or q.nanos % NANO):
        fmt = "DecimalSI"  # avoid rounding: small or fractional binary values print as decimal
    if fmt == "BinarySI":
        amount, times = _remove_factors(q.nanos // NANO, 1024)
        return f"{amount}{_BINARY_BY_EXPONENT[times * 10]}"
    amount, times = _remove_factors(q.nanos, 10)
    exponent = times - 9
    if exponent % 3 == 1:
        amount, exponent = amount * 10, exponent - 1
    elif exponent % 3 == 2:
        amount, exponent = amount * 100, exponent - 2
    if fmt == "DecimalExponent":
        return f"{amount}" if exponent == 0 else f"{amount}e{exponent}"
    if exponent > 18:
        # Upstream has no suffix past exa and prints the bare mantissa; keep the value exact.
        amount, exponent = amount * 10 ** (exponent - 18), 18
    return f"{amount}{_DECIMAL_BY_EXPONENT[exponent]}"


def parse_or_zero(text: object) -> Quantity:
    """A quantity from a resource list value; absent or malformed counts as zero."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        return Quantity(0)
    try:
        return parse_quantity(text)
    except QuantityError:
        return Quantity(0)
