"""The one line `kubesim serve` prints once ready: what it started, then its kubeconfig."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.cli import described, node_names, started_line


@pytest.mark.parametrize(
    ("nodes", "controllers", "expected"),
    [
        (["node-1", "node-2"], ["deployment", "replicaset", "scheduler"],
         "a cluster: the API server, 2 Ready nodes (node-1, node-2), the scheduler, "
         "controllers deployment, replicaset"),
        (["node-a"], ["deployment"],
         "a cluster: the API server, 1 Ready node (node-a), controllers deployment"),
        ([], ["scheduler"], "a cluster: the API server, no nodes, the scheduler"),
        (["n"], [], "a cluster: the API server, 1 Ready node (n)"),
    ],
)  # fmt: skip
def test_described(nodes: list[str], controllers: list[str], expected: str) -> None:
    assert described(nodes, controllers) == expected


def test_started_line_ends_with_the_kubeconfig() -> None:
    line = started_line("https://127.0.0.1:6443", Path("/tmp/kc"), "what")
    assert line == "kubesim: serving https://127.0.0.1:6443: what; kubeconfig: /tmp/kc"


@given(st.integers(min_value=1, max_value=100))
def test_node_names_are_distinct_and_numbered_from_one(count: int) -> None:
    names = node_names(count)
    assert len(set(names)) == count
    assert names[0] == "node-1" and names[-1] == f"node-{count}"
