"""`kubectl get -o wide` on kubesim and on kube-apiserver: the same manifests, the same
commands, the same table once what legitimately differs is normalised.

The header lines are compared as their column names: kubectl's tabwriter pads every column
to its widest cell, so the whitespace between names follows the values (a longer IP widens
the column). Cells normalised, and why:
- generated names: the pods' random suffix (random on both servers) and the
  pod-template-hash (in ReplicaSet and pod names and the ReplicaSet's Selector cell), which
  upstream computes from a dump of the Go struct and kubesim from the template's canonical
  JSON (docs/kubesim-fidelity.md); the names' shape is kept;
- AGE: the objects were created at different moments on the two servers;
- IP (pods) and INTERNAL-IP (nodes): each side's IP allocation (kwok's pod CIDR, kubesim's
  simulated runtime; the launcher's and the scenario's node addresses);
- VERSION, OS-IMAGE, KERNEL-VERSION, CONTAINER-RUNTIME (nodes): what the node's kubelet
  reports about itself, kwok's on one side and kubesim's simulated kubelet on the other, not
  the API server's printing.
Rows are compared sorted: pods' names (hence the server's list order) are random.

Then `kubectl get <r>` and `kubectl get <r> -o wide` for every resource either server's
discovery lists for `kubectl get` (`kubectl api-resources --verbs=list`), one object of each
made the same way on both (`every_resource.py`): kubesim's resources must be kube-apiserver's
and print the same headers; each resource kube-apiserver serves and kubesim does not is
listed, with its reason, in docs/kubesim-fidelity.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.client import ApiStatusError, KubeClient
from kubesim.watchlog import watch_until
from realcluster.cluster import RealCluster
from tests.e2e.real_control_plane.harness import kubectl

from . import every_resource
from .servers import Endpoint, kubesim_kubeconfig, kubesim_serve

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

Obj = dict[str, Any]
REPLICAS = 2
GENERATED = "<generated>"
HEADER_COLUMN = re.compile(r"\S+(?: \S+)*")  # kubectl pads columns with at least 3 spaces
NORMALISED = {
    "AGE": "<age>",
    "IP": "<ip>",
    "INTERNAL-IP": "<ip>",
    "VERSION": "<kubelet>",
    "OS-IMAGE": "<kubelet>",
    "KERNEL-VERSION": "<kubelet>",
    "CONTAINER-RUNTIME": "<kubelet>",
}
POD_NAME = re.compile(r"^(?P<prefix>pod/web-)[0-9a-z]+-[0-9a-z]{5}$")
REPLICA_SET_NAME = re.compile(r"^(?P<prefix>replicaset\.apps/web-)[0-9a-z]+$")
TEMPLATE_HASH = re.compile(r"(?P<prefix>pod-template-hash=)[0-9a-z]+")


def deployment(namespace: str) -> Obj:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels,
                             "annotations": {"sim.kubesim.io/ready-delay": "200ms"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }  # fmt: skip


Table = tuple[list[str], list[list[str]]]


def parse_tables(output: str) -> list[Table]:
    """kubectl's tables (one per resource type, a blank line between): column names and,
    per row, the cell under each column (cut at the header's column starts)."""
    tables: list[Table] = []
    for block in output.strip().split("\n\n"):
        header, *lines = block.splitlines()
        spans = [m.start() for m in HEADER_COLUMN.finditer(header)]
        names = [m.group() for m in HEADER_COLUMN.finditer(header)]
        ends = [*spans[1:], None]
        rows = [[line[start:end].strip() for start, end in zip(spans, ends, strict=True)]
                for line in lines]  # fmt: skip
        tables.append((names, rows))
    return tables


def _generated(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub(lambda m: m["prefix"] + GENERATED, text)


def normalise(table: Table) -> Table:
    names, rows = table
    out = []
    for row in rows:
        cells = [NORMALISED.get(name, cell) for name, cell in zip(names, row, strict=True)]
        cells = [_generated(TEMPLATE_HASH, c) for c in cells]
        cells[0] = _generated(REPLICA_SET_NAME, _generated(POD_NAME, cells[0]))
        out.append(cells)
    return names, sorted(out)


def rolled_out(items: list[Obj]) -> bool:
    return len(items) == 1 and all(
        (d.get("status") or {}).get(field) == REPLICAS
        for d in items
        for field in ("readyReplicas", "updatedReplicas", "availableReplicas", "replicas")
    )


def all_ready(count: int, field: str) -> Callable[[list[Obj]], bool]:
    return lambda items: (
        len(items) == count and all((o.get("status") or {}).get(field) == REPLICAS for o in items)
    )


def pods_ready(items: list[Obj]) -> bool:
    def ready(pod: Obj) -> bool:
        conditions = (pod.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    return len(items) == REPLICAS and all(ready(p) for p in items)


async def kubectl_tables(endpoint: Endpoint, kubeconfig: Path, namespace: str) -> list[Table]:
    client: KubeClient = endpoint.client()
    try:
        await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": namespace}})  # fmt: skip
        await kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-",
                      stdin=yaml.safe_dump(deployment(namespace)))  # fmt: skip
        await watch_until(client, "apps/v1", "deployments", "Deployment", namespace, rolled_out)
        await watch_until(client, "apps/v1", "replicasets", "ReplicaSet", namespace,
                          all_ready(1, "readyReplicas"))  # fmt: skip
        await watch_until(client, "v1", "pods", "Pod", namespace, pods_ready)
        workloads = await kubectl(kubeconfig, "get", "pods,deployments,replicasets", "-o",
                                  "wide", "-n", namespace)  # fmt: skip
        nodes = await kubectl(kubeconfig, "get", "nodes", "-o", "wide")
        return parse_tables(workloads.stdout) + parse_tables(nodes.stdout)
    finally:
        # Nothing outlives the test: its pods would be on the nodes later tests drain.
        with contextlib.suppress(ApiStatusError):
            await client.delete(f"/api/v1/namespaces/{namespace}")
        await client.close()


@pytest.fixture
def kubesim_workdir(tmp_path: Path) -> Iterator[tuple[Endpoint, Path]]:
    with kubesim_serve(tmp_path) as endpoint:
        yield endpoint, kubesim_kubeconfig(tmp_path)


async def test_kubectl_get_wide_tables_match(
    kubesim_workdir: tuple[Endpoint, Path], real_cluster: RealCluster
) -> None:
    namespace = f"tables-{secrets.token_hex(3)}"
    real = Endpoint("kube-apiserver", real_cluster.server, real_cluster.admin_token,
                    real_cluster.ca_pem)  # fmt: skip
    on_real = await kubectl_tables(real, real_cluster.kubeconfig_path, namespace)
    on_kubesim = await kubectl_tables(*kubesim_workdir, namespace)

    assert [names for names, _ in on_kubesim] == [names for names, _ in on_real]
    assert [names for names, _ in on_real] == [
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
         "READINESS GATES"],
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"],
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"],
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
         "KERNEL-VERSION", "CONTAINER-RUNTIME"],
    ]  # fmt: skip
    assert [normalise(t) for t in on_kubesim] == [normalise(t) for t in on_real]


FIDELITY_DOC = Path(__file__).resolve().parents[3] / "docs" / "kubesim-fidelity.md"
NOT_SERVED_ROW = re.compile(r"^\| `(?P<resource>[a-z0-9.]+)` \| not served:", re.MULTILINE)
Headers = dict[str, tuple[list[str], list[str]]]  # resource -> (get, get -o wide) columns


def not_served_in_doc() -> set[str]:
    """The resources docs/kubesim-fidelity.md lists as served by kube-apiserver only."""
    return {m["resource"] for m in NOT_SERVED_ROW.finditer(FIDELITY_DOC.read_text("utf-8"))}


async def _resources(kubeconfig: Path, namespaced: bool, custom: set[str]) -> list[str]:
    """The built-in resources `kubectl get` can list: custom ones (named `plural.group`
    like their CustomResourceDefinition, whoever made them) left out."""
    listed = await kubectl(kubeconfig, "api-resources", "--verbs=list",
                           f"--namespaced={str(namespaced).lower()}", "-o", "name")  # fmt: skip
    return [r for r in listed.stdout.split() if r not in custom]


def _cluster_scoped_name(resource: str, namespace: str, suffix: str) -> str | None:
    """The object `kubectl get` names for a cluster-scoped resource (None: all of them)."""
    if resource == "nodes":
        return None
    if resource == "namespaces":
        return namespace
    if resource.startswith("customresourcedefinitions."):
        return f"nothings.every-{suffix}.example.com"
    return f"every-{suffix}"


async def _headers(kubeconfig: Path, *args: str) -> list[tuple[list[str], list[str]]]:
    outputs = await asyncio.gather(
        kubectl(kubeconfig, "get", *args), kubectl(kubeconfig, "get", *args, "-o", "wide")
    )
    tables = [[names for names, _ in parse_tables(run.stdout)] for run in outputs]
    assert len(tables[0]) == len(tables[1]), outputs
    return list(zip(tables[0], tables[1], strict=True))


Resources = tuple[list[str], list[str]]  # (namespaced, cluster-scoped)


async def built_in_resources(kubeconfig: Path) -> Resources:
    """The built-in resources the server lists for `kubectl get`."""
    crds = await kubectl(kubeconfig, "get", "customresourcedefinitions", "-o", "name")
    custom = {line.partition("/")[2] for line in crds.stdout.split()}
    namespaced, cluster = await asyncio.gather(
        _resources(kubeconfig, True, custom), _resources(kubeconfig, False, custom)
    )
    return namespaced, cluster


async def every_header(
    endpoint: Endpoint, kubeconfig: Path, namespace: str, suffix: str, resources: Resources
) -> Headers:
    """The headers of `kubectl get` of each of `resources`, one object of each made first."""
    client: KubeClient = endpoint.client()
    manifests = every_resource.namespaced(namespace) + every_resource.cluster_scoped(suffix)
    stream = yaml.safe_dump_all(manifests)
    namespaced, cluster = resources
    try:
        await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": namespace}})  # fmt: skip
        await kubectl(kubeconfig, "create", "-f", "-", stdin=stream)
        # The endpoints controllers make the Service's Endpoints and EndpointSlice.
        await asyncio.gather(
            watch_until(client, "v1", "endpoints", "Endpoints", namespace, bool),
            watch_until(client, "discovery.k8s.io/v1", "endpointslices", "EndpointSlice",
                        namespace, bool),
        )  # fmt: skip
        named = [(r, _cluster_scoped_name(r, namespace, suffix)) for r in cluster]
        # `kubectl get` of several resources prints one table per resource, in order.
        in_namespace, listed, by_name = await asyncio.gather(
            _headers(kubeconfig, ",".join(namespaced), "-n", namespace),
            _headers(kubeconfig, ",".join(r for r, name in named if name is None)),
            _headers(kubeconfig, *(f"{r}/{name}" for r, name in named if name is not None)),
        )
        ordered = (namespaced + [r for r, name in named if name is None]
                   + [r for r, name in named if name is not None])  # fmt: skip
        tables = in_namespace + listed + by_name
        assert len(tables) == len(ordered), (ordered, tables)
        return dict(zip(ordered, tables, strict=True))
    finally:
        # Nothing outlives the test: its PodDisruptionBudget would hold later suites' drains.
        await kubectl(kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-f", "-",
                      stdin=yaml.safe_dump_all(every_resource.cluster_scoped(suffix)),
                      check=False)  # fmt: skip
        with contextlib.suppress(ApiStatusError):
            await client.delete(f"/api/v1/namespaces/{namespace}")
        await client.close()


async def test_kubectl_get_headers_of_every_resource_match(
    kubesim_workdir: tuple[Endpoint, Path], real_cluster: RealCluster
) -> None:
    namespace = f"every-{secrets.token_hex(3)}"
    suffix = secrets.token_hex(3)
    real = Endpoint("kube-apiserver", real_cluster.server, real_cluster.admin_token,
                    real_cluster.ca_pem)  # fmt: skip
    real_kubeconfig = real_cluster.kubeconfig_path
    on_real, on_kubesim = await asyncio.gather(
        built_in_resources(real_kubeconfig), built_in_resources(kubesim_workdir[1])
    )
    real_resources, kubesim_resources = (set(n) | set(c) for n, c in (on_real, on_kubesim))
    assert kubesim_resources <= real_resources, kubesim_resources - real_resources
    assert sorted(real_resources - kubesim_resources) == sorted(not_served_in_doc())
    real_headers, kubesim_headers = await asyncio.gather(
        every_header(real, real_kubeconfig, namespace, suffix, on_kubesim),
        every_header(*kubesim_workdir, namespace, suffix, on_kubesim),
    )
    differences = {
        resource: (headers, real_headers[resource])
        for resource, headers in kubesim_headers.items()
        if headers != real_headers[resource]
    }
    assert not differences, differences
    assert kubesim_headers["namespaces"][0] == ["NAME", "STATUS", "AGE"]
    assert kubesim_headers["secrets"][0] == ["NAME", "TYPE", "DATA", "AGE"]
