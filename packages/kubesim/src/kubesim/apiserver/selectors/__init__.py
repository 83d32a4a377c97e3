"""Label and field selectors as kube-apiserver parses and matches them.

The public face of :mod:`~kubesim.apiserver.selectors.labels`,
:mod:`~kubesim.apiserver.selectors.label_parser` and
:mod:`~kubesim.apiserver.selectors.fields`. Any parse or conversion failure
raises :class:`SelectorError`; answer it with 400 BadRequest and ``str(error)``
as the Status message, as kube-apiserver does.
"""

from kubesim.apiserver.selectors.fields import (
    FieldRequirement,
    FieldSelector,
    compile_field_selector,
    convert_field_label,
    escape_field_value,
    field_value,
    parse_field_selector,
    selectable_fields,
    supported_field_labels,
    unescape_field_value,
)
from kubesim.apiserver.selectors.label_parser import parse_label_selector
from kubesim.apiserver.selectors.labels import (
    EVERYTHING,
    NOTHING,
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    label_selector_from_object,
    label_selector_from_set,
    new_requirement,
)

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "compile_field_selector",
    "convert_field_label",
    "escape_field_value",
    "field_value",
    "label_selector_from_object",
    "label_selector_from_set",
    "new_requirement",
    "parse_field_selector",
    "parse_label_selector",
    "selectable_fields",
    "supported_field_labels",
    "unescape_field_value",
]
