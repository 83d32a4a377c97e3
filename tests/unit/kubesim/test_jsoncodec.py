"""kubesim's msgspec JSON: what json.dumps wrote (byte for byte where ASCII), what json.loads
read, and copies equal to copy.deepcopy's."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from bench import objects
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim import jsoncodec as encoding


def old_dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def json_of(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )


# Kubernetes objects carry no floats (quantities are strings); msgspec writes 1e16, json 1e+16.
float_free = json_of(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.text()
)
json_values = json_of(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_same_json_as_json_dumps(value: Any) -> None:
    assert json.loads(encoding.dumps(value)) == json.loads(old_dumps(value))


@settings(max_examples=300, deadline=None)
@given(float_free)
def test_same_bytes_when_ascii(value: Any) -> None:
    new = encoding.dumps(value)
    if new.isascii() and b"\x7f" not in new:  # json.dumps escapes DEL as well
        assert new == old_dumps(value)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]), json_values)
def test_watch_event_line(type_: str, obj: Any) -> None:
    line = encoding.watch_event(type_, obj)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"type": type_, "object": json.loads(old_dumps(obj))}


def test_kube_objects_are_byte_identical() -> None:
    pod = objects.pod(3, namespace="team-000", name="web-7f9-abcde", replicaset="web-7f9")
    listing = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
               "items": [pod, pod]}  # fmt: skip
    for body in (pod, listing):
        assert encoding.dumps(body) == old_dumps(body)
    assert encoding.watch_event("MODIFIED", pod) == (
        old_dumps({"type": "MODIFIED", "object": pod}) + b"\n"
    )


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_loads_reads_what_json_loads_reads(value: Any) -> None:
    text = json.dumps(value)
    assert encoding.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("text", ["NaN", "[1e999]", "1" * 30, '"\\ud800"', "{", ""])
def test_loads_keeps_json_loads_answers_at_the_edges(text: str) -> None:
    try:
        expected: Any = json.loads(text)
    except ValueError as error:
        with pytest.raises(ValueError):
            encoding.loads(text.encode())
        assert isinstance(error, ValueError)
        return
    got = encoding.loads(text.encode())
    assert got == expected or (got != got and expected != expected)  # NaN


@settings(max_examples=200, deadline=None)
@given(float_free)
def test_copy_is_a_deep_copy(value: Any) -> None:
    copied = encoding.copy(value)
    assert copied == copy.deepcopy(value)
    if isinstance(value, dict) and value:
        copied.clear()
        assert value


class Opaque:
    def __init__(self, value: int) -> None:
        self.value = value


def test_copy_of_what_is_not_json_falls_back_to_deepcopy() -> None:
    odd = {"thing": [Opaque(1)], "tuple": (1, 2)}
    copied = encoding.copy(odd)
    assert copied["thing"][0] is not odd["thing"][0]
    assert copied["thing"][0].value == 1
    assert copied["tuple"] == (1, 2)  # deep-copied as is, not through JSON


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["ADDED", "MODIFIED", "DELETED"]), json_values)
def test_a_watch_line_from_an_encoded_object_is_its_watch_event(type_: str, obj: Any) -> None:
    assert encoding.watch_line(type_, encoding.dumps(obj)) == encoding.watch_event(type_, obj)
