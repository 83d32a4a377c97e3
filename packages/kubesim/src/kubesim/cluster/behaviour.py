"""How a simulated pod behaves, declared on the pod (or its template) as annotations.

Everything a simulated kubelet needs is on the API object, so scenarios,
tests and `kubectl apply` all drive it the same way. Durations are Go-style
("1.5s", "200ms", "2m") or plain seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..goduration import parse_go_duration

PREFIX = "sim.kubesim.io/"
START_DELAY = PREFIX + "start-delay"  # container start (image pull + exec)
READY_DELAY = PREFIX + "ready-delay"  # from running to passing readiness
NEVER_READY = PREFIX + "never-ready"  # "true": readiness never passes
CRASH_LOOP = PREFIX + "crash-loop"  # "true": exits 1 after start, restarted with back-off
CRASH_AFTER = PREFIX + "crash-after"  # how long a crash-looping container runs before exiting
EXIT_DELAY = PREFIX + "exit-delay"  # how long the process takes to exit after SIGTERM
MEMORY_USAGE = PREFIX + "memory-usage"  # working set, "300Mi" or per container "app=300Mi,b=1Mi"
OOM_AFTER = PREFIX + "oom-after"  # killed by the cgroup OOM killer this long after start
RUN_FOR = PREFIX + "run-for"  # the containers exit by themselves this long after start
EXIT_CODE = PREFIX + "exit-code"  # ... with this code (default 0); Completed if 0, else Error

# A Job's pod without `run-for` finishes by itself after this short run, with exit code 0
# (`kubectl create job hello --image=busybox -- echo hello` completes); any other pod runs
# until it is stopped.
JOB_POD_RUN_FOR = 1.0


def parse_duration(text: str) -> float:
    """Go-style duration or a bare number of seconds; raises ValueError on anything else."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    return parse_go_duration(text)


@dataclass(frozen=True, slots=True)
class PodBehaviour:
    start_delay: float = 0.0
    ready_delay: float = 0.0
    never_ready: bool = False
    crash_loop: bool = False
    crash_after: float = 0.0
    exit_delay: float = 0.0
    memory_usage: str | None = None
    oom_after: float | None = None
    run_for: float | None = None  # None: runs until stopped
    exit_code: int = 0

    @classmethod
    def from_pod(cls, pod: dict[str, Any]) -> PodBehaviour:
        """Read the annotations; a malformed value falls back to the default."""
        ann = pod.get("metadata", {}).get("annotations") or {}

        def duration(key: str, default: float) -> float:
            try:
                return parse_duration(str(ann[key])) if key in ann else default
            except ValueError:
                return default

        oom = duration(OOM_AFTER, -1.0)
        run_for = duration(RUN_FOR, JOB_POD_RUN_FOR if _owned_by_job(pod) else -1.0)
        try:
            exit_code = int(str(ann.get(EXIT_CODE, "0")).strip())
        except ValueError:
            exit_code = 0
        return cls(
            start_delay=duration(START_DELAY, 0.0),
            ready_delay=duration(READY_DELAY, 0.0),
            never_ready=str(ann.get(NEVER_READY, "")).lower() == "true",
            crash_loop=str(ann.get(CRASH_LOOP, "")).lower() == "true",
            crash_after=duration(CRASH_AFTER, 0.0),
            exit_delay=duration(EXIT_DELAY, 0.0),
            memory_usage=ann.get(MEMORY_USAGE),
            oom_after=oom if oom >= 0 else None,
            run_for=run_for if run_for >= 0 else None,
            exit_code=exit_code if 0 <= exit_code <= 255 else 0,
        )


def _owned_by_job(pod: dict[str, Any]) -> bool:
    refs = pod.get("metadata", {}).get("ownerReferences") or []
    return any(r.get("kind") == "Job" and r.get("controller") for r in refs)


def memory_usage_by_container(pod: dict[str, Any]) -> dict[str, str]:
    """The `memory-usage` annotation per container name.

    A bare quantity is the first container's working set; "app=300Mi,sidecar=20Mi"
    names each container. Containers not named use nothing.
    """
    raw = str((pod.get("metadata", {}).get("annotations") or {}).get(MEMORY_USAGE, "")).strip()
    if not raw:
        return {}
    if "=" not in raw:
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        return {str(containers[0].get("name", "")): raw}
    out = {}
    for part in raw.split(","):
        name, _, value = part.partition("=")
        if name.strip() and value.strip():
            out[name.strip()] = value.strip()
    return out
