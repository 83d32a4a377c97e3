"""Eviction clients people run, as processes against the real control plane: Karpenter's
KWOK provider (`sigs.k8s.io/karpenter/kwok`) and the descheduler, both built by
`realcluster/build` from their Go modules.

    with RealCluster(workdir, bin_dir) as cluster, Karpenter(cluster, bin_dir) as karpenter:
        karpenter.apply_node_pool(node_pool("pool-a"))   # NodePool + its KWOKNodeClass

Each runs under a ServiceAccount of its own, with exactly the RBAC its Helm chart (copied
from the module by the build) grants: the chart is rendered with the built helm and only
its ServiceAccount, Roles, ClusterRoles and their bindings are applied. Leader election is
off. Karpenter's CRDs come from the module too (`pkg/apis/crds`, `kwok/apis/crds`).
"""

from __future__ import annotations

import functools
import json
import subprocess
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from realcluster.cluster import START_TIMEOUT, ClusterError, RealCluster, free_port, wait_until
from realcluster.kubeconfig import write_kubeconfig
from realcluster.processes import Child

Obj = dict[str, Any]

RBAC_KINDS = frozenset(
    {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
)
KARPENTER_NAMESPACE = "karpenter"
DESCHEDULER_NAMESPACE = "descheduler"
NODE_CLASS = "default"  # the KWOKNodeClass every NodePool of `node_pool` refers to
# Karpenter's nodes carry this taint (`node_pool`), so that only pods that tolerate it land
# on them: other tests on the same cluster keep to their own nodes.
KARPENTER_TAINT = {
    "key": "realcluster.graceful-drain.dev/karpenter",
    "value": "true",
    "effect": "NoSchedule",
}
TOKEN_SECONDS = 24 * 3600


def kubectl_apply(cluster: RealCluster, objects: Sequence[Obj]) -> None:
    """`kubectl apply --server-side` of `objects` (as one List) with the admin kubeconfig."""
    document = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    result = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=realcluster",
            "-f",
            "-",
        ],
        input=document,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise ClusterError(f"kubectl apply exited {result.returncode}: {result.stderr[-2000:]}")


def yaml_objects(text: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict) and doc]


def chart_rbac(
    bin_dir: Path, chart: Path, release: str, namespace: str, values: Sequence[str] = ()
) -> list[Obj]:
    """The ServiceAccount and RBAC objects `helm template` renders from `chart`."""
    sets = [arg for value in values for arg in ("--set", value)]
    result = subprocess.run(
        [str(bin_dir / "helm"), "template", release, str(chart), "--namespace", namespace, *sets],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise ClusterError(f"helm template {chart} exited {result.returncode}: {result.stderr}")
    objects = [o for o in yaml_objects(result.stdout) if o.get("kind") in RBAC_KINDS]
    for obj in objects:
        if obj["kind"] in {"ServiceAccount", "Role", "RoleBinding"}:
            obj["metadata"].setdefault("namespace", namespace)
    return objects


def service_account_kubeconfig(cluster: RealCluster, namespace: str, name: str, path: Path) -> Path:
    """A kubeconfig holding a token (TokenRequest) of ServiceAccount `namespace/name`."""
    answer = cluster.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS},
        },
    )
    user = f"system:serviceaccount:{namespace}:{name}"
    return write_kubeconfig(path, cluster.server, cluster.ca_pem, answer["status"]["token"], user)


def namespace_object(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except OSError:
        return False


class _Addon:
    name = ""

    def __init__(self, cluster: RealCluster, bin_dir: Path) -> None:
        self.cluster = cluster
        self.bin_dir = bin_dir
        self.child: Child | None = None

    @property
    def log_path(self) -> Path:
        return self.cluster.workdir / f"{self.name}.log"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_records(self) -> list[Obj]:
        """The process's JSON log lines (Karpenter logs JSON; other lines are skipped)."""
        records = []
        for line in self.log_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records

    def start(self) -> _Addon:
        raise NotImplementedError

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None

    def __enter__(self) -> _Addon:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class Karpenter(_Addon):
    """Karpenter's KWOK provider: its nodes are kwok's (annotated `kwok.x-k8s.io/node:
    fake`), run by the cluster's kwok like the others."""

    name = "karpenter"

    @property
    def module(self) -> Path:
        return self.bin_dir / "karpenter-module"

    def crds(self) -> list[Obj]:
        files = sorted((self.module / "crds").glob("*.yaml"))
        files += sorted((self.module / "kwok-crds").glob("*.yaml"))
        return [obj for file in files for obj in yaml_objects(file.read_text())]

    def start(self) -> Karpenter:
        cluster = self.cluster
        kubectl_apply(cluster, [namespace_object(KARPENTER_NAMESPACE)])
        crds = self.crds()
        kubectl_apply(cluster, crds)
        for crd in crds:
            wait_until(
                f"CRD {crd['metadata']['name']} Established",
                functools.partial(self._established, crd["metadata"]["name"]),
                START_TIMEOUT,
            )
        kubectl_apply(
            cluster,
            chart_rbac(self.bin_dir, self.module / "chart", "karpenter", KARPENTER_NAMESPACE),
        )
        kubectl_apply(cluster, [kwok_node_class()])
        kubeconfig = service_account_kubeconfig(
            cluster, KARPENTER_NAMESPACE, "karpenter", cluster.workdir / "karpenter.kubeconfig"
        )
        self.health_port, self.metrics_port = free_port(), free_port()
        env = {
            "KUBECONFIG": str(kubeconfig),
            "SYSTEM_NAMESPACE": KARPENTER_NAMESPACE,
            "KARPENTER_SERVICE": "karpenter",
            "KUBERNETES_MIN_VERSION": "1.19.0-0",
            "DISABLE_LEADER_ELECTION": "true",
            "HEALTH_PROBE_PORT": str(self.health_port),
            "METRICS_PORT": str(self.metrics_port),
            "LOG_LEVEL": "debug",
            "HOME": str(cluster.workdir),
        }
        self.child = Child(self.name, [str(self.bin_dir / "karpenter")], self.log_path, env=env)
        try:
            wait_until("karpenter /readyz", self._ready, START_TIMEOUT, self.child)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> Karpenter:
        return self.start()

    def _established(self, name: str) -> bool:
        crd = self.cluster.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        )
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    def _ready(self) -> bool:
        return _http_ok(f"http://127.0.0.1:{self.health_port}/readyz")

    def metrics(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as response:
            return str(response.read().decode())

    def apply_node_pool(self, pool: Obj) -> None:
        kubectl_apply(self.cluster, [pool])


def kwok_node_class(name: str = NODE_CLASS) -> Obj:
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": name},
        "spec": {},
    }


def node_pool(
    name: str,
    *,
    consolidate_after: str = "Never",
    consolidation_policy: str = "WhenEmptyOrUnderutilized",
    expire_after: str = "Never",
    termination_grace_period: str | None = None,
    cpu_limit: str = "64",
    taint: bool = True,
) -> Obj:
    """A NodePool of on-demand KWOK nodes (spot-to-spot consolidation is gated off by
    default, so on-demand keeps single-node replacement possible), tainted
    `KARPENTER_TAINT` unless `taint` is false, labelled `karpenter.sh/nodepool: NAME` by
    Karpenter."""
    template: Obj = {
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.kwok.sh",
                "kind": "KWOKNodeClass",
                "name": NODE_CLASS,
            },
            "expireAfter": expire_after,
            "taints": [dict(KARPENTER_TAINT)] if taint else [],
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            ],
        },
    }
    if termination_grace_period is not None:
        template["spec"]["terminationGracePeriod"] = termination_grace_period
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": template,
            "limits": {"cpu": cpu_limit},
            "disruption": {
                "consolidationPolicy": consolidation_policy,
                "consolidateAfter": consolidate_after,
            },
        },
    }


def on_pool(pod_spec: Obj, pool: str) -> Obj:
    """`pod_spec` made to run on NodePool `pool`'s nodes only (selector + toleration)."""
    pod_spec["nodeSelector"] = {
        **(pod_spec.get("nodeSelector") or {}),
        "karpenter.sh/nodepool": pool,
    }
    pod_spec["tolerations"] = [
        *(pod_spec.get("tolerations") or []),
        {**KARPENTER_TAINT, "operator": "Equal"},
    ]
    return pod_spec


class Descheduler(_Addon):
    """The descheduler every `interval`, with `policy` (a DeschedulerPolicy object)."""

    name = "descheduler"

    def __init__(
        self, cluster: RealCluster, bin_dir: Path, policy: Obj, interval: str = "5s"
    ) -> None:
        super().__init__(cluster, bin_dir)
        self.policy = policy
        self.interval = interval

    def start(self) -> Descheduler:
        cluster = self.cluster
        kubectl_apply(cluster, [namespace_object(DESCHEDULER_NAMESPACE)])
        chart = self.bin_dir / "descheduler-module" / "chart"
        kubectl_apply(
            cluster, chart_rbac(self.bin_dir, chart, "descheduler", DESCHEDULER_NAMESPACE)
        )
        kubeconfig = service_account_kubeconfig(
            cluster,
            DESCHEDULER_NAMESPACE,
            "descheduler",
            cluster.workdir / "descheduler.kubeconfig",
        )
        policy_path = cluster.workdir / "descheduler-policy.yaml"
        policy_path.write_text(yaml.safe_dump(self.policy))
        self.port = free_port()
        argv = [
            str(self.bin_dir / "descheduler"),
            f"--kubeconfig={kubeconfig}",
            f"--policy-config-file={policy_path}",
            f"--descheduling-interval={self.interval}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={cluster.workdir / 'descheduler-certs'}",
            "--v=3",
        ]
        self.child = Child(self.name, argv, self.log_path, env={"HOME": str(cluster.workdir)})
        try:
            wait_until("the descheduler's first cycle", self._cycled, START_TIMEOUT, self.child)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> Descheduler:
        return self.start()

    def _cycled(self) -> bool:
        return "Number of evictions/requests" in self.log_text()
