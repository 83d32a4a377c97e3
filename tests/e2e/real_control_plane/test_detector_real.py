"""`graceful-drain termination-cause` against the real kube-apiserver, as a preStop hook runs
it: its own process, the Downward API environment, a token of the workload's ServiceAccount
bound to the shipped detector RBAC (deploy/detector, with its optional node read).

The pod's object lives on while it terminates because kwok (realcluster/kwok.yaml) keeps it
for its `sim.kubesim.io/exit-delay`, as a process finishing its drain keeps a real pod.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kubesim.kubeconfig import write_kubeconfig
from realcluster.cluster import RealCluster
from tests.e2e.watching import is_ready

from .harness import BOUND, REPO, kubectl, refused, requests_of, watch_objects, web

pytestmark = [pytest.mark.e2e, pytest.mark.realcluster]

Obj = dict[str, Any]
SERVICE_ACCOUNT = "my-app"  # the name deploy/detector's examples bind
EXIT_DELAY = "25s"  # below terminationGracePeriodSeconds (30 s)


def detector_overlay(directory: Path, namespace: str) -> Path:
    """deploy/detector (and its nodes/ part) for `namespace`'s ServiceAccount my-app."""
    directory.mkdir(parents=True, exist_ok=True)
    subject = textwrap.dedent(f"""\
        - op: replace
          path: /subjects/0/namespace
          value: {namespace}""")
    (directory / "kustomization.yaml").write_text(
        textwrap.dedent("""\
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        resources:
          - {detector}
          - {nodes}
        namespace: {namespace}
        nameSuffix: -{namespace}
        patches:
          - target: {{kind: RoleBinding}}
            patch: |-
        {subject}
          - target: {{kind: ClusterRoleBinding}}
            patch: |-
        {subject}
        """).format(
            detector=os.path.relpath(REPO / "deploy" / "detector", directory),
            nodes=os.path.relpath(REPO / "deploy" / "detector" / "nodes", directory),
            namespace=namespace,
            subject=textwrap.indent(subject, " " * 6),
        )
    )
    return directory


async def workload_kubeconfig(cluster: RealCluster, namespace: str, tmp_path: Path) -> Path:
    kubeconfig = cluster.kubeconfig_path
    await kubectl(kubeconfig, "create", "serviceaccount", SERVICE_ACCOUNT, "-n", namespace)
    await kubectl(kubeconfig, "apply", "-k", str(detector_overlay(tmp_path / "rbac", namespace)))
    token = await kubectl(kubeconfig, "create", "token", SERVICE_ACCOUNT, "-n", namespace)
    return write_kubeconfig(
        tmp_path / "workload.kubeconfig", cluster.server, cluster.ca_pem, token.stdout.strip(),
        f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}",
    )  # fmt: skip


async def run_detector(kubeconfig: Path, pod: Obj, *args: str) -> tuple[int, Obj]:
    """The CLI as the pod's preStop hook would run it: (exit status, verdict)."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO / "src"),
        "POD_NAME": pod["metadata"]["name"],
        "POD_NAMESPACE": pod["metadata"]["namespace"],
        "POD_UID": pod["metadata"]["uid"],
        "NODE_NAME": pod["spec"]["nodeName"],
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "graceful_drain.cli", "termination-cause", "--json",
        "--kubeconfig", str(kubeconfig), "--grace-period", "30", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(BOUND):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert out, err.decode()
    return int(process.returncode or 0), json.loads(out)


def assert_never_refused(cluster: RealCluster, namespace: str) -> None:
    user = f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}"
    records = requests_of(cluster, user)
    assert records, "the detector made no request"
    assert refused(records) == []


async def the_pod(cluster: RealCluster, namespace: str) -> Obj:
    """The namespace's one pod, once it is Ready."""
    [pod] = await watch_objects(
        cluster, "v1", "pods", "Pod", namespace, lambda pods: len(pods) == 1 and is_ready(pods[0])
    )
    return pod


async def until_terminating(cluster: RealCluster, pod: Obj) -> Obj:
    """The pod once its deletionTimestamp is set."""
    uid = pod["metadata"]["uid"]

    def terminating(pods: list[Obj]) -> bool:
        return any(p["metadata"]["uid"] == uid and p["metadata"].get("deletionTimestamp")
                   for p in pods)  # fmt: skip

    pods = await watch_objects(
        cluster, "v1", "pods", "Pod", pod["metadata"]["namespace"], terminating
    )
    [current] = [p for p in pods if p["metadata"]["uid"] == uid]
    return current


def decisive(verdict: Obj) -> Obj:
    [item] = [e for e in verdict["evidence"] if e["decisive"]]
    return dict(item)


async def slow_exiting_web(cluster: RealCluster, namespace: str) -> Obj:
    manifest = web(namespace, ready_delay="0s")
    template = manifest["spec"]["template"]
    template["metadata"]["annotations"]["sim.kubesim.io/exit-delay"] = EXIT_DELAY
    template["spec"]["terminationGracePeriodSeconds"] = 30
    template["spec"]["serviceAccountName"] = SERVICE_ACCOUNT
    await kubectl(cluster.kubeconfig_path, "apply", "-f", "-", stdin=json.dumps(manifest))
    return await the_pod(cluster, namespace)


async def test_a_kubectl_drain_eviction_is_a_drain(
    real_cluster: RealCluster, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = await workload_kubeconfig(real_cluster, namespace, tmp_path)
    pod = await slow_exiting_web(real_cluster, namespace)
    node = pod["spec"]["nodeName"]
    drain = ("drain", node, "--ignore-daemonsets", "--pod-selector=app=web", "--timeout=100s")
    draining = asyncio.create_task(kubectl(real_cluster.kubeconfig_path, *drain, check=False))
    try:
        terminating = await until_terminating(real_cluster, pod)
        code, verdict = await run_detector(kubeconfig, terminating)
    finally:
        await draining

    conditions = {c["type"]: c for c in terminating["status"].get("conditions") or []}
    assert conditions["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"  # the real one
    assert code == 0
    assert (verdict["cause"], verdict["action"]) == ("voluntary", "drain_gracefully")
    assert decisive(verdict)["fact"] == "disruption_target"
    assert_never_refused(real_cluster, namespace)


@pytest.mark.parametrize("how", ["kubectl delete pod", "scale to 0"])
async def test_a_deletion_or_a_scale_down_is_a_drain(
    real_cluster: RealCluster, namespace: str, tmp_path: Path, how: str
) -> None:
    kubeconfig = await workload_kubeconfig(real_cluster, namespace, tmp_path)
    pod = await slow_exiting_web(real_cluster, namespace)
    admin = real_cluster.kubeconfig_path
    if how == "kubectl delete pod":
        await kubectl(admin, "delete", "pod", pod["metadata"]["name"], "-n", namespace,
                      "--wait=false")  # fmt: skip
    else:
        await kubectl(admin, "scale", "deployment", "web", "-n", namespace, "--replicas=0")
    terminating = await until_terminating(real_cluster, pod)

    code, verdict = await run_detector(kubeconfig, terminating)

    assert "DisruptionTarget" not in {
        c["type"] for c in terminating["status"].get("conditions") or []
    }
    assert code == 0
    assert (verdict["cause"], verdict["action"]) == ("voluntary", "drain_gracefully")
    assert decisive(verdict)["source"] == "pod"
    assert_never_refused(real_cluster, namespace)


async def test_a_hanging_api_sheds_load_by_the_deadline(
    real_cluster: RealCluster, namespace: str, tmp_path: Path
) -> None:
    """Every request to the API hangs (a loopback listener that never answers, standing in
    for an overloaded or partitioned API server): the verdict is the conservative one."""
    kubeconfig = await workload_kubeconfig(real_cluster, namespace, tmp_path)
    pod = await slow_exiting_web(real_cluster, namespace)
    accepted: list[asyncio.StreamWriter] = []

    async def never_answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hanging = tmp_path / "hanging.kubeconfig"
    hanging.write_text(kubeconfig.read_text().replace(real_cluster.server,
                                                      f"https://127.0.0.1:{port}"))  # fmt: skip
    try:
        code, verdict = await run_detector(hanging, pod, "--deadline", "2")
    finally:
        server.close()
        for writer in accepted:
            writer.close()

    assert accepted  # the detector did try the API
    assert code in (10, 11)  # shed load (11: nothing readable in time)
    assert verdict["action"] == "shed_load_and_exit_fast"
    assert verdict["cause"] == "indeterminate"
