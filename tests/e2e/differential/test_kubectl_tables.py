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
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesim.client import KubeClient
from kubesim.watchlog import watch_until
from realcluster.cluster import RealCluster
from tests.e2e.real_control_plane.harness import kubectl

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
