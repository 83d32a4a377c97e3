"""kube/yamltext.py: any JSON document reads back the same through a YAML 1.1 reader
(PyYAML, what most tools embed), property-tested, and looks like kubectl's `-o yaml`."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from graceful_drain.kube.yamltext import dump

SCALARS = (
    st.none() | st.booleans() | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)  # fmt: skip
JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300)
@given(JSON)
def test_every_json_document_reads_back_the_same(document: Any) -> None:
    assert yaml.safe_load(dump(document)) == document


@pytest.mark.parametrize(
    "text",
    ["yes", "No", "ON", "off", "null", "~", "true", "1", "0x1f", "1_000", "12:30", "1e3",
     ".inf", "-", "- a", "a: b", "a #b", "#", "", " a", "a ", "'", '"', "\n", "é", "\t",
     "@x", "`x", "!x", "&x", "*x", "%x", "|", ">", "[a]", "{a}", "2024-05-01", "=", "<<",
     "\x7f", "\x85", "\u2028", "\u2029", "\ufeff", "\U0001f600", "a\\b"],
)  # fmt: skip
def test_strings_yaml_would_read_otherwise_are_quoted(text: str) -> None:
    assert yaml.safe_load(dump({"key": text})) == {"key": text}
    assert yaml.safe_load(dump([text])) == [text]


def test_the_layout_is_kubectls() -> None:
    document = {"kind": "DrainPlan", "pods": [{"name": "web-1", "fix": []}],
                "controller": {"enabledAnnotation": None, "webhookRegistered": True}}  # fmt: skip
    assert dump(document) == (
        "kind: DrainPlan\n"
        "pods:\n"
        "- name: web-1\n"
        "  fix: []\n"
        "controller:\n"
        "  enabledAnnotation: null\n"
        "  webhookRegistered: true\n"
    )


def test_what_json_cannot_hold_is_refused() -> None:
    with pytest.raises(TypeError):
        dump({"when": object()})
    with pytest.raises(TypeError):
        dump({1: "a"})
