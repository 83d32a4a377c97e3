"""Tolerant reads of raw Kubernetes JSON (kube/rawjson.py): the controller's FieldReader and the
detector's accessors share one notion of what each JSON type is."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.kube.rawjson import FieldReader, as_int, as_list, as_mapping, as_str, get_path

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=10,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (-(2**63), -(2**63)), (2**63, None), (True, None), (1.0, None), ("3", None)],
)
def test_an_int64_reads_the_same_both_ways(value: object, expected: int | None) -> None:
    assert as_int(value) == expected
    reader = FieldReader()
    assert reader.optional_integer({"n": value}, "n", "spec.n") == expected
    assert reader.malformed == ([] if expected is not None else ["spec.n"])


def test_get_path_walks_mappings_and_reads_anything_else_as_absent() -> None:
    obj = {"metadata": {"labels": {"app": "web"}, "name": ""}, "spec": []}
    assert get_path(obj, "metadata", "labels", "app") == "web"
    assert get_path(obj, "spec", "replicas") is None
    assert get_path(obj, "metadata", "missing", "deeper") is None
    assert as_str(get_path(obj, "metadata", "name")) is None  # empty reads as absent


@given(JSON, st.lists(st.text(max_size=3), max_size=4))
def test_the_detector_accessors_never_raise(value: object, keys: list[str]) -> None:
    get_path(value, *keys)
    as_mapping(value)
    as_list(value)
    as_str(value)
    as_int(value)


@given(st.dictionaries(st.text(max_size=3), JSON, max_size=4), st.text(max_size=3))
def test_field_reader_never_raises_and_names_what_was_wrong(
    obj: dict[str, object], key: str
) -> None:
    reader = FieldReader()
    reader.mapping(obj, key, "m")
    reader.sequence(obj, key, "s")
    reader.string(obj, key, "t")
    reader.integer(obj, key, "i")
    reader.boolean(obj, key, "b")
    assert set(reader.malformed) <= {"m", "s", "t", "i", "b"}
    if obj.get(key) is None:
        assert reader.malformed == []
