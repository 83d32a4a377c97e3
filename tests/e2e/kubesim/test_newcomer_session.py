"""A newcomer's everyday kubectl session on a bare `kubesim serve` (kubectl 1.32, the
dispatcher's default): nodes, Deployments and their rollouts, Services, the three patch
forms, server-side apply and its conflict, `auth can-i`, jsonpath and custom columns, the
README's Job (it completes, its logs print `hello`), CronJobs and `create job --from`, logs
with --tail, --since, -f and --previous, `autoscale` (autoscaling/v1), a PodDisruptionBudget
applied twice, `explain`. Every command behaves as on a cluster, or fails (exec, attach,
port-forward) with a message naming kubesim. Each step is checked on its own, and a failing
run lists every step that did not behave. `explain` is also run with kubectl 1.27 and 1.33.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.controller.drain_cluster import KubectlRun
from tests.e2e.kubesim.test_serve_cli import kubesim_serve
from tests.e2e.real_control_plane.harness import kubectl, pinned_kubectl

pytestmark = pytest.mark.e2e

Check = Callable[[KubectlRun], bool]


def ok(*words: str) -> Check:
    """Exit 0, and every word in what it printed."""
    return lambda run: run.code == 0 and all(w in run.stdout for w in words)


def lines(count: int) -> Check:
    return lambda run: run.code == 0 and len(run.stdout.splitlines()) == count


def names_kubesim(*words: str) -> Check:
    """Fails, saying that kubesim does not simulate it."""
    return lambda run: (
        run.code != 0 and "kubesim" in run.stderr and all(w in run.stderr for w in words)
    )


def conflict(run: KubectlRun) -> bool:
    return run.code != 0 and "conflict" in run.stderr.lower()


CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: {}\n"
PDB = """apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: web
"""
WAIT = "--timeout=60s"


@dataclass(frozen=True)
class Step:
    args: tuple[str, ...]
    check: Check
    stdin: str | None = None


def step(*args: str, check: Check, stdin: str | None = None) -> Step:
    return Step(args, check, stdin)


SESSION: tuple[Step, ...] = (
    step("get", "nodes", check=ok("node-1", "node-2", "Ready")),
    step("create", "deployment", "web", "--image=nginx", "--replicas=2",
         check=ok("deployment.apps/web created")),
    step("rollout", "status", "deployment", "web", WAIT, check=ok("successfully rolled out")),
    step("get", "deployments", "-o", "wide", check=ok("web", "2/2")),
    step("set", "image", "deployment/web", "nginx=nginx:1.27", check=ok("image updated")),
    step("rollout", "status", "deployment", "web", WAIT, check=ok("successfully rolled out")),
    step("rollout", "history", "deployment", "web", check=ok("REVISION", "1", "2")),
    step("rollout", "undo", "deployment", "web", check=ok("rolled back")),
    step("rollout", "restart", "deployment", "web", check=ok("restarted")),
    step("rollout", "status", "deployment", "web", WAIT, check=ok("successfully rolled out")),
    step("scale", "deployment", "web", "--replicas=3", check=ok("scaled")),
    step("wait", "--for=jsonpath={.status.readyReplicas}=3", "deployment/web", WAIT,
         check=ok("condition met")),
    step("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].status.phase}",
         check=ok("Running")),
    step("get", "pods", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName",
         check=ok("NAME", "NODE", "node-")),
    step("describe", "deployment", "web", check=ok("Replicas:", "RollingUpdateStrategy")),
    step("expose", "deployment", "web", "--port=80", check=ok("service/web exposed")),
    step("get", "service", "kubernetes", check=ok("kubernetes", "443/TCP")),
    step("get", "endpointslices", check=ok("kubernetes", "web-")),
    step("patch", "deployment", "web", "-p", '{"metadata":{"labels":{"tier":"front"}}}',
         check=ok("patched")),
    step("patch", "deployment", "web", "--type=merge",
         "-p", '{"metadata":{"annotations":{"team":"a"}}}', check=ok("patched")),
    step("patch", "deployment", "web", "--type=json",
         "-p", '[{"op":"add","path":"/metadata/labels/x","value":"y"}]', check=ok("patched")),
    step("apply", "--server-side", "-f", "-", stdin=CONFIGMAP.format("a"),
         check=ok("configmap/settings serverside-applied")),
    step("apply", "--server-side", "--field-manager=other", "-f", "-",
         stdin=CONFIGMAP.format("b"), check=conflict),
    step("auth", "can-i", "create", "pods", check=ok("yes")),
    # README's Job: it completes and its logs print hello.
    step("create", "job", "hello", "--image=busybox", "--", "echo", "hello",
         check=ok("job.batch/hello created")),
    step("wait", "--for=condition=complete", "job/hello", WAIT, check=ok("condition met")),
    step("logs", "job/hello", check=ok("hello")),
    step("logs", "job/hello", "--tail=1", check=lines(1)),
    step("logs", "job/hello", "--since=1h", check=ok("hello")),
    step("get", "jobs", "hello", "-o", "jsonpath={.status.succeeded}", check=ok("1")),
    step("create", "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *",
         "--", "echo", "tick", check=ok("cronjob.batch/tick created")),
    step("get", "cronjobs", check=ok("tick", "*/5 * * * *")),
    step("create", "job", "tick-now", "--from=cronjob/tick", check=ok("job.batch/tick-now")),
    step("wait", "--for=condition=complete", "job/tick-now", WAIT, check=ok("condition met")),
    step("logs", "job/tick-now", check=ok("tick")),
    step("run", "follow", "--image=busybox", "--restart=Never",
         "--annotations=sim.kubesim.io/run-for=2s", "--", "echo", "following",
         check=ok("pod/follow created")),
    step("wait", "--for=condition=Ready", "pod/follow", WAIT, check=ok("condition met")),
    step("logs", "-f", "follow", check=ok("following", "exited with code 0")),
    step("run", "crash", "--image=busybox", "--annotations=sim.kubesim.io/crash-loop=true",
         "--annotations=sim.kubesim.io/crash-after=100ms", check=ok("pod/crash created")),
    step("wait", "--for=jsonpath={.status.containerStatuses[0].restartCount}=1", "pod/crash",
         WAIT, check=ok("condition met")),
    step("logs", "crash", "--previous", check=ok("exited with code 1 (Error)")),
    step("run", "one", "--image=nginx", check=ok("pod/one created")),
    step("wait", "--for=condition=Ready", "pod/one", WAIT, check=ok("condition met")),
    step("exec", "one", "--", "ls", check=names_kubesim("exec")),
    step("attach", "one", check=names_kubesim("attach")),
    step("port-forward", "pod/one", "18080:80", check=names_kubesim("port-forward")),
    step("autoscale", "deployment", "web", "--min=1", "--max=3", "--cpu-percent=50",
         check=ok("autoscaled")),
    step("get", "hpa", "web", check=ok("cpu: <unknown>/50%")),
    step("apply", "-f", "-", stdin=PDB, check=ok("poddisruptionbudget.policy/web created")),
    # `configured`, as on kube-apiserver: the selector's `replace` strategy is always patched.
    step("apply", "-f", "-", stdin=PDB, check=ok("poddisruptionbudget.policy/web configured")),
    step("explain", "deployment.spec.strategy", check=ok("rollingUpdate", "<string>")),
    step("get", "events", check=ok("SuccessfulCreate", "Completed")),
    step("get", "all", check=ok("deployment.apps/web", "cronjob.batch/tick")),
    step("delete", "job", "hello", check=ok('job.batch "hello" deleted')),
    step("delete", "deployment", "web", check=ok('deployment.apps "web" deleted')),
)  # fmt: skip


async def test_a_newcomer_session_on_kubesim_serve(tmp_path: Path) -> None:
    assert len(SESSION) >= 40
    failed = []
    with kubesim_serve(tmp_path) as (kubeconfig, _started):
        for s in SESSION:
            run = await kubectl(kubeconfig, *s.args, check=False, stdin=s.stdin)
            if not s.check(run):
                failed.append(f"kubectl {' '.join(s.args)} -> {run.code}\n{run.stdout}"
                              f"{run.stderr}")  # fmt: skip
    assert not failed, "\n\n".join(failed)


@pytest.mark.parametrize("release", ["1.27", "1.33"])
async def test_explain_prints_the_field_tree(tmp_path: Path, release: str) -> None:
    with kubesim_serve(tmp_path, "--bare") as (kubeconfig, _started):
        run = await kubectl(kubeconfig, "explain", "deployment.spec.strategy",
                            binary=pinned_kubectl(release))  # fmt: skip
        recursive = await kubectl(kubeconfig, "explain", "deployment.spec", "--recursive",
                                  binary=pinned_kubectl(release))  # fmt: skip
    assert "KIND:       Deployment" in run.stdout
    assert "FIELD: strategy <DeploymentStrategy>" in run.stdout
    assert "rollingUpdate\t<RollingUpdateDeployment>" in run.stdout
    assert "type\t<string>" in run.stdout
    assert "maxSurge\t<IntOrString>" in recursive.stdout
    assert "containers\t<[]Container> -required-" in recursive.stdout
