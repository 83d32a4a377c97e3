"""The cases of decision table v2 (docs/decisions.md), each through a real `kubectl drain`.

See drain_cluster.py for what runs for real. Each test would have failed before v2: the
docstring says how.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from graceful_drain.annotations import COMPLETED_AT_ANNOTATION, RESTARTED_AT_ANNOTATION
from graceful_drain.controller.writes.events import (
    DRAIN_CANNOT_PROTECT,
    DRAIN_CANNOT_SURGE,
    DRAIN_COMPLETED,
    DRAIN_INVALID_ANNOTATION,
)
from graceful_drain.termination.detector import Detector, DetectorConfig
from graceful_drain.termination.identity import PodIdentity
from graceful_drain.termination.verdict import Action, Cause, Fact, Source
from kubesim.apiserver.faults import FaultRule
from kubesim.client import STRATEGIC_MERGE_PATCH, resource_path
from kubesim.sim import KubeSim
from kubesim.watchlog import watch_until
from tests.e2e.watching import MICROSECOND_STAMP, annotations_of, is_ready

from .drain_cluster import DrainCluster, Obj, drain_cluster
from .drain_workloads import (
    TemplateRestartBlocker,
    annotated,
    template_restarted_at,
    web,
    with_strategy,
)
from .installed import BOUND, CONTROLLER_USER, DEPLOY, NAMESPACE, SERVICE_ACCOUNT, WORKLOADS

pytestmark = pytest.mark.e2e

ENABLED = "graceful-drain.stonal.com/enabled"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


async def patch_spec(cluster: DrainCluster, spec: Obj, name: str = "web") -> None:
    await cluster.admin.patch(f"{DEPLOYMENTS}/{name}", {"spec": spec}, STRATEGIC_MERGE_PATCH)


def evictions(sim: KubeSim, namespace: str = WORKLOADS) -> list[tuple[str, int]]:
    return [
        (r.name, r.code)
        for r in sim.audit.records(user="kubernetes-admin")
        if r.subresource == "eviction" and r.namespace == namespace
    ]


# --- case 1: maxUnavailable >= 1 ------------------------------------------------------------


async def test_max_unavailable_1_is_evicted_at_once_with_a_warning_naming_the_field(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Before v2 the webhook started a rollout that, with maxUnavailable 1, could take the
    only Ready pod away anyway: an outage behind a 429, and no warning."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        created = await cluster.create(with_strategy(web(), maxSurge=1, maxUnavailable=1))
        await cluster.until(lambda: cluster.recorder.ready("web", WORKLOADS) >= 1)

        drained = await cluster.kubectl_drain("node-a")
        warning = await cluster.until_event(DRAIN_CANNOT_PROTECT)

        assert drained.code == 0, drained.stderr
        assert "will retry" not in drained.stderr
        assert warning["type"] == "Warning"
        assert "spec.strategy.rollingUpdate.maxUnavailable resolves to 1" in warning["message"]
        assert "set it to 0" in warning["message"]
        assert replica.decisions("cannot-protect", allowed=True) == 1
        deployment = await cluster.deployment()
        assert RESTARTED_AT_ANNOTATION not in annotations_of(deployment)
        assert deployment["metadata"]["generation"] == created["metadata"]["generation"]


# --- case 2: the enabled annotation is parsed -----------------------------------------------


async def test_in_opt_in_mode_only_true_protects_and_an_odd_value_warns(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Before v2 any value, "false" included, switched protection on."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica(env={"GRACEFUL_DRAIN_ENABLED_ANNOTATION": ENABLED})
        for name, value in (("on", "true"), ("off", "false"), ("odd", "False")):
            await cluster.create(annotated(web(name), {ENABLED: value}))
        await cluster.until(
            lambda: all(cluster.recorder.ready(n, WORKLOADS) >= 1 for n in ("on", "off", "odd"))
        )
        pods = {p["metadata"]["labels"]["app"]: p["metadata"]["name"] for p in await cluster.pods()}

        drained = await cluster.kubectl_drain("node-a")
        window = await cluster.settle_after_drain("node-a", "on")
        invalid = await cluster.until_event(DRAIN_INVALID_ANNOTATION)

        assert drained.code == 0, drained.stderr
        tries = evictions(sim)
        assert (
            tries.count((pods["off"], 201)) == 1
            and len([t for t in tries if t[0] == pods["off"]]) == 1
        )  # evicted at the first try
        assert [t for t in tries if t[0] == pods["odd"]] == [(pods["odd"], 201)]
        assert (pods["on"], 429) in tries  # held for its replacement
        assert cluster.zero_ready_seconds(window, "on") == 0
        assert replica.decisions("opted-out", allowed=True) == 1
        assert replica.decisions("enabled-annotation-invalid", allowed=True) == 1
        assert invalid["involvedObject"]["name"] == "odd"
        assert "'False'" in invalid["message"] and "treated as disabled" in invalid["message"]
        for name in ("off", "odd"):
            assert RESTARTED_AT_ANNOTATION not in annotations_of(await cluster.deployment(name))


async def test_without_opt_in_a_deployment_opts_out_with_false(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Before v2 there was no opt-out: with no --enabled-annotation every singleton was held."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        await cluster.create(annotated(web(), {ENABLED: "false"}))
        await cluster.until(lambda: cluster.recorder.ready("web", WORKLOADS) >= 1)
        [pod] = await cluster.pods("web")

        drained = await cluster.kubectl_drain("node-a")

        assert drained.code == 0, drained.stderr
        assert "will retry" not in drained.stderr
        assert evictions(sim) == [(pod["metadata"]["name"], 201)]
        assert replica.decisions("opted-out", allowed=True) == 1
        assert RESTARTED_AT_ANNOTATION not in annotations_of(await cluster.deployment())


# --- case 3: scoped installs ----------------------------------------------------------------


async def narrow_rbac_to(cluster: DrainCluster, namespace: str) -> None:
    """docs/install.md's scoped RBAC: the ClusterRole bound in `namespace` only."""
    await cluster.admin.delete(
        resource_path("rbac.authorization.k8s.io/v1", "clusterrolebindings", None, "graceful-drain")
    )
    if cluster.sim.get("v1", "Namespace", namespace) is None:
        await cluster.admin.create(
            resource_path("v1", "namespaces", None),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        )
    await cluster.admin.create(
        resource_path("rbac.authorization.k8s.io/v1", "rolebindings", namespace),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "graceful-drain", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "graceful-drain"},
            "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                          "namespace": NAMESPACE}],
        },
    )  # fmt: skip


async def test_an_eviction_outside_the_controllers_namespaces_is_allowed_and_counted(
    sim: KubeSim, tmp_path: Path
) -> None:
    """--namespaces shop with the RBAC narrowed to it, the webhook still asked about every
    namespace: before v2 the pod's live GET got 403 and CACHE_COLD answered 429 on every retry."""
    async with drain_cluster(sim, tmp_path) as cluster:
        await narrow_rbac_to(cluster, "shop")
        replica = await cluster.start_replica(env={"GRACEFUL_DRAIN_NAMESPACES": "shop"})
        await cluster.create_web()
        [pod] = await cluster.pods("web")

        drained = await cluster.kubectl_drain("node-a")

        assert drained.code == 0, drained.stderr
        assert "will retry" not in drained.stderr
        assert evictions(sim) == [(pod["metadata"]["name"], 201)]
        assert replica.decisions("namespace-out-of-scope", allowed=True) == 1
        assert replica.decisions("cache-cold", allowed=False) == 0
    # drain_cluster checked on the way out that the controller was never refused (403).


def scoped_overlay(directory: Path, namespaces: list[str]) -> Path:
    """The recipe of docs/install.md: deploy/ plus a copy of the namespace-scope component,
    its two lists edited together."""
    overlay = directory / "overlay"
    component = overlay / "namespace-scope"
    shutil.copytree(DEPLOY / "components" / "namespace-scope", component)
    text = (component / "kustomization.yaml").read_text()
    text = text.replace('"team-a,team-b"', '"' + ",".join(namespaces) + '"')
    text = text.replace('["team-a", "team-b"]', "[" + ", ".join(f'"{n}"' for n in namespaces) + "]")
    (component / "kustomization.yaml").write_text(text)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(DEPLOY, overlay)}\n"
        "components:\n  - namespace-scope\n"
    )
    return overlay


async def test_the_scoped_install_sets_the_scope_and_the_webhook_selector_together(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Before v2 the shipped kustomize had no way to narrow the webhook's namespaceSelector:
    every eviction in every other namespace was still sent to the webhook."""
    overlay = scoped_overlay(tmp_path, [WORKLOADS])
    async with drain_cluster(sim, tmp_path, kustomization=overlay) as cluster:
        replica = await cluster.start_replica()
        assert replica.app.config.namespaces == (WORKLOADS,)
        [hook] = (await cluster.webhook_configuration())["webhooks"]
        assert hook["namespaceSelector"]["matchExpressions"] == [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [WORKLOADS]}
        ]
        await cluster.create_web()
        await cluster.admin.create(
            resource_path("v1", "namespaces", None),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}},
        )
        elsewhere = web("solo")
        elsewhere["metadata"]["namespace"] = "other"
        await cluster.create(elsewhere)
        await watch_until(
            cluster.admin, "v1", "pods", "Pod", "other",
            lambda items: any(is_ready(p) for p in items),
        )  # fmt: skip

        drained = await cluster.kubectl_drain("node-a")
        window = await cluster.settle_after_drain("node-a")

        assert drained.code == 0, drained.stderr
        assert cluster.zero_ready_seconds(window) == 0  # the scoped namespace is protected
        assert [code for _, code in evictions(sim, "other")] == [201]
        reviewed = {c.review["request"]["namespace"] for c in sim.admission.calls if c.review}
        assert reviewed == {WORKLOADS}  # "other" was never sent to the webhook


# --- case 4: a Deployment paused during our rollout -----------------------------------------


async def test_a_deployment_paused_during_our_rollout_keeps_its_ready_pod(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Before v2 CANNOT_SURGE (paused) allowed the next retry at once: the old pod went while the
    surge pod was seconds from Ready."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        await cluster.create_web(ready_delay="6.5s")  # Ready after kubectl's first retry

        drain = asyncio.create_task(cluster.kubectl_drain("node-a"))
        await cluster.until_deployment(lambda d: (d.get("status") or {}).get("replicas") == 2)
        await patch_spec(cluster, {"paused": True})  # the surge pod exists, not Ready yet
        drained = await drain
        window = await cluster.settle_after_drain("node-a")

        assert drained.code == 0, drained.stderr
        assert cluster.zero_ready_seconds(window) == 0
        assert replica.decisions("cannot-surge", allowed=True) == 0
        assert replica.decisions("rollout-in-progress", allowed=False) >= 1
        deployment = await cluster.deployment()
        assert deployment["spec"]["paused"] is True
        stamp = annotations_of(deployment)[RESTARTED_AT_ANNOTATION]
        assert MICROSECOND_STAMP.fullmatch(stamp), stamp  # case 7: sub-second precision
        assert template_restarted_at(deployment) == stamp


async def test_a_stamp_never_reaches_the_template_of_a_deployment_paused_before_the_copy(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Before v2 the reconciler copied the restart into the paused template: nothing rolled
    out then, but the Deployment restarted whenever someone resumed it."""
    async with drain_cluster(sim, tmp_path) as cluster:
        blocker = TemplateRestartBlocker(sim)  # the webhook stamps, the copy is held back
        replica = await cluster.start_replica()
        await cluster.create_web()

        drain = asyncio.create_task(cluster.kubectl_drain("node-a"))
        await cluster.until_stamped()
        async with asyncio.timeout(BOUND):
            await blocker.attempts.wait()
        await patch_spec(cluster, {"paused": True})
        [deployments] = replica.app.cache.deployments.informers
        async with asyncio.timeout(BOUND):
            await deployments.wait_for(
                lambda: getattr(replica.app.cache.deployment(WORKLOADS, "web"), "paused", False)
            )
        blocker.blocking = False
        unstamped = await cluster.until_unstamped()
        drained = await drain
        await cluster.until_event(DRAIN_CANNOT_SURGE)
        await patch_spec(cluster, {"paused": False})
        resumed = await cluster.until_deployment(
            lambda d: (
                (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"]
                and not d["spec"].get("paused")
            )
        )

        assert drained.code == 0, drained.stderr
        assert template_restarted_at(unstamped) is None
        assert template_restarted_at(resumed) is None  # resuming it restarts nothing
        assert replica.decisions("cannot-surge", allowed=True) >= 1


# --- case 5: a 409 on the stamp, then a failed re-read ---------------------------------------


async def test_a_conflict_then_a_failed_reread_holds_the_eviction_and_is_counted(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Before v2 the failed re-read landed in "owner unresolved": the pod was evicted with
    no replacement on the way."""
    async with drain_cluster(sim, tmp_path) as cluster:
        replica = await cluster.start_replica()
        await cluster.create_web()
        sim.faults.add(FaultRule(verb="patch", resource="deployments", user=CONTROLLER_USER,
                                 error_code=409, remaining=1))  # fmt: skip
        sim.faults.add(FaultRule(verb="get", resource="deployments", user=CONTROLLER_USER,
                                 error_code=503, remaining=1))  # fmt: skip

        drained = await cluster.kubectl_drain("node-a")
        window = await cluster.settle_after_drain("node-a")
        await cluster.until_event(DRAIN_COMPLETED)

        assert drained.code == 0, drained.stderr
        assert "could not be read again" in drained.stderr
        assert replica.decisions("reread-failed", allowed=False) == 1
        assert cluster.zero_ready_seconds(window) == 0
        assert len(cluster.rollouts(window)) == 1


# --- case 8 (and 7): the detector reads a graceful-drain replacement as voluntary ------------


async def test_the_replaced_pod_reads_as_voluntary_after_the_real_reconciler_completed(
    sim: KubeSim, tmp_path: Path
) -> None:
    """Before v2 the reconciler removed restarted-at the moment the rollout completed, i.e.
    when the old pod started terminating: a detector that could not read its own pod object
    any more found no marker and answered indeterminate (shed load, exit 11)."""
    async with drain_cluster(sim, tmp_path) as cluster:
        await cluster.start_replica()
        deployment = web()
        deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 120
        await cluster.create(deployment)
        await cluster.until(lambda: cluster.recorder.ready("web", WORKLOADS) >= 1)
        [old] = await cluster.pods("web")

        drained = await cluster.kubectl_drain("node-a")
        await cluster.until_event(DRAIN_COMPLETED)
        await watch_until(
            cluster.admin, "v1", "pods", "Pod", WORKLOADS,
            lambda items: all(p["metadata"]["uid"] != old["metadata"]["uid"] for p in items),
        )  # fmt: skip  # the old pod's object is gone
        detector = Detector(
            PodIdentity(
                name=old["metadata"]["name"], namespace=WORKLOADS, uid=old["metadata"]["uid"],
                node_name=old["spec"]["nodeName"], name_source="test", namespace_source="test",
            ),
            DetectorConfig(grace_period_seconds=120, kubeconfig=sim.kubeconfig_path),
        )  # fmt: skip
        verdict = await detector.detect()
        kept = await cluster.deployment()

        assert drained.code == 0, drained.stderr
        assert (verdict.cause, verdict.action) == (Cause.VOLUNTARY, Action.DRAIN_GRACEFULLY)
        deciding = verdict.deciding_item
        assert (deciding.source, deciding.fact) == (Source.OWNER, Fact.ROLLOUT_MARKER)
        stamp = annotations_of(kept)[RESTARTED_AT_ANNOTATION]
        assert MICROSECOND_STAMP.fullmatch(stamp), stamp  # case 7: sub-second precision
        assert dict(deciding.values)["restarted_at"] == stamp
        # Kept as evidence until the old pod's grace period (120s) after completion is over.
        assert MICROSECOND_STAMP.fullmatch(annotations_of(kept)[COMPLETED_AT_ANNOTATION])
