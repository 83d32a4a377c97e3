"""The numbered cases of decision table v2 (docs/decisions.md) on the real control plane: real
`kubectl drain` and evictions through kube-apiserver, the controller as its own process under
its shipped ServiceAccount. kubesim's versions are tests/e2e/controller/
test_decision_table_v2_e2e.py; each docstring says what the controller did before v2.

Where the real server cannot be made to fail on cue (a re-read failing right after a real
409), the controller talks to kube-apiserver through `ApiProxy`, which relays everything
and injects only that one answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import textwrap
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from graceful_drain.annotations import RESTARTED_AT_ANNOTATION
from graceful_drain.controller.writes.events import (
    DRAIN_CANNOT_PROTECT,
    DRAIN_CANNOT_SURGE,
    DRAIN_INVALID_ANNOTATION,
)
from kubesim.client import MERGE_PATCH, ApiStatusError, KubeClient
from kubesim.recorder import AvailabilityRecorder
from realcluster.cluster import RealCluster
from tests.e2e.cli import run_cli
from tests.e2e.controller.drain_cluster import KubectlRun
from tests.e2e.controller.drain_workloads import annotated, template_restarted_at, with_strategy
from tests.e2e.controller.replica import container_invocation
from tests.e2e.watching import MICROSECOND_STAMP, annotations_of, is_ready

from .apiproxy import ApiProxy, Seen
from .harness import (
    BOUND,
    CONTROLLER_USER,
    HELD,
    NAMESPACE,
    SERVICE_ACCOUNT,
    Installation,
    Obj,
    admin_client,
    drain,
    fresh_namespace,
    kubectl,
    kubectl_json,
    pods,
    product_checkout,
    product_source,
    refused,
    requests_of,
    settle,
    until,
    until_audited,
    until_events,
    watch_objects,
    web,
)

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

ENABLED = "graceful-drain.stonal.com/enabled"


async def apply_ready(
    cluster: RealCluster, recorder: AvailabilityRecorder, *manifests: Obj
) -> None:
    """`kubectl apply` of Deployments, until each has its one Ready pod."""
    listed = {"apiVersion": "v1", "kind": "List", "items": list(manifests)}
    await kubectl(cluster.kubeconfig_path, "apply", "-f", "-", stdin=json.dumps(listed))
    await until(recorder, lambda: all(
        recorder.ready(m["metadata"]["name"], m["metadata"]["namespace"]) >= 1 for m in manifests
    ))  # fmt: skip


async def deployment(cluster: RealCluster, namespace: str, name: str = "web") -> Obj:
    return await kubectl_json(cluster.kubeconfig_path, "get", "deployment", name, "-n", namespace)


async def until_deployment(
    cluster: RealCluster, namespace: str, predicate: Callable[[Obj], bool], name: str = "web"
) -> Obj:
    found = await watch_objects(
        cluster, "apps/v1", "deployments", "Deployment", namespace,
        lambda items: any(d["metadata"]["name"] == name and predicate(d) for d in items),
    )  # fmt: skip
    [current] = [d for d in found if d["metadata"]["name"] == name]
    return current


async def until_event(cluster: RealCluster, namespace: str, reason: str) -> Obj:
    """The one event of `reason`, once written (harness.until_events)."""
    [event] = await until_events(cluster, namespace, reason)
    return dict(event)


def evictions(cluster: RealCluster, namespace: str) -> list[tuple[str, int]]:
    """(pod, HTTP status) of each eviction kube-apiserver answered in `namespace`, in order."""
    return [
        (r["objectRef"]["name"], int(r["responseStatus"]["code"]))
        for r in cluster.audit_records()
        if (r.get("objectRef") or {}).get("subresource") == "eviction"
        and r["objectRef"].get("namespace") == namespace and r["verb"] == "create"
    ]  # fmt: skip


def pod_names(listed: list[Obj]) -> dict[str, str]:
    return {p["metadata"]["labels"]["app"]: p["metadata"]["name"] for p in listed}


def held(drained: KubectlRun, namespace: str) -> list[str]:
    """kubectl's lines of an eviction in `namespace` refused by the webhook (the node may hold
    other tests' pods, whose evictions are none of this test's business)."""
    return [line for line in drained.stderr.splitlines()
            if HELD in line and f'-n "{namespace}"' in line]  # fmt: skip


# --- case 1: maxUnavailable >= 1 ------------------------------------------------------------


async def test_max_unavailable_1_is_evicted_at_once_with_a_warning_naming_the_field(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """Before v2 the webhook answered 429 and started a rollout that, with maxUnavailable 1,
    the Deployment controller may run by removing the only Ready pod first; no warning."""
    manifest = with_strategy(web(namespace), maxSurge=1, maxUnavailable=1)
    await apply_ready(real_cluster, recorder, manifest)
    before = await deployment(real_cluster, namespace)
    replica = await installation.start_controller()
    try:
        drained = await drain(real_cluster, recorder, "node-a")
        window = await settle(recorder, namespace, "node-a")
        assert not held(drained, namespace)  # evicted at the first try
        warning = await until_event(real_cluster, namespace, DRAIN_CANNOT_PROTECT)
        cannot_protect = replica.decisions("cannot-protect", allowed=True)
    finally:
        replica.stop()

    assert drained.code == 0, drained.stderr
    assert warning["type"] == "Warning"
    assert warning["involvedObject"]["kind"] == "Deployment"
    assert warning["involvedObject"]["name"] == "web"
    assert "spec.strategy.rollingUpdate.maxUnavailable resolves to 1" in warning["message"]
    assert "set it to 0" in warning["message"]
    assert cannot_protect == 1
    after = await deployment(real_cluster, namespace)
    assert RESTARTED_AT_ANNOTATION not in annotations_of(after)
    assert after["metadata"]["generation"] == before["metadata"]["generation"]  # no rollout
    assert recorder.timeline("web", namespace).rollouts(*window) == []


# --- case 2: the enabled annotation is parsed -----------------------------------------------


async def test_in_opt_in_mode_only_true_protects_and_an_odd_value_warns(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """Before v2 any value of the annotation, "false" included, switched protection on."""
    manifests = [
        annotated(web(namespace, name), {ENABLED: value})
        for name, value in (("on", "true"), ("off", "false"), ("odd", "False"))
    ]
    await apply_ready(real_cluster, recorder, *manifests)
    names = pod_names(
        await pods(real_cluster, namespace, "on")
        + await pods(real_cluster, namespace, "off")
        + await pods(real_cluster, namespace, "odd")
    )
    replica = await installation.start_controller(
        env={"GRACEFUL_DRAIN_ENABLED_ANNOTATION": ENABLED}
    )
    try:
        drained = await drain(real_cluster, recorder, "node-a")
        start, _ = recorder.drain_window("node-a")
        await until(recorder, lambda: recorder.ready("on", namespace) >= 1)
        assert [t for t in evictions(real_cluster, namespace) if t[0] == names["odd"]] == [
            (names["odd"], 201)
        ]  # treated as disabled: evicted at the first try
        invalid = await until_event(real_cluster, namespace, DRAIN_INVALID_ANNOTATION)
        counted = {reason: replica.decisions(reason, allowed=True)
                   for reason in ("opted-out", "enabled-annotation-invalid")}  # fmt: skip
    finally:
        replica.stop()

    assert drained.code == 0, drained.stderr
    tries = evictions(real_cluster, namespace)
    assert [t for t in tries if t[0] == names["off"]] == [(names["off"], 201)]
    assert [t for t in tries if t[0] == names["odd"]] == [(names["odd"], 201)]
    assert (names["on"], 429) in tries  # held for its replacement
    assert recorder.timeline("on", namespace).zero_ready_seconds(start, recorder.clock()) == 0
    assert counted == {"opted-out": 1, "enabled-annotation-invalid": 1}
    assert invalid["type"] == "Warning"
    assert invalid["involvedObject"]["name"] == "odd"
    assert "'False'" in invalid["message"] and "treated as disabled" in invalid["message"]
    for name in ("off", "odd"):
        kept = await deployment(real_cluster, namespace, name)
        assert RESTARTED_AT_ANNOTATION not in annotations_of(kept)


async def test_without_opt_in_a_deployment_opts_out_with_false(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """Before v2 there was no opt-out: with no --enabled-annotation every singleton was held."""
    await apply_ready(real_cluster, recorder, annotated(web(namespace), {ENABLED: "false"}))
    [pod] = await pods(real_cluster, namespace)
    replica = await installation.start_controller()
    try:
        drained = await drain(real_cluster, recorder, "node-a")
        opted_out = replica.decisions("opted-out", allowed=True)
    finally:
        replica.stop()

    assert drained.code == 0, drained.stderr
    assert not held(drained, namespace)
    assert evictions(real_cluster, namespace) == [(pod["metadata"]["name"], 201)]
    assert opted_out == 1
    assert RESTARTED_AT_ANNOTATION not in annotations_of(await deployment(real_cluster, namespace))


# --- case 3: scoped installs ----------------------------------------------------------------


@contextlib.asynccontextmanager
async def scoped_rbac(installation: Installation, namespace: str) -> AsyncIterator[None]:
    """docs/install.md's scoped RBAC: the ClusterRole bound in `namespace` only (the
    ClusterRoleBinding deleted, a RoleBinding added). The full install is re-applied after."""
    kubeconfig = installation.kubeconfig
    await kubectl(kubeconfig, "delete", "clusterrolebinding", "graceful-drain")
    try:
        await kubectl(
            kubeconfig, "create", "rolebinding", "graceful-drain", "-n", namespace,
            "--clusterrole=graceful-drain", f"--serviceaccount={NAMESPACE}:{SERVICE_ACCOUNT}",
        )  # fmt: skip
        yield
    finally:
        await installation.reapply()


async def test_an_eviction_outside_the_controllers_namespaces_is_allowed_and_counted(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """--namespaces names another namespace, the RBAC is narrowed to it, the webhook is still
    asked about every namespace: before v2 the pod's live GET was refused (403) and the
    eviction answered 429 on every retry, a drain wedged until its --timeout."""
    await apply_ready(real_cluster, recorder, web(namespace))
    [pod] = await pods(real_cluster, namespace)
    async with fresh_namespace(real_cluster) as scope, scoped_rbac(installation, scope):
        since = datetime.now(UTC)
        replica = await installation.start_controller(env={"GRACEFUL_DRAIN_NAMESPACES": scope})
        try:
            drained = await drain(real_cluster, recorder, "node-a")
            counted = replica.decisions("namespace-out-of-scope", allowed=True)
            cold = replica.decisions("cache-cold", allowed=False)
        finally:
            replica.stop()
        records = requests_of(real_cluster, CONTROLLER_USER, since)

    assert drained.code == 0, drained.stderr
    assert not held(drained, namespace)
    assert evictions(real_cluster, namespace) == [(pod["metadata"]["name"], 201)]
    assert (counted, cold) == (1, 0)
    assert records, "the controller made no request"
    assert refused(records) == []  # the pod outside the scope was never read


def scoped_overlay(installation: Installation, namespaces: list[str]) -> Path:
    """docs/install.md's "Scoped install" on top of this cluster's install
    (installation.overlay): a copy of deploy/components/namespace-scope with its two lists
    edited, and in the same kustomization the ClusterRoleBinding deleted and a RoleBinding of
    the ClusterRole added in each namespace."""
    directory = installation.workdir / f"scoped-{secrets.token_hex(3)}"
    component = directory / "namespace-scope"
    shutil.copytree(product_checkout() / "deploy" / "components" / "namespace-scope", component)
    text = (component / "kustomization.yaml").read_text()
    edited = text.replace('"team-a,team-b"', '"' + ",".join(namespaces) + '"').replace(
        '["team-a", "team-b"]', "[" + ", ".join(f'"{n}"' for n in namespaces) + "]"
    )
    assert edited.count(namespaces[0]) == 2, "the component's two lists moved"
    (component / "kustomization.yaml").write_text(edited)
    bindings = [{
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "graceful-drain", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "graceful-drain"},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                      "namespace": NAMESPACE}],
    } for namespace in namespaces]  # fmt: skip
    (directory / "rolebindings.yaml").write_text(
        "\n---\n".join(json.dumps(binding) for binding in bindings)
    )
    (directory / "kustomization.yaml").write_text(textwrap.dedent(f"""\
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        resources:
          - ../{installation.overlay.name}
          - rolebindings.yaml
        components:
          - namespace-scope
        patches:
          - patch: |-
              $patch: delete
              apiVersion: rbac.authorization.k8s.io/v1
              kind: ClusterRoleBinding
              metadata:
                name: graceful-drain
        """))  # fmt: skip
    return directory


async def test_the_scoped_install_recipe_protects_its_namespace_and_leaves_others_alone(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """The recipe applied with real kubectl: the controller's scope comes from the component's
    environment variable, kube-apiserver's namespaceSelector from its list, the RBAC is bound
    in the scoped namespace only. An eviction elsewhere never reaches the webhook (before v2
    the shipped kustomize had no way to narrow the selector)."""
    async with fresh_namespace(real_cluster) as other:
        elsewhere = web(other, "solo")
        await apply_ready(real_cluster, recorder, web(namespace))
        await kubectl(real_cluster.kubeconfig_path, "apply", "-f", "-",
                      stdin=json.dumps(elsewhere))  # fmt: skip
        await watch_objects(real_cluster, "v1", "pods", "Pod", other,
                            lambda items: any(is_ready(p) for p in items))  # fmt: skip
        [outside] = await pods(real_cluster, other, "solo")
        overlay = scoped_overlay(installation, [namespace])
        try:
            await kubectl(installation.kubeconfig, "apply", "-k", str(overlay))
            # kubectl apply creates and changes, it never deletes: the binding the full
            # install created goes by hand, as docs/install.md says.
            await kubectl(installation.kubeconfig, "delete", "clusterrolebinding",
                          "graceful-drain")  # fmt: skip
            hook = await kubectl_json(
                installation.kubeconfig, "get", "validatingwebhookconfiguration",
                "graceful-drain",
            )  # fmt: skip
            _, env, _ = container_invocation(
                await installation.controller_deployment(), "graceful-drain-0"
            )
            reads_elsewhere = await kubectl(
                installation.kubeconfig, "auth", "can-i", "get", "pods", "-n", other,
                f"--as={CONTROLLER_USER}", check=False,
            )  # fmt: skip
            since = datetime.now(UTC)
            replica = await installation.start_controller()
            try:
                drained = await drain(real_cluster, recorder, "node-a")
                window = await settle(recorder, namespace, "node-a")
                total = replica.decisions(allowed=True) + replica.decisions(allowed=False)
                out_of_scope = replica.decisions("namespace-out-of-scope", allowed=True)
            finally:
                replica.stop()
            records = requests_of(real_cluster, CONTROLLER_USER, since)
        finally:
            await installation.reapply()
        restored = container_invocation(await installation.controller_deployment(), "x")[1]

    assert env["GRACEFUL_DRAIN_NAMESPACES"] == namespace
    assert reads_elsewhere.stdout.strip() == "no"  # the RBAC is bound in `namespace` only
    selector = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
    assert hook["webhooks"][0]["namespaceSelector"] == {"matchExpressions": [selector]}
    assert drained.code == 0, drained.stderr
    assert recorder.timeline("web", namespace).zero_ready_seconds(*window) == 0  # protected
    assert evictions(real_cluster, other) == [(outside["metadata"]["name"], 201)]
    # Only the scoped namespace's evictions were sent to the webhook.
    assert total == len(evictions(real_cluster, namespace)) > 1
    assert out_of_scope == 0
    assert refused(records) == []
    assert "GRACEFUL_DRAIN_NAMESPACES" not in restored  # the full install is back


async def test_a_namespace_list_naming_none_stops_the_controller_with_exit_2(
    installation: Installation,
) -> None:
    """Before v2 `--namespaces ,,` meant "every namespace", the opposite of a scoped install."""
    args, env, _ = container_invocation(await installation.controller_deployment(), "x")
    kubeconfig = await installation.service_account_kubeconfig("empty-scope")
    code, _, err = await run_cli(
        "controller", *args, "--kubeconfig", str(kubeconfig), "--namespaces", ",,",
        env={"PATH": "/usr/bin:/bin", **env}, bound=BOUND, source=product_source(),
    )  # fmt: skip

    assert code == 2, err.decode()
    assert "--namespaces (GRACEFUL_DRAIN_NAMESPACES): ',,' names no namespace" in err.decode()


# --- case 4: a Deployment paused during our rollout -----------------------------------------


async def test_a_deployment_paused_during_our_rollout_keeps_its_ready_pod(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """Before v2 row 11 (paused) allowed the next retry at once: the old pod went while the
    surge pod was seconds from Ready. The real Deployment controller keeps a paused
    Deployment's status (readyReplicas) current, which is what releases the drain."""
    await apply_ready(real_cluster, recorder, web(namespace, ready_delay="12s"))
    replica = await installation.start_controller()
    try:
        draining = asyncio.create_task(drain(real_cluster, recorder, "node-a"))
        await until_deployment(real_cluster, namespace,
                               lambda d: (d.get("status") or {}).get("replicas") == 2)  # fmt: skip
        await kubectl(real_cluster.kubeconfig_path, "patch", "deployment", "web", "-n",
                      namespace, "--type=merge", "-p", '{"spec": {"paused": true}}')  # fmt: skip
        drained = await draining
        window = await settle(recorder, namespace, "node-a")
        held = replica.decisions("rollout-in-progress", allowed=False)
        cannot_surge = replica.decisions("cannot-surge", allowed=True)
    finally:
        replica.stop()

    assert drained.code == 0, drained.stderr
    assert recorder.timeline("web", namespace).zero_ready_seconds(*window) == 0
    assert cannot_surge == 0
    assert held >= 1
    paused = await deployment(real_cluster, namespace)
    assert paused["spec"]["paused"] is True
    stamp = annotations_of(paused)[RESTARTED_AT_ANNOTATION]
    assert MICROSECOND_STAMP.fullmatch(stamp), stamp  # case 7: sub-second precision
    assert template_restarted_at(paused) == stamp


def is_template_copy(seen: Seen, namespace: str) -> bool:
    return seen.is_("PATCH", f"/namespaces/{namespace}/deployments/web") and (
        b"/spec/template" in seen.body
    )


async def test_a_stamp_never_reaches_the_template_of_a_deployment_paused_before_the_copy(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """The webhook stamps, the reconciler's copy into the template is refused (503) by the
    proxy until the Deployment is paused and the controller has been sent that change.
    Before v2 the reconciler then copied the restart into the paused template: nothing
    rolled out, but the Deployment restarted whenever someone resumed it."""
    await apply_ready(real_cluster, recorder, web(namespace))
    proxy = await ApiProxy(real_cluster.server, real_cluster.ca_pem).start()
    blocking = True

    async def hold_the_copy(seen: Seen) -> int | None:
        return 503 if blocking and is_template_copy(seen, namespace) else None

    proxy.rules.append(hold_the_copy)
    replica = await installation.start_controller(api=proxy)
    try:
        draining = asyncio.create_task(drain(real_cluster, recorder, "node-a"))
        async with asyncio.timeout(BOUND):
            await proxy.until(lambda: any(is_template_copy(s, namespace) for s in proxy.seen))
        await kubectl(real_cluster.kubeconfig_path, "patch", "deployment", "web", "-n",
                      namespace, "--type=merge", "-p", '{"spec": {"paused": true}}')  # fmt: skip
        async with asyncio.timeout(BOUND):  # until the controller's watch was sent the pause
            await proxy.until(lambda: any(
                path.endswith("/deployments") and b'"paused":true' in chunk
                for path, chunk in proxy.relayed
            ))  # fmt: skip
        blocking = False
        unstamped = await until_deployment(
            real_cluster, namespace,
            lambda d: RESTARTED_AT_ANNOTATION not in annotations_of(d)
            or template_restarted_at(d) is not None,
        )  # fmt: skip  # the stamp abandoned, or (before v2) copied into the paused template
        drained = await draining
        await until_event(real_cluster, namespace, DRAIN_CANNOT_SURGE)
        cannot_surge = replica.decisions("cannot-surge", allowed=True)
    finally:
        replica.stop()
        await proxy.stop()
    await kubectl(real_cluster.kubeconfig_path, "patch", "deployment", "web", "-n", namespace,
                  "--type=merge", "-p", '{"spec": {"paused": false}}')  # fmt: skip
    resumed = await until_deployment(real_cluster, namespace, lambda d: (
        (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"]
        and not d["spec"].get("paused")
    ))  # fmt: skip

    assert drained.code == 0, drained.stderr
    assert template_restarted_at(unstamped) is None
    assert template_restarted_at(resumed) is None  # resuming it restarts nothing
    assert cannot_surge >= 1
    await until(recorder, lambda: recorder.ready("web", namespace) >= 1)
    assert len(recorder.timeline("web", namespace).rollouts()) == 1  # the one it began with


# --- case 5: a 409 on the stamp, then a failed re-read ---------------------------------------


async def test_a_real_conflict_then_a_failed_reread_holds_the_eviction_and_is_counted(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """Someone changes the Deployment just before the stamp lands: kube-apiserver answers the
    stamp's resourceVersion-guarded JSON patch 409; the re-read that follows fails (503,
    injected by the proxy). Before v2 that landed in "owner unresolved": the pod was evicted
    with no replacement on the way."""
    await apply_ready(real_cluster, recorder, web(namespace))
    proxy = await ApiProxy(real_cluster.server, real_cluster.ca_pem).start()
    admin = admin_client(real_cluster, "someone-else")
    target = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    happened: list[str] = []

    async def conflict_then_unreadable(seen: Seen) -> int | None:
        if not happened and seen.is_("PATCH", target):
            await admin.patch(target, {"metadata": {"annotations": {"example.com/touched": "1"}}},
                              MERGE_PATCH)  # fmt: skip
            happened.append("changed")
            return None  # relayed: the real server answers the stale stamp
        if happened == ["changed"] and seen.is_("GET", target):
            happened.append("re-read refused")
            return 503
        return None

    proxy.rules.append(conflict_then_unreadable)
    since = datetime.now(UTC)
    replica = await installation.start_controller(api=proxy)
    try:
        drained = await drain(real_cluster, recorder, "node-a")
        window = await settle(recorder, namespace, "node-a")
        reread_failed = replica.decisions("reread-failed", allowed=False)
    finally:
        replica.stop()
        await proxy.stop()
        await admin.close()
    conflict = await until_audited(real_cluster, lambda r: (
        r["user"]["username"] == CONTROLLER_USER and r["verb"] == "patch"
        and datetime.fromisoformat(r["requestReceivedTimestamp"]) >= since
        and (r.get("objectRef") or {}).get("namespace") == namespace
    ))  # fmt: skip

    assert happened == ["changed", "re-read refused"]
    assert conflict["responseStatus"]["code"] == 409  # the real server's answer to the stamp
    assert drained.code == 0, drained.stderr
    assert "could not be read again" in drained.stderr
    assert reread_failed == 1
    assert recorder.timeline("web", namespace).zero_ready_seconds(*window) == 0
    assert len(recorder.timeline("web", namespace).rollouts(*window)) == 1


# --- case 6: only a policy Eviction of a real pod is decided --------------------------------


async def test_evictions_of_both_served_versions_are_held_and_invalid_names_are_not_looked_up(
    installation: Installation, real_cluster: RealCluster, namespace: str,
    recorder: AvailabilityRecorder,
) -> None:  # fmt: skip
    """The kind check (row 2) must not let a real eviction through: kube-apiserver sends
    pods/eviction reviews of kind policy Eviction for every body version it serves, and a
    protected pod is held whichever the client used. kube-apiserver asks the webhook before
    it looks the pod up, so an eviction naming no valid pod reaches it too: before v2 the
    controller looked that name up live; now it is allowed unread (row 2)."""
    await apply_ready(real_cluster, recorder, web(namespace))
    [pod] = await pods(real_cluster, namespace)
    name = pod["metadata"]["name"]
    admin = admin_client(real_cluster, "eviction-versions")
    since = datetime.now(UTC)
    replica = await installation.start_controller()
    codes: dict[str, int] = {}
    try:
        for version in ("policy/v1", "policy/v1beta1"):
            codes[version] = await post_eviction(admin, namespace, name, version)
        codes[INVALID_NAME] = await post_eviction(admin, namespace, INVALID_NAME)
        counted = {
            reason: replica.decisions(reason, allowed=allowed)
            for reason, allowed in (
                ("rollout-requested", False), ("rollout-in-progress", False),
                ("invalid-name", True), ("not-eviction", True),
            )
        }  # fmt: skip
        log = [line for line in replica.log_lines() if INVALID_NAME in json.dumps(line)]
    finally:
        replica.stop()
        await admin.close()
    lookups = [
        r["requestURI"] for r in requests_of(real_cluster, CONTROLLER_USER, since)
        if (r.get("objectRef") or {}).get("name") == INVALID_NAME
    ]  # fmt: skip

    assert codes == {"policy/v1": 429, "policy/v1beta1": 429, INVALID_NAME: 404}
    assert counted == {"rollout-requested": 1, "rollout-in-progress": 1, "invalid-name": 1,
                       "not-eviction": 0}, log  # fmt: skip
    assert lookups == []  # decided without reading it


INVALID_NAME = "Web_1.x"  # no DNS subdomain: no pod can have it


async def post_eviction(
    admin: KubeClient, namespace: str, name: str, version: str = "policy/v1"
) -> int:
    """The HTTP status kube-apiserver answers an Eviction of `name` in a `version` body."""
    body = {"apiVersion": version, "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace}}  # fmt: skip
    try:
        await admin.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body)
    except ApiStatusError as error:
        return int(error.code)
    return 201
