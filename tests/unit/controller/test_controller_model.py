"""PodInfo / ReplicaSetInfo / DeploymentInfo from raw API JSON, well-formed or not."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.annotations import COMPLETED_AT_ANNOTATION
from graceful_drain.controller.decision.model import (
    DeploymentInfo,
    Enablement,
    MalformedObject,
    ObjectRef,
    PodInfo,
    ReplicaSetInfo,
)

from .objects import ENABLED, POD, REPLICASET, raw_pod, raw_replicaset


def raw_deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": "dep-uid",
            "resourceVersion": "42",
            "generation": 3,
            "annotations": {
                "deployment.kubernetes.io/revision": "2",
                "graceful-drain.stonal.com/restarted-at": "2024-05-01T12:00:00Z",
                ENABLED: "true",
            },
        },
        "spec": {
            "replicas": 1,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "template": {
                "metadata": {
                    "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-05-01T12:00:00Z"}
                },
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
        "status": {
            "observedGeneration": 3,
            "replicas": 2,
            "updatedReplicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
        },
    }


# --- pods -------------------------------------------------------------------------------------


def test_objects_agree_with_the_decoder() -> None:
    """objects.py's slim POD and REPLICASET are what the decoder makes of its raw ones."""
    assert PodInfo.from_object(raw_pod()) == POD
    assert ReplicaSetInfo.from_object(raw_replicaset()) == REPLICASET


def test_pod_from_object() -> None:
    assert PodInfo.from_object(raw_pod()) == PodInfo(
        namespace="default",
        name="web-5d9-abcde",
        uid="pod-uid",
        node_name="node-a",
        terminating=False,
        phase="Running",
        ready=True,
        owner_kind="ReplicaSet",
        owner_replicaset="web-5d9",
    )


def _pod_with(path: tuple[str, ...], value: object) -> dict[str, Any]:
    raw = raw_pod()
    parent = raw
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("metadata", "deletionTimestamp"), "2024-05-01T12:00:00Z", {"terminating": True}),
        (("metadata", "deletionTimestamp"), None, {"terminating": False}),
        (("status", "phase"), "Succeeded", {"phase": "Succeeded"}),
        (("status", "conditions"), [{"type": "Ready", "status": "False"}], {"ready": False}),
        (("status", "conditions"), [], {"ready": False}),
        (("metadata", "ownerReferences"), [], {"owner_kind": None, "owner_replicaset": None}),
        (
            ("metadata", "ownerReferences"),
            [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": True}],
            {"owner_kind": "StatefulSet", "owner_replicaset": None},
        ),
        (
            ("metadata", "ownerReferences"),
            [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs"}],  # not controller
            {"owner_kind": None, "owner_replicaset": None},
        ),
        (
            ("metadata", "ownerReferences"),
            [
                {"apiVersion": "v1", "kind": "Node", "name": "n"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True},
            ],
            {"owner_kind": "ReplicaSet", "owner_replicaset": "rs"},
        ),
        (
            ("metadata", "ownerReferences"),
            [
                {
                    "apiVersion": "extensions/v1beta1",
                    "kind": "ReplicaSet",
                    "name": "rs",
                    "controller": True,
                }
            ],
            {"owner_kind": "ReplicaSet", "owner_replicaset": None},
        ),
    ],
)
def test_pod_fields(path: tuple[str, ...], value: object, expected: dict[str, object]) -> None:
    pod = PodInfo.from_object(_pod_with(path, value))

    assert {key: getattr(pod, key) for key in expected} == expected
    assert pod.malformed == ()


@pytest.mark.parametrize(
    ("path", "value", "field", "fallback", "malformed"),
    [
        (("status", "conditions"), "Ready", "ready", False, "status.conditions"),
        (("status", "conditions"), ["Ready"], "ready", False, "status.conditions[0]"),
        (("status",), [], "ready", False, "status"),
        (("status", "phase"), 3, "phase", "", "status.phase"),
        (("spec", "nodeName"), ["a"], "node_name", "", "spec.nodeName"),
        (("metadata", "uid"), 7, "uid", "", "metadata.uid"),
        (
            ("metadata", "ownerReferences"),
            {"kind": "ReplicaSet"},
            "owner_replicaset",
            None,
            "metadata.ownerReferences",
        ),
        (
            ("metadata", "ownerReferences"),
            [{"kind": 1, "name": "x", "controller": True}],
            "owner_replicaset",
            None,
            "metadata.ownerReferences[0].kind",
        ),
        (
            ("metadata", "ownerReferences"),
            [{"kind": "ReplicaSet", "controller": "yes"}],
            "owner_kind",
            None,
            "metadata.ownerReferences[0].controller",
        ),
    ],
)
def test_pod_malformed_fields_fall_back_and_are_listed(
    path: tuple[str, ...], value: object, field: str, fallback: object, malformed: str
) -> None:
    pod = PodInfo.from_object(_pod_with(path, value))

    assert getattr(pod, field) == fallback
    assert malformed in pod.malformed


@pytest.mark.parametrize("raw", [None, [], "pod", {}, {"metadata": None}, {"metadata": []}])
def test_without_metadata_it_raises_malformed_object(raw: Any) -> None:
    for info in (PodInfo, ReplicaSetInfo, DeploymentInfo):
        with pytest.raises(MalformedObject):
            info.from_object(raw)


def _deep_size(obj: object, seen: set[int] | None = None) -> int:
    """Bytes held by `obj` and everything it references (shared singletons included)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or obj is None or isinstance(obj, bool):
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, tuple):
        size += sum(_deep_size(item, seen) for item in obj)
    for name in getattr(type(obj), "__slots__", ()):
        size += _deep_size(getattr(obj, name), seen)
    return size


def test_a_cached_pod_with_maximal_names_stays_under_2_kib() -> None:
    raw = raw_pod()
    raw["metadata"]["name"] = "p" * 253
    raw["metadata"]["namespace"] = "n" * 63
    raw["metadata"]["ownerReferences"][0]["name"] = "r" * 253
    raw["spec"]["nodeName"] = "node" * 63
    pod = PodInfo.from_object(raw)

    assert not hasattr(pod, "__dict__")
    assert _deep_size(pod) < 2048


def _listed(raw: dict[str, Any]) -> PodInfo:
    listed = PodInfo.from_listed(json.dumps(raw).encode())
    assert listed is not None
    return listed[1]


@pytest.mark.parametrize("view", [PodInfo.from_object, _listed], ids=["object", "listed"])
def test_cached_pods_share_namespace_node_and_replicaset_strings(
    view: Callable[[dict[str, Any]], PodInfo],
) -> None:
    first, second = raw_pod(), raw_pod()
    second["metadata"]["name"] = "other"
    # Distinct str objects with equal values, as two JSON decodes produce.
    first["spec"]["nodeName"] = "".join(["node-", "a"])
    second["spec"]["nodeName"] = "".join(["node", "-a"])
    first["metadata"]["ownerReferences"][0]["name"] = "".join(["web-", "5d8f"])
    second["metadata"]["ownerReferences"][0]["name"] = "".join(["web", "-5d8f"])

    a, b = view(first), view(second)

    assert a.node_name is b.node_name
    assert a.namespace is b.namespace
    assert a.owner_replicaset == "web-5d8f"
    assert a.owner_replicaset is b.owner_replicaset


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `node`, plus one new key per mapping."""
    if isinstance(node, dict):
        children = [*node, "extra"]
    elif isinstance(node, list):
        children = list(range(len(node)))
    else:
        return []
    paths = []
    for child in children:
        paths.append((*prefix, child))
        if isinstance(node, list) or child in node:
            paths.extend(_paths(node[child], (*prefix, child)))
    return paths


def _mutated(raw: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """`raw` with one node anywhere (except metadata itself) replaced by arbitrary JSON."""
    raw = copy.deepcopy(raw)
    paths = [path for path in _paths(raw) if path != ("metadata",)]
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        path = data.draw(st.sampled_from(paths))
        parent: Any = raw
        for key in path[:-1]:
            if not isinstance(parent, dict | list):
                break
            try:
                parent = parent[key]
            except (KeyError, IndexError, TypeError):
                break
        else:
            key = path[-1]
            fits_list = isinstance(key, int) and isinstance(parent, list) and key < len(parent)
            if fits_list or (isinstance(key, str) and isinstance(parent, dict)):
                parent[key] = data.draw(JSON)
    return raw


@given(st.data())
def test_pod_never_raises_when_metadata_is_a_mapping(data: st.DataObject) -> None:
    pod = PodInfo.from_object(_mutated(raw_pod(), data))
    assert isinstance(pod.ready, bool) and isinstance(pod.name, str)


@given(st.data())
def test_replicaset_never_raises_when_metadata_is_a_mapping(data: st.DataObject) -> None:
    rs = ReplicaSetInfo.from_object(_mutated(raw_replicaset(), data))
    assert rs.owner_deployment is None or isinstance(rs.owner_deployment, str)


@given(st.data())
def test_deployment_never_raises_when_metadata_is_a_mapping(data: st.DataObject) -> None:
    deployment = DeploymentInfo.from_object(
        _mutated(raw_deployment(), data), enabled_annotation=ENABLED
    )
    assert isinstance(deployment.max_surge, int)
    assert deployment.replicas is None or isinstance(deployment.replicas, int)
    assert isinstance(deployment.ready_replicas, int)


@given(JSON)
def test_arbitrary_metadata_contents_never_raise(metadata: Any) -> None:
    raw = {"metadata": metadata if isinstance(metadata, dict) else {"name": metadata}}
    PodInfo.from_object(raw)
    ReplicaSetInfo.from_object(raw)
    DeploymentInfo.from_object(raw)


# --- replicasets --------------------------------------------------------------------------------


def test_replicaset_from_object() -> None:
    rs = ReplicaSetInfo.from_object(raw_replicaset())

    assert rs == ReplicaSetInfo("default", "web-5d9", "rs-uid", owner_deployment="web")
    assert rs.ref == ObjectRef("default", "web-5d9")


def test_replicaset_owned_by_something_else_has_no_deployment() -> None:
    raw = raw_replicaset()
    raw["metadata"]["ownerReferences"][0]["kind"] = "Rollout"
    raw["metadata"]["ownerReferences"][0]["apiVersion"] = "argoproj.io/v1alpha1"

    assert ReplicaSetInfo.from_object(raw).owner_deployment is None


# --- deployments --------------------------------------------------------------------------------


def test_deployment_from_object() -> None:
    deployment = DeploymentInfo.from_object(raw_deployment(), enabled_annotation=ENABLED)

    assert deployment == DeploymentInfo(
        namespace="default",
        name="web",
        uid="dep-uid",
        resource_version="42",
        generation=3,
        deleting=False,
        has_annotations=True,
        replicas=1,
        strategy_type="RollingUpdate",
        max_surge=1,
        paused=False,
        observed_generation=3,
        status_replicas=2,
        updated_replicas=1,
        ready_replicas=1,
        available_replicas=1,
        restarted_at=datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC),
        restarted_at_raw="2024-05-01T12:00:00Z",
        template_restarted_at="2024-05-01T12:00:00Z",
        enabled_value=deployment.enabled_value,
    )
    assert deployment.enablement is Enablement.ON
    assert not deployment.restarted_at_malformed
    assert not deployment.rollout_complete  # two pods exist while the surge pod is up


def test_minimal_deployment_gets_the_api_defaults() -> None:
    deployment = DeploymentInfo.from_object({"metadata": {"name": "web", "namespace": "ns"}})

    assert deployment.replicas == 1
    assert deployment.strategy_type == "RollingUpdate"
    assert deployment.max_surge == 1  # 25% of 1, rounded up
    assert deployment.restarted_at is None and deployment.restarted_at_raw is None
    assert not deployment.has_annotations
    assert not deployment.template_has_annotations
    assert deployment.enablement is Enablement.ABSENT
    assert deployment.max_unavailable == 0  # 25% of 1, rounded down
    assert deployment.template_grace_period_seconds == 30
    assert deployment.completed_at_raw is None
    assert deployment.malformed == ()


def _deployment_with(**spec: object) -> DeploymentInfo:
    raw = raw_deployment()
    raw["spec"].update(spec)
    return DeploymentInfo.from_object(raw)


@pytest.mark.parametrize(
    ("strategy", "replicas", "max_surge"),
    [
        ({"type": "Recreate"}, 1, 0),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}, 1, 0),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%"}}, 1, 0),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "1%"}}, 1, 1),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}, 1, 2),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "30%"}}, 10, 3),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}}, 10, 3),  # 2.5 -> 3
        ({"type": "RollingUpdate"}, 1, 1),
        ({}, 1, 1),
        ({"type": ""}, 1, 1),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "1"}}, 1, 0),  # no % sign
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1.5}}, 1, 0),
        # An unresolvable maxUnavailable zeroes both fenceposts upstream.
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "x"}}, 1, 0),
        ({"type": "Canary"}, 1, 0),
        ({"type": 5}, 1, 0),
        ({"type": "RollingUpdate", "rollingUpdate": "fast"}, 1, 0),
    ],
)
def test_max_surge_resolution(strategy: dict[str, object], replicas: int, max_surge: int) -> None:
    assert _deployment_with(strategy=strategy, replicas=replicas).max_surge == max_surge


@pytest.mark.parametrize(
    ("value", "replicas", "malformed"),
    [
        (None, 1, False),
        (3, 3, False),
        (0, 0, False),
        ("1", None, True),
        (1.0, None, True),
        (True, None, True),
    ],
)
def test_spec_replicas(value: object, replicas: int | None, malformed: bool) -> None:
    deployment = _deployment_with(replicas=value)

    assert deployment.replicas == replicas
    assert ("spec.replicas" in deployment.malformed) is malformed


@pytest.mark.parametrize(
    ("annotation", "parsed"),
    [
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)),
        ("2024-05-01T14:00:00+02:00", datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)),
        ("2024-05-01T12:00:00.5Z", datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2024-05-01 12:00:00Z", None),
        ("2024-05-01T12:00:00", None),
        ("yesterday", None),
        ("", None),
    ],
)
def test_restarted_at_annotation(annotation: str, parsed: datetime | None) -> None:
    raw = raw_deployment()
    raw["metadata"]["annotations"]["graceful-drain.stonal.com/restarted-at"] = annotation

    deployment = DeploymentInfo.from_object(raw)

    assert deployment.restarted_at == parsed
    assert deployment.restarted_at_raw == annotation
    assert deployment.restarted_at_malformed is (parsed is None)
    if parsed is not None:
        assert parsed.tzinfo is UTC


def test_a_non_string_restarted_at_is_absent_and_listed() -> None:
    raw = raw_deployment()
    raw["metadata"]["annotations"]["graceful-drain.stonal.com/restarted-at"] = 1714564800

    deployment = DeploymentInfo.from_object(raw)

    assert deployment.restarted_at is None and deployment.restarted_at_raw is None
    assert "metadata.annotations[graceful-drain.stonal.com/restarted-at]" in deployment.malformed


@pytest.mark.parametrize(
    ("annotations", "configured", "enablement"),
    [
        ({ENABLED: "true"}, ENABLED, Enablement.ON),
        ({ENABLED: "false"}, ENABLED, Enablement.OFF),
        ({ENABLED: ""}, ENABLED, Enablement.INVALID),  # v2: the value is parsed
        ({ENABLED: "False"}, ENABLED, Enablement.INVALID),
        ({ENABLED: "yes"}, ENABLED, Enablement.INVALID),
        ({}, ENABLED, Enablement.ABSENT),
        (None, ENABLED, Enablement.ABSENT),
        # Without opt-in the default key is still read, for opting out.
        ({ENABLED: "false"}, None, Enablement.OFF),
        ({ENABLED: "true"}, None, Enablement.ON),
        # A configured key replaces the default one.
        ({ENABLED: "false"}, "example.com/protect", Enablement.ABSENT),
        ({"example.com/protect": "false"}, "example.com/protect", Enablement.OFF),
    ],
)
def test_enabled_annotation(
    annotations: dict[str, str] | None, configured: str | None, enablement: Enablement
) -> None:
    raw = raw_deployment()
    raw["metadata"]["annotations"] = annotations

    deployment = DeploymentInfo.from_object(raw, enabled_annotation=configured)

    assert deployment.enablement is enablement


@pytest.mark.parametrize(
    ("rolling_update", "replicas", "max_unavailable"),
    [
        ({"maxSurge": 1, "maxUnavailable": 0}, 1, 0),
        ({"maxSurge": 1, "maxUnavailable": 1}, 1, 1),
        ({"maxSurge": 1, "maxUnavailable": "100%"}, 1, 1),
        ({"maxSurge": 1, "maxUnavailable": 5}, 1, 1),  # capped at replicas
        ({"maxSurge": 0, "maxUnavailable": 0}, 1, 1),  # upstream's fencepost: 0, 0 is 0, 1
        ({"maxSurge": "50%", "maxUnavailable": "50%"}, 1, 0),  # rounded down
        ({}, 1, 0),  # 25% defaults
        ({"maxSurge": 1, "maxUnavailable": "x"}, 1, 0),  # unresolvable: 0, as upstream
    ],
)
def test_max_unavailable_resolves_as_upstream(
    rolling_update: dict[str, object], replicas: int, max_unavailable: int
) -> None:
    deployment = _deployment_with(
        replicas=replicas, strategy={"type": "RollingUpdate", "rollingUpdate": rolling_update}
    )

    assert deployment.max_unavailable == max_unavailable


def test_recreate_has_no_max_unavailable() -> None:
    assert _deployment_with(strategy={"type": "Recreate"}).max_unavailable == 0


def test_completed_at_and_the_template_grace_period_are_read() -> None:
    raw = raw_deployment()
    raw["metadata"]["annotations"][COMPLETED_AT_ANNOTATION] = "2024-05-01T12:00:07.250000Z"
    raw["spec"]["template"].setdefault("spec", {})["terminationGracePeriodSeconds"] = 45

    deployment = DeploymentInfo.from_object(raw)

    assert deployment.completed_at == datetime(2024, 5, 1, 12, 0, 7, 250_000, tzinfo=UTC)
    assert deployment.template_grace_period_seconds == 45


def test_deleting_paused_and_status() -> None:
    raw = raw_deployment()
    raw["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    raw["spec"]["paused"] = True
    raw["status"] = {"readyReplicas": "2"}

    deployment = DeploymentInfo.from_object(raw)

    assert deployment.deleting and deployment.paused
    assert deployment.ready_replicas == 0
    assert "status.readyReplicas" in deployment.malformed


def test_rollout_complete() -> None:
    raw = raw_deployment()
    raw["status"] = {
        "observedGeneration": 3,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
    }
    assert DeploymentInfo.from_object(raw).rollout_complete
    raw["status"]["observedGeneration"] = 2
    assert not DeploymentInfo.from_object(raw).rollout_complete
