"""Label key and value validation (k8s.io/apimachinery/pkg/api/validate/content).

The functions return upstream's error strings; :func:`field_invalid` wraps one
the way a ``field.Invalid`` error prints.
"""

import re

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_LABEL_KEY_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_LABEL_MAX_BYTES = 63
_DNS1123_SUBDOMAIN_MAX_BYTES = 253


def _regex_error(message: str, regex: str, *examples: str) -> str:
    # content.RegexError; the doubled space before "or" is upstream's.
    if not examples:
        return f"{message} (regex used for validation is '{regex}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{regex}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} bytes"


def _byte_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX_BYTES:
        errors.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX_BYTES))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errors.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def label_key_errors(key: str) -> list[str]:
    """content.IsLabelKey: an optional DNS subdomain prefix and '/', then a name."""
    errors: list[str] = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + msg for msg in _dns1123_subdomain_errors(prefix))
    else:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif _byte_len(name) > _LABEL_MAX_BYTES:
        errors.append("name part " + _max_len_error(_LABEL_MAX_BYTES))
    if not _LABEL_KEY_RE.fullmatch(name):
        errors.append(
            "name part "
            + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue: empty, or at most 63 bytes of [-A-Za-z0-9_.] with alphanumeric ends."""
    errors = []
    if _byte_len(value) > _LABEL_MAX_BYTES:
        errors.append(_max_len_error(_LABEL_MAX_BYTES))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(
            _regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errors


def field_invalid(path: str, shown_value: str, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()``; ``shown_value`` is already Go-formatted."""
    return f"{path}: Invalid value: {shown_value}: {detail}"
