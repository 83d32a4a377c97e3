"""The differential suite's normalisation: what is taken out of an answer, and what is not."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.differential.normalise import compare, normalise

UID = "0b5a3c6e-6a4f-4f3e-9c1d-2a7e8f9b0c1d"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"metadata": {"name": "a", "uid": UID, "resourceVersion": "12",
                       "creationTimestamp": "2026-12-01T12:00:00Z", "managedFields": []}},
         {"metadata": {"name": "a"}}),
        ({"metadata": {"generateName": "gen-", "name": "gen-x7k2p"}},
         {"metadata": {"generateName": "gen-", "name": "gen-<generated>"}}),
        ({"items": [], "metadata": {"resourceVersion": "9", "continue": "abc",
                                    "remainingItemCount": 1}},
         {"items": [], "metadata": {"continue": "<continue>", "remainingItemCount": 1}}),
        ({"message": f"the UID in the precondition ({UID}) does not match"},
         {"message": "the UID in the precondition (<uid>) does not match"}),
        ({"message": "the ResourceVersion in the precondition (1) does not match"},
         {"message": "the ResourceVersion in the precondition (<rv>) does not match"}),
        ({"lastTransitionTime": "2026-12-01T12:00:00.123456Z", "reason": "Evicted"},
         {"lastTransitionTime": "<time>", "reason": "Evicted"}),
        # What the API decides stays: codes, reasons, names, counts, other numbers.
        ({"code": 409, "reason": "Conflict", "details": {"name": "a", "kind": "ConfigMap"}},
         {"code": 409, "reason": "Conflict", "details": {"name": "a", "kind": "ConfigMap"}}),
    ],
)  # fmt: skip
def test_normalise(answer: Any, expected: Any) -> None:
    assert normalise(answer) == expected


def test_compare_names_each_difference_by_its_path() -> None:
    left = {"a": 1, "b": {"c": [1, 2]}, "d": "x"}
    right = {"a": 1, "b": {"c": [1, 3]}, "e": "y"}
    assert compare(left, right) == [".b.c[1]: 2 != 3", ".d: 'x' != missing", ".e: missing != 'y'"]
    assert compare([1], [1, 2]) == [": 1 items != 2 items"]
    assert compare(left, left) == []
