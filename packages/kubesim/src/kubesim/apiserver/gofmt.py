"""Go formatting rules that leak into Kubernetes API error messages.

The API server's messages are built with Go's fmt verbs; clients and tests
compare them as text, so kubesim reproduces the few that matter:
``%q`` on a string (strconv.Quote), ``%#v`` on a ``[]string`` and the text of
an ``errors.Aggregate`` (k8s.io/apimachinery/pkg/util/errors).
"""

from collections.abc import Iterable, Sequence

_SHORT_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string: double-quoted, printable runes kept as they are.

    Python's ``str.isprintable`` and Go's ``unicode.IsPrint`` agree: letters,
    marks, numbers, punctuation, symbols and the ASCII space.
    """
    out = ['"']
    for char in text:
        escaped = _SHORT_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char.isprintable():
            out.append(char)
        else:
            code = ord(char)
            if code < 0x20 or code == 0x7F:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_string_slice(values: Sequence[str] | None) -> str:
    """Go's ``%#v`` of a ``[]string``; ``None`` stands for a nil slice."""
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(value) for value in values) + "}"


def go_aggregate(messages: Iterable[str]) -> str:
    """The text of ``errors.NewAggregate``: duplicates dropped, brackets only for several."""
    unique = list(dict.fromkeys(messages))
    if not unique:
        return ""
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


_SUBSECOND_UNITS = ((1_000_000, "ms"), (1_000, "µs"), (1, "ns"))


def _trimmed(whole: int, fraction: int, digits: int) -> str:
    if fraction == 0:
        return str(whole)
    return f"{whole}.{fraction:0{digits}d}".rstrip("0")


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()``: "5s", "50ms", "1m0s", "1h2m3.5s", "0s"."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for size, unit in _SUBSECOND_UNITS:
            if ns >= size:
                digits = len(str(size)) - 1
                return f"{sign}{_trimmed(ns // size, ns % size, digits)}{unit}"
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _trimmed(rest // 1_000_000_000, rest % 1_000_000_000, 9) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text
