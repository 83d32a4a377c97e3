"""The default scheduler's filters and scores, table-driven (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.cluster.scheduling import (
    UNRESOLVABLE,
    UNSCHEDULABLE,
    FilterFailure,
    filter_node,
    first_untolerated_taint,
    fit_error_message,
    fits_resources,
    least_allocated_score,
    pod_matches_node_affinity,
    pod_requests,
    requirement_matches,
    score_nodes,
    select_host,
    toleration_tolerates,
)

Obj = dict[str, Any]


def node(name: str = "n1", cpu: str = "2", memory: str = "4Gi", pods: str = "110", *,
         labels: dict[str, str] | None = None, taints: list[Obj] | None = None,
         unschedulable: bool = False) -> Obj:  # fmt: skip
    spec: Obj = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def pod(cpu: str | None = None, memory: str | None = None, **spec: Any) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: Obj = {"name": "app", "image": "nginx"}
    if requests:
        container["resources"] = {"requests": requests}
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [container], **spec},
        "status": {"phase": "Pending"},
    }


# tolerations: k8s.io/api/core/v1/toleration_test.go

TAINT = {"key": "foo", "value": "bar", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        ({"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
         {"key": "foo", "effect": "NoSchedule"}, True),
        ({"key": "foo", "operator": "Exists", "effect": "NoSchedule"}, TAINT, True),
        ({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"}, TAINT, True),
        ({"key": "foo", "value": "bar", "effect": "NoSchedule"}, TAINT, True),  # "" is Equal
        ({"key": "foo", "operator": "Equal", "value": "baz", "effect": "NoSchedule"}, TAINT, False),
        ({"key": "foo", "operator": "Equal", "effect": "NoSchedule"}, TAINT, False),
        ({"key": "foo", "operator": "Exists", "effect": "NoExecute"}, TAINT, False),
        ({"key": "foo", "operator": "Exists"}, TAINT, True),  # empty effect matches all
        ({"key": "other", "operator": "Exists"}, TAINT, False),
        ({"operator": "Exists"}, TAINT, True),  # empty key with Exists matches every taint
        ({"operator": "Exists", "effect": "NoExecute"}, TAINT, False),
        ({"key": "foo", "operator": "Lt", "value": "1"}, TAINT, False),  # unknown operator
    ],
)  # fmt: skip
def test_toleration_matching(toleration: Obj, taint: Obj, tolerated: bool) -> None:
    assert toleration_tolerates(toleration, taint) is tolerated


taints = st.fixed_dictionaries({
    "key": st.text("abc/.", min_size=1, max_size=5),
    "value": st.text("xyz", max_size=3),
    "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
})  # fmt: skip


@given(taints)
def test_wildcard_toleration_tolerates_any_taint(taint: Obj) -> None:
    assert toleration_tolerates({"operator": "Exists"}, taint)
    assert toleration_tolerates({"key": taint["key"], "operator": "Exists"}, taint)
    assert toleration_tolerates(
        {"key": taint["key"], "operator": "Equal", "value": taint["value"],
         "effect": taint["effect"]}, taint)  # fmt: skip


def test_only_no_schedule_and_no_execute_taints_filter() -> None:
    soft = {"key": "a", "effect": "PreferNoSchedule"}
    hard = {"key": "b", "effect": "NoExecute"}
    effects = ("NoSchedule", "NoExecute")
    assert first_untolerated_taint([soft], [], effects) is None
    assert first_untolerated_taint([soft, hard], [], effects) == hard


# node affinity: k8s.io/component-helpers/scheduling/corev1/nodeaffinity

LABELS = {"zone": "a", "gpu": "4", "disk": "ssd"}


@pytest.mark.parametrize(
    ("requirement", "matches"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "In", "values": ["b"]}, False),
        ({"key": "missing", "operator": "In", "values": ["a"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["b"]}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "missing", "operator": "NotIn", "values": ["a"]}, True),
        ({"key": "disk", "operator": "Exists"}, True),
        ({"key": "missing", "operator": "Exists"}, False),
        ({"key": "missing", "operator": "DoesNotExist"}, True),
        ({"key": "disk", "operator": "DoesNotExist"}, False),
        ({"key": "gpu", "operator": "Gt", "values": ["3"]}, True),
        ({"key": "gpu", "operator": "Gt", "values": ["4"]}, False),
        ({"key": "gpu", "operator": "Lt", "values": ["5"]}, True),
        ({"key": "gpu", "operator": "Lt", "values": ["4"]}, False),
        ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),  # not an integer
        ({"key": "gpu", "operator": "Gt", "values": ["1", "2"]}, False),  # needs one value
        ({"key": "missing", "operator": "Lt", "values": ["9"]}, False),
        ({"key": "zone", "operator": "Bogus", "values": ["a"]}, False),
    ],
)
def test_node_selector_requirement(requirement: Obj, matches: bool) -> None:
    assert requirement_matches(requirement, LABELS) is matches


def _affinity(*terms: Obj) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                             {"nodeSelectorTerms": list(terms)}}}  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "matches"),
    [
        ({}, True),
        ({"nodeSelector": {"zone": "a"}}, True),
        ({"nodeSelector": {"zone": "a", "disk": "hdd"}}, False),
        ({"affinity": _affinity({"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["b"]}]},
            {"matchExpressions": [{"key": "disk", "operator": "Exists"}]})}, True),  # terms ORed
        ({"affinity": _affinity({"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]},
            {"key": "gpu", "operator": "Lt", "values": ["2"]}]})}, False),  # expressions ANDed
        ({"affinity": _affinity({})}, False),  # an empty term matches nothing
        ({"affinity": _affinity()}, False),  # no terms match nothing
        ({"affinity": _affinity({"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]})}, True),
        ({"nodeSelector": {"zone": "b"}, "affinity": _affinity({"matchExpressions": [
            {"key": "zone", "operator": "Exists"}]})}, False),  # selector AND affinity
    ],
)  # fmt: skip
def test_required_node_affinity_and_selector(spec: Obj, matches: bool) -> None:
    assert pod_matches_node_affinity(pod(**spec), node(labels=LABELS)) is matches


# resources: noderesources/fit.go


def test_pod_requests_sum_containers_and_floor_on_init_containers() -> None:
    p = pod("100m", "64Mi")
    p["spec"]["containers"].append({"name": "b", "resources": {"requests": {"cpu": "200m"}}})
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "1"}}}]
    requests = pod_requests(p)
    assert (requests.milli_cpu, requests.memory) == (1000, 64 * 2**20)
    non_zero = pod_requests(pod())
    assert (non_zero.milli_cpu, non_zero.memory) == (0, 0)
    defaulted = pod_requests(pod(), non_zero=True)
    assert (defaulted.milli_cpu, defaulted.memory) == (100, 200 * 2**20)


@pytest.mark.parametrize(
    ("wanted", "existing", "allowed", "reasons"),
    [
        (pod("1", "1Gi"), [pod("1", "1Gi")], "110", []),
        (pod("1500m"), [pod("1")], "110", ["Insufficient cpu"]),
        (pod(memory="4Gi"), [pod(memory="1Mi")], "110", ["Insufficient memory"]),
        (pod("3", "5Gi"), [], "110", ["Insufficient cpu", "Insufficient memory"]),
        (pod(), [pod("2", "4Gi")], "110", []),  # no requests: only the pod count matters
        (pod("1"), [pod()], "1", ["Too many pods", ]),
        (pod("3"), [pod()], "1", ["Too many pods", "Insufficient cpu"]),
        (pod("2"), [{**pod("2"), "status": {"phase": "Succeeded"}}], "110", []),  # terminal
    ],
)  # fmt: skip
def test_fits_resources(wanted: Obj, existing: list[Obj], allowed: str, reasons: list[str]) -> None:
    assert fits_resources(wanted, node(pods=allowed), existing) == reasons


def test_nominated_pods_count_against_the_node() -> None:
    assert fits_resources(pod("1"), node(), [], [pod("1500m")]) == ["Insufficient cpu"]


# the filter chain, in the default profile's order


@pytest.mark.parametrize(
    ("the_node", "the_pod", "failure"),
    [
        (node(), pod("1"), None),
        (node(unschedulable=True,
              taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
         pod(), FilterFailure(UNRESOLVABLE, ("node(s) were unschedulable",))),
        (node(unschedulable=True), pod(tolerations=[
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
             "effect": "NoSchedule"}]), None),
        (node(taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]), pod(),
         FilterFailure(UNRESOLVABLE, ("node(s) had untolerated taint {dedicated: infra}",))),
        (node(taints=[{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]),
         pod(), FilterFailure(UNRESOLVABLE, (
             "node(s) had untolerated taint {node.kubernetes.io/memory-pressure: }",))),
        (node(taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]),
         pod(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "infra"}]), None),
        (node(taints=[{"key": "soft", "effect": "PreferNoSchedule"}]), pod(), None),
        (node(labels={"zone": "a"}), pod(nodeSelector={"zone": "b"}),
         FilterFailure(UNRESOLVABLE, ("node(s) didn't match Pod's node affinity/selector",))),
        (node(cpu="1"), pod("2"), FilterFailure(UNSCHEDULABLE, ("Insufficient cpu",))),
        # the first failing filter decides: a cordoned, tainted, full node is "unschedulable"
        (node(cpu="1", unschedulable=True, taints=[{"key": "x", "effect": "NoExecute"}]),
         pod("2", nodeSelector={"zone": "b"}),
         FilterFailure(UNRESOLVABLE, ("node(s) were unschedulable",))),
        (node(cpu="1", taints=[{"key": "x", "effect": "NoExecute"}]),
         pod("2", nodeSelector={"zone": "b"}),
         FilterFailure(UNRESOLVABLE, ("node(s) had untolerated taint {x: }",))),
    ],
)  # fmt: skip
def test_filter_node(the_node: Obj, the_pod: Obj, failure: FilterFailure | None) -> None:
    assert filter_node(the_pod, the_node, []) == failure


# FitError.Error()


def test_fit_error_message_sorts_the_histogram() -> None:
    failures = {
        "a": FilterFailure(UNRESOLVABLE, ("node(s) were unschedulable",)),
        "b": FilterFailure(UNRESOLVABLE, ("node(s) had untolerated taint {k: v}",)),
        "c": FilterFailure(UNSCHEDULABLE, ("Insufficient cpu", "Insufficient memory")),
        "d": FilterFailure(UNSCHEDULABLE, ("Insufficient cpu",)),
    }
    assert fit_error_message(4, failures) == (
        "0/4 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {k: v},"
        " 1 node(s) were unschedulable, 2 Insufficient cpu."
    )


def test_fit_error_message_with_post_filter_and_absent_nodes() -> None:
    failures = {"a": FilterFailure(UNRESOLVABLE, ("node(s) were unschedulable",))}
    inner = fit_error_message(2, {}, absent_reason="Preemption is not helpful for scheduling")
    assert inner == "0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    assert fit_error_message(1, failures, f"preemption: {inner}") == (
        "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling."
    )


# scores


def test_least_allocated_prefers_the_emptier_node() -> None:
    busy, idle = node("busy"), node("idle")
    on_busy = [pod("1500m", "3Gi")]
    assert least_allocated_score(pod("100m"), busy, on_busy) < least_allocated_score(
        pod("100m"), idle, []
    )
    scores = score_nodes(pod("100m"), {"busy": busy, "idle": idle}, {"busy": on_busy})
    assert select_host(scores) == "idle"


def test_prefer_no_schedule_taints_and_preferred_affinity_weigh_in() -> None:
    tainted = node("a", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    plain = node("b")
    assert select_host(score_nodes(pod(), {"a": tainted, "b": plain}, {})) == "b"
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z"]}]}}]}}  # fmt: skip
    zoned = node("c", labels={"zone": "z"})
    assert select_host(score_nodes(pod(affinity=preferred), {"b": plain, "c": zoned}, {})) == "c"


def test_ties_go_to_the_first_name() -> None:
    assert select_host({"b": 10, "a": 10, "c": 5}) == "a"
