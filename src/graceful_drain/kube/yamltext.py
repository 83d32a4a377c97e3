"""A JSON document as block-style YAML, the way `kubectl get -o yaml` prints, without a YAML
library (the plugin carries no PyYAML).

Only what JSON holds: mappings with string keys, lists, strings, numbers, booleans and null.
A string is written plain only when every YAML 1.1 and 1.2 reader takes it back as that
string (letters first, then letters, digits and `_./-`, and not a word such as `yes` or
`null`); any other string is written double-quoted with JSON's escapes, which YAML's
double-quoted style shares. Floats always carry a dot and a signed exponent, so YAML 1.1
readers (PyYAML) read them as floats too.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")
# Words YAML 1.1 or 1.2 reads as booleans or null in any case.
_RESERVED = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null", "nan", "inf"})


def _printable(code: int) -> bool:
    """YAML's c-printable, less what a YAML 1.1 reader takes for a line break (NEL, LS,
    PS) and the byte-order mark."""
    if code in (0x2028, 0x2029, 0xFEFF):
        return False
    return (
        0x20 <= code <= 0x7E or 0xA0 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF
    )  # fmt: skip


def _escaped(char: str) -> str:
    code = ord(char)
    if _printable(code):
        return char
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else (
        f"\\U{code:08x}")  # fmt: skip


def _string(text: str) -> str:
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    # JSON escapes the C0 controls, quotes and backslashes; YAML escapes what else it cannot
    # hold raw (DEL, C1 controls, non-characters).
    return "".join(_escaped(char) for char in json.dumps(text, ensure_ascii=False))


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent and exponent[0] not in "+-":
        exponent = "+" + exponent
    return f"{mantissa}e{exponent}" if exponent else mantissa


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _is_collection(value: object) -> bool:
    return isinstance(value, Mapping) or (
        isinstance(value, Sequence) and not isinstance(value, str)
    )


def _lines(value: object, indent: str) -> list[str]:
    """The lines of a non-empty collection, each starting with `indent`."""
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"a mapping key is not a string: {key!r}")
            head = f"{indent}{_string(key)}:"
            if _is_collection(item) and item:
                if isinstance(item, Mapping):
                    lines += [head, *_lines(item, indent + "  ")]
                else:  # a list under a key, at the key's indentation (kubectl's style)
                    lines += [head, *_lines(item, indent)]
            else:
                lines.append(f"{head} {_inline(item)}")
        return lines
    assert isinstance(value, Sequence)
    for item in value:
        if _is_collection(item) and item:
            first, *rest = _lines(item, indent + "  ")
            lines += [f"{indent}- {first[len(indent) + 2 :]}", *rest]
        else:
            lines.append(f"{indent}- {_inline(item)}")
    return lines


def _inline(value: object) -> str:
    """A scalar, or an empty collection."""
    if isinstance(value, Mapping):
        return "{}"
    if _is_collection(value):
        return "[]"
    return _scalar(value)


def dump(document: object) -> str:
    """`document` as a YAML document, ending with a newline."""
    if _is_collection(document) and document:
        return "\n".join(_lines(document, "")) + "\n"
    return _inline(document) + "\n"
