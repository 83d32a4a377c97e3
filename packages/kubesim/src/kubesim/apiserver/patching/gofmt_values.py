"""Go's ``fmt`` spelling of decoded JSON values, so error messages read as upstream's do.

Upstream decodes JSON into ``interface{}``: objects are ``map[string]interface {}``, arrays
``[]interface {}``, integers ``int64`` (the API server decodes patches preserving ints) and other
numbers ``float64``.
"""

from decimal import Decimal

from kubesim.apiserver.patching.jsontypes import Json


def go_type_name(value: Json) -> str:
    """``reflect.TypeOf(value)`` as ``%s`` prints it."""
    if value is None:
        return "%!s(<nil>)"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    return "map[string]interface {}"


def go_json_kind(value: Json) -> str:
    """The JSON kind ``encoding/json`` names in an ``UnmarshalTypeError``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def go_sprint(value: Json) -> str:
    """``fmt.Sprintf("%v", value)``: maps print with sorted keys, nil as ``<nil>``."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(item) for item in value) + "]"
    return "map[" + " ".join(f"{key}:{go_sprint(value[key])}" for key in sorted(value)) + "]"


def go_sprint_s(value: Json) -> str:
    """``fmt.Sprintf("%s", value)``: a non-string operand prints as ``%!s(type=value)``."""
    if isinstance(value, str):
        return value
    if value is None:
        return "%!s(<nil>)"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint_s(item) for item in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint_s(value[k])}" for k in sorted(value)) + "]"
    return f"%!s({go_type_name(value)}={go_sprint(value)})"


def _go_float(number: float) -> str:
    # %v of a float64 is %g with the shortest round-trip digits, switching to an
    # exponent when it is below -4 or at least 6 (fmt's rule for the shortest form).
    if number == 0:
        return "-0" if str(number).startswith("-") else "0"
    sign, digit_tuple, exponent = Decimal(repr(number)).as_tuple()
    digits = "".join(str(d) for d in digit_tuple)
    stripped = digits.rstrip("0")
    assert isinstance(exponent, int)
    exponent += len(digits) - len(stripped)
    digits = stripped
    point = len(digits) + exponent
    sign_text = "-" if sign else ""
    scientific = point - 1
    if scientific < -4 or scientific >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exp_sign = "+" if scientific >= 0 else "-"
        return f"{sign_text}{mantissa}e{exp_sign}{abs(scientific):02d}"
    if point <= 0:
        return f"{sign_text}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign_text}{digits}{'0' * (point - len(digits))}"
    return f"{sign_text}{digits[:point]}.{digits[point:]}"
