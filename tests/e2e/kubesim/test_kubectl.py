"""kubectl, whichever version the dispatcher picks for kubesim's /version, as a real client."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from kubesim.cluster.cluster import Cluster
from kubesim.sim import KubeSim
from tests.compatibility import KUBECTL_MINORS_ON_KUBESIM
from tests.conftest import kubectl_cache_args, kubectl_watching, run_kubectl

pytestmark = pytest.mark.e2e

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:IMAGE_TAG
"""


def _manifest(tmp_path: Path, tag: str) -> Path:
    path = tmp_path / f"web-{tag}.yaml"
    path.write_text(DEPLOYMENT.replace("IMAGE_TAG", tag))
    return path


async def kubectl(sim: KubeSim, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run_kubectl, sim.kubeconfig_path, *args, check=check)


async def _get_json(sim: KubeSim, *args: str) -> dict[str, object]:
    result = await kubectl(sim, "get", *args, "-o", "json")
    parsed: dict[str, object] = json.loads(result.stdout)
    return parsed


async def test_create_apply_get_annotate_label_delete(sim: KubeSim, tmp_path: Path) -> None:
    created = await kubectl(sim, "create", "-f", str(_manifest(tmp_path, "1.26")))
    assert created.stdout.strip() == "deployment.apps/web created"
    again = await kubectl(sim, "create", "-f", str(_manifest(tmp_path, "1.26")), check=False)
    assert again.returncode != 0
    assert 'deployments.apps "web" already exists' in again.stderr

    applied = await kubectl(sim, "apply", "-f", str(_manifest(tmp_path, "1.27")))
    assert applied.stdout.strip() == "deployment.apps/web configured"
    reapplied = await kubectl(sim, "apply", "-f", str(_manifest(tmp_path, "1.27")))
    assert reapplied.stdout.strip() == "deployment.apps/web unchanged"
    dep = await _get_json(sim, "deployment", "web")
    spec = dep["spec"]
    assert isinstance(spec, dict)
    assert spec["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": "25%"}

    table = await kubectl(sim, "get", "deployments")
    assert table.stdout.split("\n")[0].split()[0] == "NAME"
    assert "web" in table.stdout

    await kubectl(sim, "annotate", "deployment", "web", "team=drain")
    await kubectl(sim, "label", "deployment", "web", "tier=frontend")
    dep = await _get_json(sim, "deployment", "web")
    meta = dep["metadata"]
    assert isinstance(meta, dict)
    assert meta["annotations"]["team"] == "drain"
    assert meta["labels"] == {"tier": "frontend"}
    selected = await kubectl(sim, "get", "deployments", "-l", "tier=frontend", "-o", "name")
    assert selected.stdout.split() == ["deployment.apps/web"]

    deleted = await kubectl(sim, "delete", "deployment", "web")
    assert deleted.stdout.strip() == 'deployment.apps "web" deleted'
    missing = await kubectl(sim, "get", "deployment", "web", check=False)
    assert missing.returncode == 1
    assert 'deployments.apps "web" not found' in missing.stderr


async def test_patch_types(sim: KubeSim, tmp_path: Path) -> None:
    await kubectl(sim, "create", "-f", str(_manifest(tmp_path, "1.26")))
    await kubectl(sim, "patch", "deployment", "web", "--type=merge",
                  "-p", '{"spec":{"replicas":3}}')  # fmt: skip
    await kubectl(sim, "patch", "deployment", "web", "--type=json",
                  "-p", '[{"op":"replace","path":"/spec/replicas","value":2}]')  # fmt: skip
    await kubectl(sim, "patch", "deployment", "web", "--type=strategic", "-p",
                  '{"spec":{"template":{"spec":{"containers":[{"name":"sidecar",'
                  '"image":"busybox:1.36"}]}}}}')  # fmt: skip
    dep = await _get_json(sim, "deployment", "web")
    spec = dep["spec"]
    assert isinstance(spec, dict)
    assert spec["replicas"] == 2
    names = [c["name"] for c in spec["template"]["spec"]["containers"]]
    assert sorted(names) == ["app", "sidecar"]  # merged by the `name` key, not replaced
    failed = await kubectl(sim, "patch", "deployment", "web", "--type=json", "-p",
                           '[{"op":"test","path":"/spec/replicas","value":9}]',
                           check=False)  # fmt: skip
    assert failed.returncode != 0
    assert "The request is invalid" in failed.stderr


async def test_cordon_and_uncordon(sim: KubeSim) -> None:
    sim.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
    await kubectl(sim, "cordon", "node-a")
    node = await _get_json(sim, "node", "node-a")
    assert node["spec"] == {"unschedulable": True}
    await kubectl(sim, "uncordon", "node-a")
    node = await _get_json(sim, "node", "node-a")
    assert not (node.get("spec") or {}).get("unschedulable")  # type: ignore[attr-defined]


async def test_get_watch_sees_updates(sim: KubeSim) -> None:
    sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "watched", "namespace": "default"}})  # fmt: skip
    jsonpath = 'jsonpath={.metadata.name}:{.data.k}{"\\n"}'
    async with kubectl_watching(sim.kubeconfig_path, "get", "configmap", "watched", "-w",
                                "-o", jsonpath, "--request-timeout=30s") as out:  # fmt: skip
        first = await asyncio.wait_for(out.readline(), 30)
        assert first.decode().strip() == "watched:"
        await kubectl(sim, "patch", "configmap", "watched", "--type=merge",
                      "-p", '{"data":{"k":"v"}}')  # fmt: skip
        second = await asyncio.wait_for(out.readline(), 30)
        assert second.decode().strip() == "watched:v"


def _pod(name: str, node: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        # No kubelet runs here: grace period 0 makes the deletion immediate.
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "busybox:1.36"}]},
    }  # fmt: skip


async def test_auth_can_i(sim: KubeSim) -> None:
    assert (await kubectl(sim, "auth", "can-i", "create", "pods")).stdout.strip() == "yes"
    sim.create({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "nobody", "namespace": "default"}})  # fmt: skip
    denied = await kubectl(
        sim, "auth", "can-i", "create", "pods", "--subresource=eviction",
        "--as=system:serviceaccount:default:nobody", check=False,
    )  # fmt: skip
    assert denied.returncode == 1
    assert denied.stdout.strip() == "no"


def _running_and_ready(sim: KubeSim, name: str) -> None:
    """What a kubelet would report; eviction ignores PDBs for Pending pods, as upstream."""
    rt = sim.resources.by_kind("", "Pod")
    assert rt is not None
    current = sim.registry.get(rt, "default", name)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    _, new = sim.registry.prepare_update(rt, "default", name, {**current, "status": status},
                                         "status")  # fmt: skip
    sim.registry.commit_update(rt, current, new)


async def test_drain_waits_on_a_pdb_until_it_is_deleted(sim: KubeSim) -> None:
    sim.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    sim.create(_pod("bare", "n1"))
    sim.create(_pod("db", "n1", {"app": "db"}))
    _running_and_ready(sim, "db")
    sim.create({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
    })  # fmt: skip
    # The disruption controller computes the PDB status the eviction is judged on.
    async with Cluster(sim, controllers=["disruption"]):
        await _drain_until_pdb_deleted(sim)


async def _gone(sim: KubeSim, pod: str) -> None:
    """Wait, on the store's own watch, until `pod` is deleted."""
    watcher = sim.store.watch(("", "pods"), None, lambda o: o["metadata"]["name"] == pod)
    try:
        if sim.get("v1", "Pod", pod, "default") is None:
            return
        async with asyncio.timeout(30):
            while (event := await watcher.queue.get()) is not None and event.type != "DELETED":
                pass
    finally:
        sim.store.stop_watch(("", "pods"), watcher)


async def _drain_until_pdb_deleted(sim: KubeSim) -> None:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(sim.kubeconfig_path),
        *kubectl_cache_args(sim.kubeconfig_path), "drain", "n1", "--force",
        "--timeout=90s", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not any("will retry after 5s" in line for line in seen):
                line = (await proc.stdout.readline()).decode()
                assert line, f"kubectl drain ended before retrying: {''.join(seen)}"
                seen.append(line)
        retry = next(line for line in seen if "will retry after 5s" in line)
        assert 'error when evicting pods/"db" -n "default"' in retry
        assert "Cannot evict pod as it would violate the pod's disruption budget." in retry
        # kubectl evicts both pods in parallel: the bare one goes without a budget to check.
        await _gone(sim, "bare")
        assert sim.get("v1", "Pod", "db", "default") is not None  # still protected
        await kubectl(sim, "delete", "pdb", "db")
        async with asyncio.timeout(60):
            rest = (await proc.stdout.read()).decode()
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert "node/n1 drained" in rest
    assert sim.get("v1", "Pod", "db", "default") is None
    node = sim.get("v1", "Node", "n1")
    assert node is not None and node["spec"]["unschedulable"] is True


def _agents(sim: KubeSim, verb: str) -> set[str]:
    return {r.user_agent.split(" ")[0] for r in sim.audit.records() if r.verb == verb}


def _is_release(agents: set[str], minor: int) -> bool:
    return agents == {f"kubectl1.{minor}/v1.{minor}"} or all(
        a.startswith(f"kubectl/v1.{minor}.") for a in agents
    )


# What kubectl prints on the first `apply` of an object made by `create`: expected, not a fault.
MISSING_LAST_APPLIED = (
    "Warning: resource deployments/web is missing the "
    "kubectl.kubernetes.io/last-applied-configuration annotation"
)


@pytest.mark.parametrize("minor", KUBECTL_MINORS_ON_KUBESIM)
async def test_every_kubectl_release_discovers_creates_and_applies(
    minor: int, tmp_path: Path
) -> None:
    """The dispatcher runs the kubectl release matching the server's /version.

    1.27 and 1.28 read /openapi/v2 before validating; 1.29 on, /openapi/v3 (and v2 in apply).
    """
    v126, v127 = str(_manifest(tmp_path, "1.26")), str(_manifest(tmp_path, "1.27"))
    async with KubeSim(server_minor_version=minor) as sim:
        created = await kubectl(sim, "create", "-f", v126)
        assert created.stderr == ""
        assert _is_release(_agents(sim, "create"), minor), _agents(sim, "create")
        applied = await kubectl(sim, "apply", "-f", v127)
        assert applied.stdout.strip() == "deployment.apps/web configured"
        assert applied.stderr.startswith(MISSING_LAST_APPLIED)
        assert applied.stderr.count("\n") == 1 and "warning" not in applied.stderr
        reapplied = await kubectl(sim, "apply", "-f", v127)
        assert reapplied.stdout.strip() == "deployment.apps/web unchanged"
        assert reapplied.stderr == ""
        writes = [r.uri for r in sim.audit.records() if r.verb in ("create", "patch")]
        assert len(writes) == 2 and all("fieldValidation=Strict" in uri for uri in writes)
        names = await kubectl(sim, "get", "deployments", "-o", "name")
        assert names.stdout.split() == ["deployment.apps/web"]
        image = await kubectl(
            sim,
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        )
        assert image.stdout == "nginx:1.27"


@pytest.mark.parametrize("minor", [27, 28])
async def test_kubectl_127_and_128_find_server_side_validation_in_openapi_v2_alone(
    minor: int, tmp_path: Path
) -> None:
    """With /openapi/v3 gone, kubectl falls back to /openapi/v2's PATCH operations
    (cli-runtime pkg/resource/query_param_verifier.go). Had it found no `fieldValidation`
    there, `--validate=warn` would log "cannot perform warn validation if server-side field
    validation is unsupported"."""
    v126, v127 = str(_manifest(tmp_path, "1.26")), str(_manifest(tmp_path, "1.27"))
    async with KubeSim(server_minor_version=minor) as sim:
        serve = sim.server.openapi
        assert serve is not None
        sim.server.openapi = lambda url, accept: None if "/v3" in url else serve(url, accept)
        created = await kubectl(sim, "create", "-f", v126, "--validate=warn")
        assert created.stderr == ""
        assert _is_release(_agents(sim, "create"), minor), _agents(sim, "create")
        applied = await kubectl(sim, "apply", "-f", v127, "--validate=warn")
        assert applied.stdout.strip() == "deployment.apps/web configured"
        assert "validation" not in applied.stderr
        gets = [r.uri.split("?")[0] for r in sim.audit.records() if r.verb == "get"]
        assert "/openapi/v2" in gets and "/openapi/v3" in gets


async def test_openapi_v2_is_json_for_a_json_client(sim: KubeSim) -> None:
    raw = await kubectl(sim, "get", "--raw", "/openapi/v2")
    doc = json.loads(raw.stdout)
    assert doc["swagger"] == "2.0"
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps", "version": "v1", "kind": "Deployment"
    }  # fmt: skip
    assert {"name": "fieldValidation", "in": "query", "type": "string",
            "uniqueItems": True} in patch["parameters"]  # fmt: skip
