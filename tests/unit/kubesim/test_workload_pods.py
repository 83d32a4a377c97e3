"""The pure parts of kubesim's DaemonSet, StatefulSet and Job controllers and the Job's
defaulting: which pods they make, where a daemon pod belongs, what counts as failed."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.defaults import job as default_job
from kubesim.cluster.daemonset import (
    DAEMON_TOLERATIONS,
    daemon_pod,
    daemon_tolerations,
    should_run,
    target_node,
)
from kubesim.cluster.job import TRACKING_FINALIZER, is_finished, is_pod_failed, job_pod
from kubesim.cluster.statefulset import ordinal_of, stateful_pod

Obj = dict[str, Any]
OWNER_META = {"name": "x", "namespace": "ns", "uid": "u-1", "generation": 3}


def owner(kind: str, api_version: str = "apps/v1", **spec: Any) -> Obj:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c"}]}}
    return {"apiVersion": api_version, "kind": kind, "metadata": dict(OWNER_META),
            "spec": {"template": template, **spec}}  # fmt: skip


def node(name: str, labels: dict[str, str] | None = None, taints: list[Obj] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def test_daemon_tolerations_add_what_the_template_lacks() -> None:
    own = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    custom = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    tolerations = daemon_tolerations({"tolerations": [own, custom]})
    assert tolerations[:2] == [own, custom]
    assert len(tolerations) == len(DAEMON_TOLERATIONS) + 1
    network = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
               "effect": "NoSchedule"}  # fmt: skip
    assert network not in tolerations
    assert network in daemon_tolerations({"hostNetwork": True})


def test_daemon_pod_is_pinned_to_its_node() -> None:
    pod = daemon_pod(owner("DaemonSet"), "node-a")
    assert pod["metadata"]["generateName"] == "x-"
    assert pod["metadata"]["labels"] == {"app": "x", "pod-template-generation": "3"}
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]  # fmt: skip
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                       "values": ["node-a"]}]}]  # fmt: skip
    assert target_node(pod) == "node-a"
    assert target_node({"spec": {"nodeName": "node-b", **pod["spec"]}}) == "node-b"
    assert target_node({"spec": {}}) is None


@pytest.mark.parametrize(
    ("template_spec", "candidate", "runs"),
    [
        ({}, node("n"), True),
        ({"nodeSelector": {"disk": "ssd"}}, node("n"), False),
        ({"nodeSelector": {"disk": "ssd"}}, node("n", {"disk": "ssd"}), True),
        ({}, node("n", taints=[{"key": "node.kubernetes.io/unschedulable",
                                "effect": "NoSchedule"}]), True),
        ({}, node("n", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
         False),
        ({}, node("n", taints=[{"key": "dedicated", "effect": "PreferNoSchedule"}]), True),
        ({"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
         node("n", taints=[{"key": "dedicated", "effect": "NoExecute"}]), True),
    ],
)  # fmt: skip
def test_should_run(template_spec: Obj, candidate: Obj, runs: bool) -> None:
    ds = owner("DaemonSet")
    ds["spec"]["template"]["spec"].update(template_spec)
    assert should_run(ds, candidate) is runs


def test_a_no_schedule_taint_keeps_a_running_daemon_pod() -> None:
    tainted = node("n", taints=[{"key": "dedicated", "effect": "NoSchedule"}])
    assert not should_run(owner("DaemonSet"), tainted)
    assert should_run(owner("DaemonSet"), tainted, ("NoExecute",))


def test_stateful_pod_identity() -> None:
    pod = stateful_pod(owner("StatefulSet", serviceName="svc"), 2)
    meta = pod["metadata"]
    assert meta["name"] == "x-2" and "generateName" not in meta
    assert meta["labels"] == {"app": "x", "statefulset.kubernetes.io/pod-name": "x-2",
                              "apps.kubernetes.io/pod-index": "2"}  # fmt: skip
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("x-2", "svc")


@pytest.mark.parametrize(
    ("name", "ordinal"),
    [("x-0", 0), ("x-12", 12), ("x-", None), ("x-a", None), ("xy-1", None), ("x-1-2", None)],
)
def test_ordinal_of(name: str, ordinal: int | None) -> None:
    assert ordinal_of("x", {"metadata": {"name": name}}) == ordinal


@pytest.mark.parametrize(
    ("phase", "deleting", "failed", "finished"),
    [
        ("Running", False, False, False),
        ("Running", True, True, True),  # evicted: counted as failed (isPodFailed)
        ("Pending", True, True, True),
        ("Failed", False, True, True),
        ("Succeeded", False, False, True),
        ("Succeeded", True, False, True),
    ],
)
def test_job_pod_accounting(phase: str, deleting: bool, failed: bool, finished: bool) -> None:
    meta: Obj = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pod = {"metadata": meta, "status": {"phase": phase}}
    assert (is_pod_failed(pod), is_finished(pod)) == (failed, finished)


def test_job_pod_carries_the_tracking_finalizer() -> None:
    pod = job_pod(owner("Job", "batch/v1"))
    assert pod["metadata"]["finalizers"] == [TRACKING_FINALIZER]
    assert pod["metadata"]["generateName"] == "x-"


def test_job_defaults_and_generated_selector() -> None:
    obj = owner("Job", "batch/v1")
    default_job(obj)
    spec = obj["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert spec["template"]["metadata"]["labels"] == {
        "app": "x", "batch.kubernetes.io/controller-uid": "u-1",
        "batch.kubernetes.io/job-name": "x", "controller-uid": "u-1", "job-name": "x",
    }  # fmt: skip
    manual = owner("Job", "batch/v1", manualSelector=True, parallelism=3,
                   selector={"matchLabels": {"app": "x"}})  # fmt: skip
    default_job(manual)
    assert manual["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert (manual["spec"].get("completions"), manual["spec"]["parallelism"]) == (None, 3)
