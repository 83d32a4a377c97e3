"""The pure parts of kubesim's pods/log: what a container's command prints, which container
and instance a request reads (with the kubelet's and the registry's 400s), the query's
options, and the --since / --tail selection."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.podlogs import (
    LogOptions,
    container_name,
    instance,
    log_options,
    printed,
    render,
    select,
)

Obj = dict[str, Any]
T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("command", "args", "lines"),
    [
        (None, ["echo", "hello"], ["hello"]),
        (["echo"], ["hello", "world"], ["hello world"]),
        (["/bin/echo", "-n", "x"], None, ["x"]),
        (["echo", "-n"], None, []),
        (["sh", "-c", "echo one; echo 'two words' && echo three"], None,
         ["one", "two words", "three"]),
        (["/bin/sh", "-c", "sleep 3\necho done"], None, ["done"]),
        (["sh", "-c", "echo 'unterminated"], None, []),
        (["sleep", "3600"], None, []),
        (None, None, []),
        (["echo"], None, [""]),
    ],
)  # fmt: skip
def test_printed(command: list[str] | None, args: list[str] | None, lines: list[str]) -> None:
    container: Obj = {"name": "c"}
    if command is not None:
        container["command"] = command
    if args is not None:
        container["args"] = args
    assert printed(container) == lines


def pod(containers: list[str], statuses: list[Obj] | None = None, node: str = "n") -> Obj:
    return {"metadata": {"name": "p"},
            "spec": {"nodeName": node, "containers": [{"name": c} for c in containers]},
            "status": {"containerStatuses": statuses or []}}  # fmt: skip


@pytest.mark.parametrize(
    ("containers", "requested", "answer"),
    [
        (["a"], "", "a"),
        (["a", "b"], "b", "b"),
        (["a", "b"], "", "a container name must be specified for pod p, choose one of: [a b]"),
        (["a"], "x", "container x is not valid for pod p"),
    ],
)
def test_container_name(containers: list[str], requested: str, answer: str) -> None:
    if answer in containers:
        assert container_name(pod(containers), requested) == answer
        return
    with pytest.raises(ApiError) as err:
        container_name(pod(containers), requested)
    assert (err.value.code, err.value.message) == (400, answer)


def test_instances_and_the_kubelets_refusals() -> None:
    assert instance(pod(["c"], node=""), "c", previous=False) is None  # not on a node: empty
    waiting = pod(["c"], [{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}}])
    with pytest.raises(ApiError, match='container "c" in pod "p" is waiting to start: Cont'):
        instance(waiting, "c", previous=False)
    with pytest.raises(ApiError, match='previous terminated container "c" in pod "p" not fo'):
        instance(waiting, "c", previous=True)
    restarted = pod(["c"], [{
        "name": "c", "containerID": "containerd://2",
        "state": {"running": {"startedAt": "2026-01-01T12:00:05Z"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "containerID":
                                     "containerd://1", "startedAt": "2026-01-01T12:00:00Z",
                                     "finishedAt": "2026-01-01T12:00:01Z"}},
    }])  # fmt: skip
    now = instance(restarted, "c", previous=False)
    before = instance(restarted, "c", previous=True)
    assert now is not None and before is not None
    assert (now.container_id, now.finished) == ("containerd://2", None)
    assert (before.container_id, before.exit_code, before.reason) == ("containerd://1", 1, "Error")
    assert before.finished == T0 + dt.timedelta(seconds=1)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"sinceSeconds": "0"}, "sinceSeconds: Invalid value: must be greater than 0"),
        ({"tailLines": "-1"}, "tailLines: Invalid value: must be greater than or equal to 0"),
        ({"sinceSeconds": "5", "sinceTime": "2026-01-01T00:00:00Z"},
         "at most one of `sinceTime` or `sinceSeconds` may be specified"),
        ({"limitBytes": "0"}, "limitBytes: Invalid value: must be greater than 0"),
    ],
)  # fmt: skip
def test_invalid_options(query: dict[str, str], message: str) -> None:
    with pytest.raises(ApiError) as err:
        log_options(query)
    assert err.value.code == 422 and message in err.value.message


def test_options_read_from_the_query() -> None:
    options = log_options({"follow": "true", "previous": "1", "tailLines": "2",
                           "container": "c", "timestamps": "true"})  # fmt: skip
    assert options == LogOptions("c", True, True, None, None, True, 2, None)
    with pytest.raises(ApiError, match="tailLines"):
        log_options({"tailLines": "x"})


LINES = [(T0 + dt.timedelta(seconds=s), f"line {s}") for s in range(10)]


@given(st.integers(min_value=0, max_value=12))
def test_tail_keeps_the_last_lines(tail: int) -> None:
    kept = select(LINES, LogOptions(tail_lines=tail), T0)
    assert kept == LINES[max(len(LINES) - tail, 0) :]


@given(st.integers(min_value=1, max_value=15))
def test_since_seconds_keeps_the_lines_not_older(seconds: int) -> None:
    now = T0 + dt.timedelta(seconds=10)
    kept = select(LINES, LogOptions(since_seconds=seconds), now)
    assert kept == [line for line in LINES if line[0] >= now - dt.timedelta(seconds=seconds)]


def test_render_with_and_without_timestamps() -> None:
    assert render(LINES[:1], LogOptions()) == b"line 0\n"
    assert render(LINES[:1], LogOptions(timestamps=True)) == (
        b"2026-01-01T12:00:00.000000000Z line 0\n"
    )
