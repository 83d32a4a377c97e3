"""One pod on a simulated kubelet: start, readiness, crash and OOM loops, termination.

Like the kubelet's pod worker, it owns the pod's containers and writes the
pod's status (PUT pods/status with the resourceVersion it read, re-reading on
409). Timings come from the pod's behaviour annotations (`behaviour.py`).

Termination, for a deletion, an eviction or a preemption, is the kubelet's
`SyncTerminatingPod`: SIGTERM to the running containers, which exit after the
pod's exit-delay or are killed at the grace deadline (exit code 0 or 137);
then the terminal status; then, if the pod was deleted, a DELETE with grace
period 0 and a UID precondition, as the status manager does. An OOM kill
skips all that: the container dies at once with OOMKilled/137 and is
restarted in place under the crash back-off.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Protocol

from kubesim.cluster.event_recorder import EventRecorder
from kubesim.lifecycle import cancel_and_wait
from kubesim.types import Obj

from ..apiserver.meta import rfc3339
from ..client import ApiStatusError, KubeClient, resource_path
from .behaviour import PodBehaviour
from .containerruntime import CrashBackoff, container_id, go_duration, image_id, normalize_image
from .kubeletconfig import KubeletConfig
from .podstatus import TERMINAL_PHASES, ContainerRecord, PodRecord, render_status

log = logging.getLogger(__name__)

UNKNOWN_CONTAINER_MESSAGE = "The container could not be located when the pod was terminated"


class PodGone(Exception):
    """The pod object no longer exists (or is another pod with the same name)."""


class WorkerHost(Protocol):
    """What a pod worker needs from its kubelet."""

    client: KubeClient
    recorder: EventRecorder
    config: KubeletConfig
    node_name: str

    def allocate_ip(self, uid: str) -> str: ...
    def release_ip(self, uid: str) -> None: ...
    def admission_rejection(self, pod: Obj) -> str | None: ...
    def emit_later(
        self, obj: Obj, type_: str, reason: str, message: str, field_path: str = ""
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Eviction:
    """Why the kubelet itself ends the pod: the status reason/message and DisruptionTarget."""

    reason: str
    message: str
    condition: Obj


def now_rfc3339() -> str:
    return rfc3339(dt.datetime.now(dt.UTC))


def _rv(obj: Obj) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


def format_pod(pod: Obj) -> str:
    """kubelet `format.Pod`: name_namespace(uid)."""
    meta = pod["metadata"]
    return f"{meta['name']}_{meta.get('namespace', '')}({meta.get('uid', '')})"


class PodWorker:
    def __init__(self, host: WorkerHost, pod: Obj) -> None:
        self.host = host
        self.pod = pod
        self.uid: str = pod["metadata"].get("uid", "")
        self.behaviour = PodBehaviour.from_pod(pod)
        spec = pod.get("spec") or {}
        # convertToAPIContainerStatuses: the default waiting reason while the sandbox starts
        waiting = "PodInitializing" if spec.get("initContainers") else "ContainerCreating"
        self.record = PodRecord(
            containers=[
                ContainerRecord(c.get("name", ""), c.get("image", ""), reason=waiting)
                for c in spec.get("containers") or []
            ],
            init_containers=[
                ContainerRecord(c.get("name", ""), c.get("image", ""), reason=waiting)
                for c in spec.get("initContainers") or []
            ],
        )
        # Containers of a simulated pod share one timeline, hence one back-off.
        self._backoff = CrashBackoff(host.config.backoff_initial, host.config.backoff_max)
        self._kill = asyncio.Event()
        self._kill_grace = 0.0
        self._grace_changed = asyncio.Event()
        self.eviction: Eviction | None = None
        self.started = asyncio.Event()  # admitted and running its lifecycle
        self.terminated = asyncio.Event()  # containers are gone for good
        self.task: asyncio.Task[None] | None = None
        if pod["metadata"].get("deletionTimestamp"):
            self._request_kill(self._deletion_grace(pod))

    # control from the kubelet

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run(), name=f"pod-{self.uid}")

    async def cancel(self) -> None:
        """Stop simulating without writing anything (the pod is gone, or the kubelet stops)."""
        await cancel_and_wait(self.task)

    def update(self, pod: Obj) -> None:
        if pod["metadata"].get("uid") != self.uid or _rv(pod) < _rv(self.pod):
            return
        self.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self._request_kill(self._deletion_grace(pod))

    def evict(self, eviction: Eviction, grace: float) -> None:
        self.eviction = eviction
        self._request_kill(grace)

    @property
    def active(self) -> bool:
        """Running and not being stopped: what the eviction manager may pick."""
        return self.started.is_set() and not self._kill.is_set() and not self.terminated.is_set()

    def _deletion_grace(self, pod: Obj) -> float:
        seconds = pod["metadata"].get("deletionGracePeriodSeconds")
        return float(seconds) if isinstance(seconds, int) else 30.0

    def _request_kill(self, grace: float) -> None:
        effective = max(grace, self.host.config.minimum_kill_grace)
        if not self._kill.is_set():
            self._kill_grace = effective
            self._kill.set()
        elif effective < self._kill_grace:
            self._kill_grace = effective  # a shorter grace period brings the deadline forward
            self._grace_changed.set()

    # the worker

    async def run(self) -> None:
        try:
            await self._run()
        except PodGone:
            pass
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the pod is left as it was last written
            log.warning("kubelet %s: pod %s: %s", self.host.node_name, format_pod(self.pod), err)
        finally:
            self.host.release_ip(self.uid)
            self.terminated.set()

    async def _run(self) -> None:
        if (self.pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            self.terminated.set()
            return
        rejection = self.host.admission_rejection(self.pod)
        if rejection is not None:
            await self._reject(rejection)
            return
        self.started.set()
        lifecycle = asyncio.get_running_loop().create_task(self._lifecycle())
        killed = asyncio.get_running_loop().create_task(self._kill.wait())
        try:
            await asyncio.wait({lifecycle, killed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(killed, lifecycle)
        if not self._kill.is_set():
            lifecycle.result()  # the containers completed by themselves (restartPolicy)
            self.terminated.set()
            return
        await self._terminate()
        self.terminated.set()
        if self.pod["metadata"].get("deletionTimestamp"):
            await self._finish_deletion()

    async def _reject(self, message: str) -> None:
        """kubelet `rejectPod`: a Warning event, then phase Failed with "Pod was rejected: ..."."""
        await self.host.recorder.emit(self.pod, "Warning", "Evicted", message)
        self.record.rejected = True
        self.record.reason = "Evicted"
        self.record.message = f"Pod was rejected: {message}"
        await self._sync()
        self.terminated.set()

    # lifecycle

    async def _lifecycle(self) -> None:
        record, behaviour = self.record, self.behaviour
        record.host_ip = self.host.config.host_ip
        record.start_time = now_rfc3339()
        await self._sync()
        await asyncio.sleep(behaviour.start_delay)
        record.pod_ip = self.host.allocate_ip(self.uid)
        record.sandbox_ready = True
        now = now_rfc3339()
        for init in record.init_containers:
            self._run_container(init, now)
            init.state, init.reason, init.exit_code = "terminated", "Completed", 0
            init.finished_at, init.ready = now, True
        restart_policy = (self.pod.get("spec") or {}).get("restartPolicy", "Always")
        while True:
            self._start_containers()
            await self._sync()
            code, reason = await self._run_until_exit()
            now = now_rfc3339()
            for c in record.containers:
                c.state, c.exit_code, c.reason, c.finished_at, c.ready = (
                    "terminated",
                    code,
                    reason,
                    now,
                    False,
                )
            if restart_policy == "Never" or (restart_policy == "OnFailure" and code == 0):
                record.sandbox_ready, record.terminal = False, True
                await self._sync()
                return
            await self._sync()
            delay = self._backoff.next_delay(asyncio.get_running_loop().time())
            for c in record.containers:
                c.last_terminated = c.terminated_view()
            if delay > 0:
                await self._back_off(delay)

    def _run_container(self, c: ContainerRecord, now: str) -> None:
        if c.container_id:
            c.restart_count += 1
        c.container_id = container_id(self.uid, c.name, c.restart_count)
        c.image_ref, _ = normalize_image(c.image)
        c.image_id = image_id(c.image)
        c.state, c.reason, c.message, c.started_at, c.finished_at = "running", "", "", now, ""

    def _start_containers(self) -> None:
        now = now_rfc3339()
        ready_at_start = not self.behaviour.never_ready and self.behaviour.ready_delay <= 0
        for c in self.record.containers:
            self._run_container(c, now)
            c.ready = ready_at_start
            self._container_events(c)

    def _container_events(self, c: ContainerRecord) -> None:
        if not self.host.config.container_events:
            return
        path = f"spec.containers{{{c.name}}}"
        emit = self.host.emit_later
        emit(
            self.pod,
            "Normal",
            "Pulled",
            f'Container image "{c.image}" already present on machine',
            path,
        )
        emit(self.pod, "Normal", "Created", f"Created container {c.name}", path)
        emit(self.pod, "Normal", "Started", f"Started container {c.name}", path)

    async def _run_until_exit(self) -> tuple[int, str]:
        """Wait out readiness, then the crash or OOM; returns (exit code, reason)."""
        behaviour = self.behaviour
        exits: list[tuple[float, int, str]] = []
        if behaviour.crash_loop:
            exits.append((behaviour.crash_after, 1, "Error"))
        if behaviour.oom_after is not None:
            exits.append((behaviour.oom_after, 137, "OOMKilled"))
        if behaviour.run_for is not None:
            code = behaviour.exit_code
            exits.append((behaviour.run_for, code, "Completed" if code == 0 else "Error"))
        exit_at, code, reason = min(exits) if exits else (None, 0, "")
        ready_at = None if behaviour.never_ready else behaviour.ready_delay
        if ready_at is not None and ready_at > 0 and (exit_at is None or ready_at < exit_at):
            await asyncio.sleep(ready_at)
            for c in self.record.containers:
                c.ready = True
            await self._sync()
            if exit_at is not None:
                exit_at -= ready_at
        if exit_at is None:
            await asyncio.Event().wait()  # runs until killed
        await asyncio.sleep(exit_at or 0.0)
        return code, reason

    async def _back_off(self, delay: float) -> None:
        """CrashLoopBackOff: waiting with the kubelet's message, a BackOff event, then the wait."""
        for c in self.record.containers:
            c.state, c.reason = "waiting", "CrashLoopBackOff"
            c.message = (
                f"back-off {go_duration(delay)} restarting failed container={c.name} "
                f"pod={format_pod(self.pod)}"
            )
            if self.host.config.container_events:
                self.host.emit_later(
                    self.pod,
                    "Warning",
                    "BackOff",
                    f"Back-off restarting failed container {c.name} in pod {format_pod(self.pod)}",
                    f"spec.containers{{{c.name}}}",
                )
        await self._sync()
        await asyncio.sleep(delay)

    # termination

    async def _terminate(self) -> None:
        """SIGTERM, wait for exit or the grace deadline, then the terminal status."""
        running = [c for c in self.record.containers if c.state == "running"]
        if running and self.host.config.container_events:
            for c in running:
                self.host.emit_later(
                    self.pod,
                    "Normal",
                    "Killing",
                    f"Stopping container {c.name}",
                    f"spec.containers{{{c.name}}}",
                )
        loop = asyncio.get_running_loop()
        began = loop.time()
        exits_at = began + self.behaviour.exit_delay
        killed = False
        if running:
            while True:
                deadline = began + self._kill_grace
                wait = min(deadline, exits_at) - loop.time()
                if wait <= 0:
                    killed = exits_at > deadline
                    break
                self._grace_changed.clear()
                try:
                    await asyncio.wait_for(self._grace_changed.wait(), wait)
                except TimeoutError:
                    killed = exits_at > deadline
                    break
        now = now_rfc3339()
        for c in self.record.containers:
            if c.state == "running":
                c.state, c.finished_at = "terminated", now
                c.exit_code, c.reason = (137, "Error") if killed else (0, "Completed")
            elif c.state == "waiting" and c.last_terminated is None:
                c.state, c.exit_code, c.reason = "terminated", 137, "ContainerStatusUnknown"
                c.message = UNKNOWN_CONTAINER_MESSAGE
            c.ready = False
        record = self.record
        record.sandbox_ready = False
        record.terminal = True
        if self.eviction is not None:
            record.force_phase = "Failed"
            record.reason, record.message = self.eviction.reason, self.eviction.message
            record.disruption = self.eviction.condition
        await self._sync()

    async def _finish_deletion(self) -> None:
        meta = self.pod["metadata"]
        path = resource_path("v1", "pods", meta["namespace"], meta["name"])
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}}
        try:
            await self.host.client.delete(path, options)
        except ApiStatusError as err:
            if err.code not in (404, 409):
                raise

    # status writes

    async def _sync(self) -> None:
        meta = self.pod["metadata"]
        pod_path = resource_path("v1", "pods", meta["namespace"], meta["name"])
        for _ in range(10):
            status = render_status(self.pod, self.record, now_rfc3339())
            if status == self.pod.get("status"):
                return
            body = {**self.pod, "status": status}
            try:
                written = await self.host.client.replace(pod_path + "/status", body)
            except ApiStatusError as err:
                if err.code == 404:
                    raise PodGone from None
                if err.code != 409:
                    raise
                await self._reread(pod_path)
                continue
            written.setdefault("kind", "Pod")
            written.setdefault("apiVersion", "v1")
            if _rv(written) >= _rv(self.pod):
                self.pod = written
            return

    async def _reread(self, path: str) -> None:
        try:
            fresh = await self.host.client.get(path)
        except ApiStatusError as err:
            if err.code == 404:
                raise PodGone from None
            raise
        if fresh["metadata"].get("uid") != self.uid:
            raise PodGone
        fresh.setdefault("kind", "Pod")
        fresh.setdefault("apiVersion", "v1")
        self.pod = fresh
        if fresh["metadata"].get("deletionTimestamp"):
            self._request_kill(self._deletion_grace(fresh))
