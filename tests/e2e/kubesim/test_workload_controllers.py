"""The Deployment, ReplicaSet and disruption controllers, end to end through kubesim's API.

There is no scheduler or kubelet here: `PodPlayer` plays both through the API
(pods/binding, then pods/status Ready; a terminating pod is finished with a
grace-period-0 delete), as the real ones would. Timelines come from watches, so
"two Ready pods before the old one terminates" is read off the event order, not
off the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import pytest

from kubesim.apiserver.meta import rfc3339
from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.cluster.cluster import COMPONENTS, Cluster, ComponentSpec
from kubesim.cluster.disruption import DisruptionController
from kubesim.cluster.runtime import Informer, key_of
from kubesim.sim import KubeSim
from tests.e2e.watching import is_ready

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
T = TypeVar("T")
NS = "default"
APP = {"app": "web"}
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
DEADLINE = 20.0


# --- helpers ------------------------------------------------------------------------------


async def eventually(
    check: Callable[[], Awaitable[T | None]], what: str, within: float = DEADLINE
) -> T:
    """Poll `check` on the API every 20 ms until it returns something truthy, or fail."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = await check()
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def owner_name(obj: Obj) -> str | None:
    refs = obj["metadata"].get("ownerReferences") or []
    return next((str(r["name"]) for r in refs if r.get("controller")), None)


def ready_status(pod: Obj) -> Obj:
    now = rfc3339(dt.datetime.now(dt.UTC))
    names = [c["name"] for c in pod["spec"]["containers"]]
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for t in (
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        )
    ]
    return {
        **(pod.get("status") or {}),
        "phase": "Running",
        "conditions": conditions,
        "startTime": now,
        "containerStatuses": [
            {
                "name": n,
                "ready": True,
                "restartCount": 0,
                "started": True,
                "image": "nginx",
                "imageID": "",
                "state": {"running": {"startedAt": now}},
            }
            for n in names
        ],
    }


class PodPlayer:
    """Scheduler and kubelet stand-in: binds pods to `node`, makes them Running and Ready
    (those `ready` accepts) and finishes graceful deletions (while `finish_deletions`)."""

    def __init__(
        self,
        client: KubeClient,
        node: str = "node-a",
        ready: Callable[[Obj], bool] = lambda _pod: True,
    ) -> None:
        self.client = client
        self.node = node
        self.ready = ready
        self.finish_deletions = True
        self.informer = Informer(client, "v1", "pods", "Pod", namespace=NS)
        self.informer.add_handler(lambda _t, pod, _old: self._queue.put_nowait(key_of(pod)))
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> PodPlayer:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self.informer.run()), loop.create_task(self._work())]
        await self.informer.synced.wait()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            pod = self.informer.get(*key)
            if pod is None:
                continue
            with contextlib.suppress(ApiStatusError):
                await self._step(pod)

    async def _step(self, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp"):
            if self.finish_deletions:
                await self.client.delete(
                    resource_path("v1", "pods", NS, name), {"gracePeriodSeconds": 0}
                )
        elif not pod["spec"].get("nodeName"):
            await self.client.create(
                resource_path("v1", "pods", NS, name, "binding"),
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
                },
            )
        elif not is_ready(pod) and self.ready(pod):
            await self.make_ready(pod)

    def release(self) -> None:
        """Look at every pod again (after `ready` or `finish_deletions` changed)."""
        for pod in self.informer.items():
            self._queue.put_nowait(key_of(pod))

    async def make_ready(self, pod: Obj) -> None:
        body = {**pod, "status": ready_status(pod)}
        meta = pod["metadata"]
        await self.client.replace(resource_path("v1", "pods", NS, meta["name"], "status"), body)


@dataclass
class Moment:
    """The pods in the namespace right after one watch event."""

    event: str
    pod: str
    ready: frozenset[str]
    terminating: frozenset[str]
    present: frozenset[str]


@dataclass
class Timeline:
    moments: list[Moment] = field(default_factory=list)

    def first(self, predicate: Callable[[Moment], bool]) -> int:
        return next(i for i, m in enumerate(self.moments) if predicate(m))


@contextlib.asynccontextmanager
async def pod_timeline(client: KubeClient) -> AsyncIterator[Timeline]:
    timeline = Timeline()
    informer = Informer(client, "v1", "pods", "Pod", namespace=NS)

    def record(type_: str, pod: Obj, _old: Obj | None) -> None:
        pods = informer.items()
        timeline.moments.append(
            Moment(
                type_,
                pod["metadata"]["name"],
                frozenset(
                    p["metadata"]["name"]
                    for p in pods
                    if is_ready(p) and not p["metadata"].get("deletionTimestamp")
                ),
                frozenset(
                    p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")
                ),
                frozenset(p["metadata"]["name"] for p in pods),
            )
        )

    informer.add_handler(record)
    task = asyncio.get_running_loop().create_task(informer.run())
    await informer.synced.wait()
    try:
        yield timeline
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def deployment(
    name: str = "web", replicas: int = 1, strategy: Obj | None = None, **spec: Any
) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": APP},
            "strategy": strategy
            or {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": APP},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
            **spec,
        },
    }


class Api:
    """Thin reads and writes on the test's client."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def get(self, api_version: str, plural: str, name: str) -> Obj:
        return await self.client.get(resource_path(api_version, plural, NS, name))

    async def items(self, api_version: str, plural: str) -> list[Obj]:
        listed = await self.client.get(resource_path(api_version, plural, NS))
        return list(listed.get("items") or [])

    async def create(self, obj: Obj) -> Obj:
        plural = obj["kind"].lower() + "s"
        if obj["kind"] == "PodDisruptionBudget":
            plural = "poddisruptionbudgets"
        return await self.client.create(resource_path(obj["apiVersion"], plural, NS), obj)

    async def update(
        self,
        api_version: str,
        plural: str,
        name: str,
        change: Callable[[Obj], None],
        sub: str | None = None,
    ) -> Obj:
        """GET, change, PUT with the resourceVersion; again on 409 (PATCH is not ours yet)."""
        for _ in range(20):
            obj = await self.get(api_version, plural, name)
            change(obj)
            try:
                return await self.client.replace(
                    resource_path(api_version, plural, NS, name, sub), obj
                )
            except ApiStatusError as err:
                if err.code != 409:
                    raise
        raise AssertionError(f"could not update {plural}/{name}")

    async def replica_sets(self, owner: str = "web") -> list[Obj]:
        return [rs for rs in await self.items("apps/v1", "replicasets") if owner_name(rs) == owner]

    async def events(self, reason: str) -> list[Obj]:
        return [e for e in await self.items("v1", "events") if e.get("reason") == reason]


def rollout_done(d: Obj) -> bool:
    status, want = d.get("status") or {}, d["spec"]["replicas"]
    progressing: Obj = next(
        (c for c in status.get("conditions") or [] if c["type"] == "Progressing"), {}
    )
    return (
        status.get("observedGeneration", 0) >= d["metadata"]["generation"]
        and status.get("updatedReplicas", 0) == want
        and status.get("readyReplicas", 0) == want
        and status.get("availableReplicas", 0) == want
        and status.get("replicas", 0) == want
        and progressing.get("reason") == "NewReplicaSetAvailable"
    )


async def wait_rolled_out(api: Api, name: str = "web") -> Obj:
    async def check() -> Obj | None:
        d = await api.get("apps/v1", "deployments", name)
        return d if rollout_done(d) else None

    return await eventually(check, f"deployment {name} rolled out")


def restart(d: Obj) -> None:
    meta = d["spec"]["template"].setdefault("metadata", {})
    meta.setdefault("annotations", {})[RESTARTED_AT] = rfc3339(dt.datetime.now(dt.UTC))


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture
async def client(sim: KubeSim) -> AsyncIterator[KubeClient]:
    c = KubeClient(sim.url, sim.admin_token, sim.ca_pem, user_agent="test")
    yield c
    await c.close()


@pytest.fixture
def api(client: KubeClient) -> Api:
    return Api(client)


@pytest.fixture
async def cluster(sim: KubeSim) -> AsyncIterator[Cluster]:
    async with Cluster(sim, {"deployment", "replicaset", "disruption"}) as running:
        yield running


# --- Deployment ---------------------------------------------------------------------------


async def test_deployment_pods_are_created_owned_and_counted(
    cluster: Cluster, client: KubeClient, api: Api
) -> None:
    async with PodPlayer(client):
        await api.create(deployment(replicas=2))
        d = await wait_rolled_out(api)
    [rs] = await api.replica_sets()
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["spec"]["selector"]["matchLabels"] == {**APP, "pod-template-hash": pod_hash}
    assert rs["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": d["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert rs["metadata"]["annotations"] == {
        "deployment.kubernetes.io/revision": "1",
        "deployment.kubernetes.io/desired-replicas": "2",
        "deployment.kubernetes.io/max-replicas": "3",
    }
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    pods = [p for p in await api.items("v1", "pods") if owner_name(p) == rs["metadata"]["name"]]
    assert len(pods) == 2
    for pod in pods:
        assert pod["metadata"]["generateName"] == f"{rs['metadata']['name']}-"
        assert pod["metadata"]["labels"] == {**APP, "pod-template-hash": pod_hash}
        [ref] = pod["metadata"]["ownerReferences"]
        assert ref["kind"] == "ReplicaSet" and ref["blockOwnerDeletion"] and ref["controller"]
    assert {c["type"]: (c["status"], c["reason"]) for c in d["status"]["conditions"]} == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    assert rs["status"] == {
        "replicas": 2,
        "fullyLabeledReplicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "observedGeneration": 1,
    }
    created = {e["message"] for e in await api.events("SuccessfulCreate")}
    assert created == {f"Created pod: {p['metadata']['name']}" for p in pods}
    [scaled] = await api.events("ScalingReplicaSet")
    assert scaled["message"] == f"Scaled up replica set {rs['metadata']['name']} from 0 to 2"
    assert scaled["source"] == {"component": "deployment-controller"}
    assert scaled["involvedObject"]["kind"] == "Deployment"


async def test_restart_with_max_surge_brings_a_second_ready_pod_before_the_old_one_goes(
    cluster: Cluster, client: KubeClient, api: Api
) -> None:
    async with PodPlayer(client) as player:
        await api.create(deployment())
        await wait_rolled_out(api)
        [old_rs] = await api.replica_sets()
        [old_pod] = [p["metadata"]["name"] for p in await api.items("v1", "pods")]
        async with pod_timeline(client) as timeline:
            player.ready = lambda _pod: False
            await api.update("apps/v1", "deployments", "web", restart)

            async def surged() -> Obj | None:
                d = await api.get("apps/v1", "deployments", "web")
                s = d.get("status") or {}
                done = (s.get("observedGeneration"), s.get("replicas"), s.get("updatedReplicas"))
                return d if done == (2, 2, 1) else None

            await eventually(surged, "the surge pod counted while not Ready")
            # The controller has seen the new pod unavailable: the old one must stay.
            old = await api.get("apps/v1", "replicasets", old_rs["metadata"]["name"])
            assert old["spec"]["replicas"] == 1
            assert not (await api.get("v1", "pods", old_pod))["metadata"].get("deletionTimestamp")
            player.ready = lambda _pod: True
            player.release()
            d = await wait_rolled_out(api)

            async def old_pod_gone() -> bool:
                return old_pod not in {p["metadata"]["name"] for p in await api.items("v1", "pods")}

            await eventually(old_pod_gone, "the old pod deleted")
    assert d["status"]["observedGeneration"] == d["metadata"]["generation"] == 2
    assert (
        d["status"]["updatedReplicas"],
        d["status"]["readyReplicas"],
        d["status"]["availableReplicas"],
    ) == (1, 1, 1)
    # maxSurge 1 / maxUnavailable 0: the new pod is Ready before the old one terminates.
    terminating = timeline.first(lambda m: old_pod in m.terminating or old_pod not in m.present)
    assert any(len(m.ready) == 2 for m in timeline.moments[:terminating])
    new_pods = {m.pod for m in timeline.moments} - {old_pod}
    assert new_pods and new_pods <= timeline.moments[terminating].ready
    rss = {rs["metadata"]["name"]: rs for rs in await api.replica_sets()}
    new_rs = next(rs for name, rs in rss.items() if name != old_rs["metadata"]["name"])
    assert rss[old_rs["metadata"]["name"]]["spec"]["replicas"] == 0
    assert new_rs["spec"]["replicas"] == 1
    assert new_rs["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT]
    assert new_rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert (
        rss[old_rs["metadata"]["name"]]["metadata"]["annotations"][
            "deployment.kubernetes.io/revision"
        ]
        == "1"
    )
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    messages = [e["message"] for e in await api.events("ScalingReplicaSet")]
    old_name, new_name = old_rs["metadata"]["name"], new_rs["metadata"]["name"]
    assert sorted(messages) == sorted(
        [
            f"Scaled up replica set {old_name} from 0 to 1",
            f"Scaled up replica set {new_name} from 0 to 1",
            f"Scaled down replica set {old_name} from 1 to 0",
        ]
    )
    [deleted] = await api.events("SuccessfulDelete")
    assert deleted["message"] == f"Deleted pod: {old_pod}"
    assert deleted["involvedObject"]["name"] == old_name


async def test_min_ready_seconds_holds_the_old_replica_set_until_the_new_pod_is_available(
    cluster: Cluster, client: KubeClient, api: Api
) -> None:
    async with PodPlayer(client):
        await api.create(deployment(minReadySeconds=2))
        await wait_rolled_out(api)
        [old_rs] = await api.replica_sets()
        seen: list[tuple[int, int, int]] = []  # (new ready, new available, old replicas)
        informer = Informer(client, "apps/v1", "replicasets", "ReplicaSet", namespace=NS)

        def record(_t: str, _rs: Obj, _old: Obj | None) -> None:
            rss = {rs["metadata"]["name"]: rs for rs in informer.items()}
            old = rss.get(old_rs["metadata"]["name"])
            new = [rs for name, rs in rss.items() if name != old_rs["metadata"]["name"]]
            if old is not None and new:
                status = new[0].get("status") or {}
                seen.append(
                    (
                        status.get("readyReplicas", 0),
                        status.get("availableReplicas", 0),
                        old["spec"]["replicas"],
                    )
                )

        informer.add_handler(record)
        task = asyncio.get_running_loop().create_task(informer.run())
        try:
            await informer.synced.wait()
            await api.update("apps/v1", "deployments", "web", restart)
            await wait_rolled_out(api)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert (1, 0, 1) in seen  # Ready, not yet available: the old ReplicaSet keeps its pod
    scaled_down = next(i for i, s in enumerate(seen) if s[2] == 0)
    assert any(available == 1 for _, available, _ in seen[: scaled_down + 1])
    assert all(s[1] == 0 for s in seen[: seen.index((1, 0, 1)) + 1])


async def test_recreate_scales_the_old_replica_set_to_zero_before_creating_the_new_one(
    cluster: Cluster, client: KubeClient, api: Api
) -> None:
    async with PodPlayer(client) as player:
        await api.create(deployment(replicas=2, strategy={"type": "Recreate"}))
        await wait_rolled_out(api)
        [old_rs] = await api.replica_sets()
        old_pods = {p["metadata"]["name"] for p in await api.items("v1", "pods")}
        async with pod_timeline(client) as timeline:
            player.finish_deletions = False  # old pods stay Terminating until released
            await api.update("apps/v1", "deployments", "web", restart)

            async def old_scaled_down() -> Obj | None:
                d = await api.get("apps/v1", "deployments", "web")
                s = d.get("status") or {}
                return d if (s.get("observedGeneration"), s.get("replicas", 0)) == (2, 0) else None

            await eventually(old_scaled_down, "the old ReplicaSet scaled to 0")
            pods = await api.items("v1", "pods")
            assert {p["metadata"]["name"] for p in pods} == old_pods
            assert all(p["metadata"].get("deletionTimestamp") for p in pods)
            assert [rs["metadata"]["name"] for rs in await api.replica_sets()] == [
                old_rs["metadata"]["name"]
            ]
            player.finish_deletions = True
            player.release()
            await wait_rolled_out(api)
    first_new = timeline.first(lambda m: m.event == "ADDED" and m.pod not in old_pods)
    assert not (timeline.moments[first_new].present & old_pods)
    assert all(len(m.ready) <= 2 for m in timeline.moments)
    new_rs = next(
        rs
        for rs in await api.replica_sets()
        if rs["metadata"]["name"] != old_rs["metadata"]["name"]
    )
    messages = [e["message"] for e in await api.events("ScalingReplicaSet")]
    assert f"Scaled down replica set {old_rs['metadata']['name']} from 2 to 0" in messages
    assert f"Scaled up replica set {new_rs['metadata']['name']} from 0 to 2" in messages
    assert "deployment.kubernetes.io/max-replicas" in new_rs["metadata"]["annotations"]
    assert new_rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "2"


async def test_progress_deadline_exceeded_when_pods_never_become_ready(
    cluster: Cluster, client: KubeClient, api: Api
) -> None:
    async with PodPlayer(client, ready=lambda _pod: False):
        await api.create(deployment(progressDeadlineSeconds=1, strategy={"type": "RollingUpdate"}))

        async def timed_out() -> Obj | None:
            d = await api.get("apps/v1", "deployments", "web")
            conds = {c["type"]: c for c in (d.get("status") or {}).get("conditions") or []}
            progressing = conds.get("Progressing", {})
            return d if progressing.get("reason") == "ProgressDeadlineExceeded" else None

        d = await eventually(timed_out, "ProgressDeadlineExceeded")
    conds = {c["type"]: c for c in d["status"]["conditions"]}
    [rs] = await api.replica_sets()
    assert conds["Progressing"]["status"] == "False"
    assert conds["Progressing"]["message"] == (
        f'ReplicaSet "{rs["metadata"]["name"]}" has timed out progressing.'
    )
    assert (conds["Available"]["status"], conds["Available"]["reason"]) == (
        "False",
        "MinimumReplicasUnavailable",
    )
    assert d["status"]["unavailableReplicas"] == 1
    assert "availableReplicas" not in d["status"]  # omitempty, as the real API server


async def test_scaling_a_deployment_resizes_its_replica_set(
    cluster: Cluster, client: KubeClient, api: Api
) -> None:
    async with PodPlayer(client):
        await api.create(deployment(replicas=1))
        await wait_rolled_out(api)

        def scale(d: Obj) -> None:
            d["spec"]["replicas"] = 3

        await api.update("apps/v1", "deployments", "web", scale)
        await wait_rolled_out(api)
    [rs] = await api.replica_sets()
    assert rs["spec"]["replicas"] == 3
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
    messages = [e["message"] for e in await api.events("ScalingReplicaSet")]
    assert f"Scaled up replica set {rs['metadata']['name']} from 1 to 3" in messages


async def test_kubectl_rollout_restart_and_status(
    cluster: Cluster, client: KubeClient, api: Api, sim: KubeSim
) -> None:
    async def kubectl(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)},
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        return out.decode()

    async with PodPlayer(client):
        await api.create(deployment())
        await kubectl("rollout", "status", "deployment/web", "--timeout=30s")
        await kubectl("rollout", "restart", "deployment/web")
        out = await kubectl("rollout", "status", "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in out
    assert len(await api.replica_sets()) == 2


# --- ReplicaSet ---------------------------------------------------------------------------


async def test_replica_set_scale_down_removes_unscheduled_then_not_ready_pods(
    cluster: Cluster, client: KubeClient, api: Api
) -> None:
    rs_body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "bare", "namespace": NS},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "bare"}},
            "template": {
                "metadata": {"labels": {"app": "bare"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    await api.create(rs_body)

    async def three_pods() -> list[str] | None:
        names = sorted(p["metadata"]["name"] for p in await api.items("v1", "pods"))
        return names if len(names) == 3 else None

    unscheduled, not_ready, ready = await eventually(three_pods, "three pods")
    player = PodPlayer(client)
    for name in (not_ready, ready):
        await client.create(
            resource_path("v1", "pods", NS, name, "binding"),
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
            },
        )

    def running_not_ready(pod: Obj) -> None:
        pod["status"] = {**pod["status"], "phase": "Running"}

    await api.update("v1", "pods", not_ready, running_not_ready, "status")
    await player.make_ready(await api.get("v1", "pods", ready))

    def scale_to_one(rs: Obj) -> None:
        rs["spec"]["replicas"] = 1

    async def counted_one() -> Obj | None:
        rs = await api.get("apps/v1", "replicasets", "bare")
        return rs if rs["status"].get("readyReplicas") == 1 else None

    await eventually(counted_one, "the ready pod counted")
    await api.update("apps/v1", "replicasets", "bare", scale_to_one)

    async def scaled_down() -> Obj | None:
        rs = await api.get("apps/v1", "replicasets", "bare")
        status = rs.get("status") or {}
        done = status.get("replicas") == 1 and status.get("observedGeneration") == 2
        return rs if done else None

    rs = await eventually(scaled_down, "scale down to 1")
    pods = {p["metadata"]["name"]: p for p in await api.items("v1", "pods")}
    assert unscheduled not in pods  # unbound: deleted at once
    assert pods[not_ready]["metadata"].get("deletionTimestamp")  # bound: terminating, not counted
    assert not pods[ready]["metadata"].get("deletionTimestamp")
    assert rs["status"]["replicas"] == 1 and rs["status"]["readyReplicas"] == 1
    deleted = {e["message"] for e in await api.events("SuccessfulDelete")}
    assert deleted == {f"Deleted pod: {unscheduled}", f"Deleted pod: {not_ready}"}


# --- PodDisruptionBudget ------------------------------------------------------------------


def pdb(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": APP}, **spec},
    }


async def wait_pdb(api: Api, name: str) -> Obj:
    async def observed() -> Obj | None:
        got = await api.get("policy/v1", "poddisruptionbudgets", name)
        status = got.get("status") or {}
        return got if status.get("observedGeneration") == got["metadata"]["generation"] else None

    return await eventually(observed, f"pdb {name} observed")


def numbers(p: Obj) -> tuple[int, int, int, int]:
    s = p["status"]
    return s["expectedPods"], s["desiredHealthy"], s["currentHealthy"], s["disruptionsAllowed"]


def allowed_condition(p: Obj) -> tuple[str, str]:
    [cond] = p["status"]["conditions"]
    assert cond["type"] == "DisruptionAllowed"
    return cond["status"], cond["reason"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"minAvailable": 1}, ((3, 1, 3, 2), ("True", "SufficientPods"))),
        ({"maxUnavailable": 0}, ((3, 3, 3, 0), ("False", "InsufficientPods"))),
        ({"minAvailable": "50%"}, ((3, 2, 3, 1), ("True", "SufficientPods"))),  # 1.5 rounds up
        ({"maxUnavailable": "50%"}, ((3, 1, 3, 2), ("True", "SufficientPods"))),  # 1.5 -> 2
        ({"minAvailable": 3}, ((3, 3, 3, 0), ("False", "InsufficientPods"))),
    ],
)
async def test_pdb_status_numbers(
    cluster: Cluster,
    client: KubeClient,
    api: Api,
    spec: Obj,
    expected: tuple[tuple[int, int, int, int], tuple[str, str]],
) -> None:
    async with PodPlayer(client):
        await api.create(deployment(replicas=3))
        await wait_rolled_out(api)
        await api.create(pdb("budget", **spec))
        got = await wait_pdb(api, "budget")
    assert (numbers(got), allowed_condition(got)) == expected


async def test_pdb_single_replica_min_available_one_allows_nothing(
    cluster: Cluster, client: KubeClient, api: Api
) -> None:
    async with PodPlayer(client):
        await api.create(deployment(replicas=1))
        await wait_rolled_out(api)
        await api.create(pdb("budget", minAvailable=1))
        got = await wait_pdb(api, "budget")
    assert numbers(got) == (1, 1, 1, 0)
    assert allowed_condition(got) == ("False", "InsufficientPods")


async def test_pdb_disrupted_pods_are_pruned_when_deleted_or_after_the_timeout(
    sim: KubeSim, client: KubeClient, api: Api
) -> None:
    registry = {
        **COMPONENTS,
        "disruption": ComponentSpec(
            # Long enough that a loaded machine still sees the entries before they expire.
            lambda ctx: DisruptionController(ctx.client(), deletion_timeout=5.0)
        ),
    }
    async with Cluster(sim, registry=registry), PodPlayer(client):
        await api.create(deployment(replicas=3))
        await wait_rolled_out(api)
        await api.create(pdb("budget", minAvailable=1))
        await wait_pdb(api, "budget")
        first, second, _ = sorted(p["metadata"]["name"] for p in await api.items("v1", "pods"))
        stamp = rfc3339(dt.datetime.now(dt.UTC))

        def evicted(p: Obj) -> None:  # what the eviction handler records
            p["status"]["disruptedPods"] = {first: stamp, second: stamp}
            p["status"]["disruptionsAllowed"] -= 1

        await api.update("policy/v1", "poddisruptionbudgets", "budget", evicted, "status")

        async def counted_as_disrupted() -> Obj | None:
            got = await api.get("policy/v1", "poddisruptionbudgets", "budget")
            return got if got["status"].get("currentHealthy") == 1 else None

        got = await eventually(counted_as_disrupted, "evicted pods not counted healthy")
        assert set(got["status"]["disruptedPods"]) == {first, second}
        await client.delete(resource_path("v1", "pods", NS, first))

        async def pruned() -> Obj | None:
            got = await api.get("policy/v1", "poddisruptionbudgets", "budget")
            return got if not got["status"].get("disruptedPods") else None

        got = await eventually(pruned, "disruptedPods pruned")
    not_deleted = await api.events("NotDeleted")
    assert [e["involvedObject"]["name"] for e in not_deleted] == [second]
    assert not_deleted[0]["message"] == (
        "Pod was expected by PDB default/default to be deleted but it wasn't"
    )


# --- Cluster ------------------------------------------------------------------------------


@dataclass
class Probe:
    """A component as the scheduler or kubelets will be: start/stop, its own client."""

    client: KubeClient
    log: list[str]

    async def start(self) -> None:
        who = await self.client.create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        self.log.append(f"start {who['status']['userInfo']['username']}")

    async def stop(self) -> None:
        self.log.append("stop")


async def test_cluster_plugs_components_in_by_name_with_their_identity(sim: KubeSim) -> None:
    log: list[str] = []
    registry = {
        **COMPONENTS,
        "probe": ComponentSpec(lambda ctx: Probe(ctx.client(), log), user="system:kube-scheduler"),
    }
    with pytest.raises(ValueError, match="unknown components"):
        Cluster(sim, {"nope"}, registry=registry)
    async with Cluster(sim, {"probe", "replicaset"}, registry=registry) as cluster:
        assert list(cluster.components) == ["replicaset", "probe"]
        assert log == ["start system:kube-scheduler"]
    assert log[-1] == "stop"
    users = {r.user for r in sim.audit.records() if r.resource == "replicasets"}
    assert users == {"system:kube-controller-manager"}
