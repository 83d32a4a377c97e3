"""`kubesim serve`'s arguments and the one line it prints once ready: what it started, then
its kubeconfig."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.cli import described, main, node_names, started_line


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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "0"], "kubesim: --nodes must be between 1 and 100, got 0 (--bare for the "
                           "API server alone)\n"),
        (["--nodes", "101"], "kubesim: --nodes must be between 1 and 100, got 101"),
        (["--bare", "--nodes", "2"], "kubesim: --bare serves no nodes: drop --nodes\n"),
        (["--scenario", "x.yaml", "--nodes", "2"], "kubesim: --scenario sets up its own nodes "
                                                   "and controllers: drop --nodes and --bare\n"),
        (["--scenario", "x.yaml", "--bare"], "--scenario sets up its own nodes"),
    ],
)  # fmt: skip
def test_serve_refuses_conflicting_cluster_flags(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["serve", *args]) == 2
    printed = capsys.readouterr()
    assert message in printed.err
    assert printed.out == ""
