"""A newcomer's first kubectl session on a cluster, as README's "explore a cluster yourself"
shows it: run on `kubesim serve` (test_serve_cli.py) and, compared, on the real control plane
(tests/e2e/differential/test_kubectl_newcomer.py).

Each step is one kubectl command a user types; its outcome is what the user reads from it,
reduced to what must not depend on the server's timing: the exit code and, per step, the
message, the last line of `rollout status`, the events' (type, reason, kind) of the
controllers both servers run, the fields `describe pod` shows, the stored pod templates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.real_control_plane.harness import kubectl

ROLLOUT_TIMEOUT = "100s"  # below the harness's bound, so a stuck rollout ends with its output
EVENT_COLUMNS = "custom-columns=TYPE:.type,REASON:.reason,KIND:.involvedObject.kind"
# Events both servers' controllers write (kwok's kubelet writes none, kubesim's does).
COMPARED_EVENT_KINDS = ("Deployment", "ReplicaSet")

SESSION: tuple[tuple[str, ...], ...] = (
    ("create", "deployment", "web", "--image=nginx"),
    ("create", "job", "hello", "--image=busybox", "--", "echo", "hello"),
    ("run", "one", "--image=nginx"),
    ("expose", "deployment", "web", "--port=80"),
    ("scale", "deployment", "web", "--replicas=3"),
    ("rollout", "restart", "deployment", "web"),
    ("rollout", "status", "deployment", "web", f"--timeout={ROLLOUT_TIMEOUT}"),
    # every namespace has its `default` ServiceAccount (kube-controller-manager's controller)
    ("get", "serviceaccounts", "-o", "name"),
    ("get", "events", "-o", EVENT_COLUMNS),
    ("describe", "pod", "one"),
    # The pod templates as stored: what the protobuf bodies of `create` decoded to, defaulted.
    ("get", "deployment", "web", "-o", "jsonpath={.spec.template.spec}"),
    ("get", "job", "hello", "-o", "jsonpath={.spec.template.spec}"),
    # The README's Job completes (kwok's job-pod-exit stage, kubesim's kubelet).
    ("wait", "--for=condition=complete", "job/hello", f"--timeout={ROLLOUT_TIMEOUT}"),
)


@dataclass(frozen=True)
class Step:
    command: str
    code: int
    outcome: tuple[str, ...]
    stderr: str

    def __str__(self) -> str:
        return f"kubectl {self.command} -> {self.code} {self.outcome} {self.stderr}"


def outcome(args: tuple[str, ...], stdout: str) -> tuple[str, ...]:
    lines = [line.rstrip() for line in stdout.splitlines() if line.strip()]
    if args[:2] == ("rollout", "status"):
        return tuple(lines[-1:])
    if args[:2] == ("get", "events"):
        rows = {tuple(line.split()) for line in lines[1:]}
        return tuple(sorted(" ".join(r) for r in rows if r[-1] in COMPARED_EVENT_KINDS))
    if "-o" in args and args[args.index("-o") + 1].startswith("jsonpath="):
        return (json.dumps(json.loads(stdout), sort_keys=True),)
    if args[0] == "describe":
        # The fields shown: a top-level line's label (values depend on the node and time).
        return tuple(line.split(":")[0] for line in lines if not line.startswith(" "))
    return tuple(lines)


async def run_session(kubeconfig: Path, namespace: str) -> list[Step]:
    """Every step, in order, whatever its exit code (a failed step does not stop the rest,
    so one run shows every command that fails)."""
    steps = []
    for args in SESSION:
        run = await kubectl(kubeconfig, "-n", namespace, *args, check=False)
        steps.append(Step(" ".join(args), run.code, outcome(args, run.stdout), run.stderr))
    return steps
