"""A drain client that behaves like `kubectl drain NODE`.

After staging/src/k8s.io/kubectl/pkg/cmd/drain/drain.go (RunDrain,
deleteOrEvictPodsSimple) and staging/src/k8s.io/kubectl/pkg/drain/drain.go
(evictPods, waitForDelete):

- cordon with a strategic merge patch of `spec.unschedulable` (cordon.go);
- list the node's pods with `fieldSelector=spec.nodeName=NODE`, run the
  filter chain (DaemonSet, mirror, emptyDir and bare pods) and refuse to go on
  when a filter errors;
- evict every pod concurrently through the Eviction API; on 429 print
  `error when evicting pods/"NAME" -n "NS" (will retry after 5s): MESSAGE`
  and try again after `retry_interval`; other errors end that pod's attempt;
- then poll each pod (every `poll_interval`) until a GET says 404 or returns
  a pod with another UID;
- `timeout` (0: none) bounds evictions and waits together.

The lines kubectl prints go to the result's log, stdout and stderr kept apart.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable

from kubesim.types import Obj

from ..apiserver.gofmt import go_aggregate, go_duration, go_quote
from ..client import ApiStatusError, KubeClient, resource_path
from . import api
from .api import pod_key, status_message
from .kubectl_filters import (
    DaemonSetLookup,
    FilterOptions,
    daemonset_of,
    filter_pods,
    should_skip_pod,
)
from .result import Clock, DrainLog, DrainResult

NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _has_cause(err: ApiStatusError, cause: str) -> bool:
    causes = (err.status.get("details") or {}).get("causes") or []
    return any(c.get("type") == cause for c in causes)


class KubectlDrain:
    name = "kubectl"

    def __init__(
        self,
        client: KubeClient,
        *,
        force: bool = False,
        ignore_daemonsets: bool = False,
        delete_emptydir_data: bool = False,
        grace_period_seconds: int = -1,
        timeout: float = 0.0,
        disable_eviction: bool = False,
        skip_wait_for_delete_timeout: int = 0,
        pod_selector: str = "",
        retry_interval: float = 5.0,
        poll_interval: float = 1.0,
        clock: Clock = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.options = FilterOptions(
            force=force,
            ignore_all_daemonsets=ignore_daemonsets,
            delete_emptydir_data=delete_emptydir_data,
            skip_wait_for_delete_timeout_seconds=skip_wait_for_delete_timeout,
        )
        self.grace_period_seconds = grace_period_seconds
        self.timeout = timeout
        self.disable_eviction = disable_eviction
        self.pod_selector = pod_selector
        self.retry_interval = retry_interval
        self.poll_interval = poll_interval
        self.clock = clock
        self.wall_clock = wall_clock

    async def drain(self, node: str) -> DrainResult:
        return await _Run(self, node).run()


class _Run:
    """One `kubectl drain NODE` invocation."""

    def __init__(self, config: KubectlDrain, node: str) -> None:
        self.c = config
        self.client = config.client
        self.node = node
        self.log = DrainLog(config.clock)
        self.started = config.clock()
        self.deadline = self.started + config.timeout if config.timeout > 0 else None
        self.evicted: list[str] = []
        self.deleted: list[str] = []
        self.attempts: dict[str, int] = {}
        self.rejections: dict[str, int] = {}
        self.pending: list[str] = []

    def _result(self, error: str | None) -> DrainResult:
        return DrainResult(
            client=self.c.name, node=self.node, drained=error is None, error=error,
            started=self.started, finished=self.c.clock(), evicted=tuple(self.evicted),
            deleted=tuple(self.deleted), remaining=tuple(self.pending),
            attempts=dict(self.attempts), rejections=dict(self.rejections),
            log=tuple(self.log.lines),
        )  # fmt: skip

    def _expired(self) -> bool:
        return self.deadline is not None and self.c.clock() >= self.deadline

    def _timeout_text(self) -> str:
        return go_duration(self.c.timeout)  # only read once a (non-zero) timeout expired

    def _delete_options_grace(self) -> int | None:
        grace = self.c.grace_period_seconds
        return grace if grace >= 0 else None

    async def run(self) -> DrainResult:
        try:
            node = await api.get_node(self.client, self.node)
        except ApiStatusError as err:
            message = status_message(err)
            self.log.err(f"Error from server ({err.reason}): {message}")
            return self._result(message)
        await self._cordon(node)
        try:
            errors = await self._delete_or_evict()
        except ApiStatusError as err:
            errors = [status_message(err)]
        if not errors:
            self.log.out(f"node/{self.node} drained")
            return self._result(None)
        error = go_aggregate(errors)
        quoted = go_quote(self.node)
        self.log.err(
            f"error: unable to drain node {quoted} due to error: {error}, continuing command..."
        )
        self.log.err("There are pending nodes to be drained:")
        self.log.err(f" {self.node}")
        # RunDrain returns an aggregate: kubectl's CheckErr prints it flattened, a line each.
        for line in errors:
            self.log.err(line)
        return self._result(error)

    async def _cordon(self, node: Obj) -> None:
        if (node.get("spec") or {}).get("unschedulable"):
            self.log.out(f"node/{self.node} already cordoned")
            return
        try:
            await api.patch_node(self.client, self.node, {"spec": {"unschedulable": True}})
        except ApiStatusError as err:
            quoted = go_quote(self.node)
            self.log.err(f"error: unable to cordon node {quoted}: {status_message(err)}")
            return
        self.log.out(f"node/{self.node} cordoned")

    async def _daemonset_lookups(self, pods: list[Obj]) -> dict[tuple[str, str], DaemonSetLookup]:
        lookups: dict[tuple[str, str], DaemonSetLookup] = {}
        for pod in pods:
            owner = daemonset_of(pod)
            if owner is None or owner in lookups:
                continue
            try:
                await self.client.get(resource_path("apps/v1", "daemonsets", *owner))
                lookups[owner] = (200, "")
            except ApiStatusError as err:
                lookups[owner] = (err.code, status_message(err))
        return lookups

    async def _pods_for_deletion(self) -> tuple[list[Obj], list[str], str]:
        pods = await api.list_pods_on_node(self.client, self.node, self.c.pod_selector)
        lookups = await self._daemonset_lookups(pods)
        listed = filter_pods(pods, self.c.options, lookups, self.c.wall_clock())
        return listed.pods(), listed.errors(), listed.warnings()

    async def _pending_pods(self) -> list[str]:
        try:
            pods, _, _ = await self._pods_for_deletion()
        except ApiStatusError:
            return []
        return [pod_key(p) for p in pods]

    async def _delete_or_evict(self) -> list[str]:
        """deleteOrEvictPodsSimple; the errors, none when the node is drained."""
        pods, errors, warnings = await self._pods_for_deletion()
        if errors:
            self.pending = [pod_key(p) for p in pods]
            return errors
        if warnings:
            self.log.err(f"Warning: {warnings}")
        if not pods:
            return []
        group_version = None
        if not self.c.disable_eviction:
            group_version = await api.eviction_group_version(self.client)
        if group_version is not None:
            errors = await self._evict_pods(pods, group_version)
        else:
            error = await self._delete_pods(pods)
            errors = [] if error is None else [error]
        if errors:
            self.pending = await self._pending_pods()
            if self.pending:
                self.log.err(
                    f"There are pending pods in node {go_quote(self.node)} "
                    f"when an error occurred: {go_aggregate(errors)}"
                )
                for key in self.pending:
                    self.log.err(f"pod/{key.split('/', 1)[1]}")
        return errors

    # eviction

    async def _evict_pods(self, pods: list[Obj], group_version: str) -> list[str]:
        results = await asyncio.gather(*(self._evict_one(pod, group_version) for pod in pods))
        return [r for r in results if r is not None]

    async def _evict_one(self, pod: Obj, group_version: str) -> str | None:
        meta = pod["metadata"]
        name, namespace, key = meta["name"], meta["namespace"], pod_key(pod)
        where = f"pods/{go_quote(name)} -n {go_quote(namespace)}"
        while True:
            self.log.out(f"evicting pod {key}")
            if self._expired():
                return (
                    f"error when evicting {where}: global timeout reached: {self._timeout_text()}"
                )
            self.attempts[key] = self.attempts.get(key, 0) + 1
            try:
                await api.evict(
                    self.client, pod, api_version=group_version,
                    grace_period_seconds=self._delete_options_grace(),
                )  # fmt: skip
                break
            except ApiStatusError as err:
                if err.code == 404:
                    return None
                if err.code == 429:
                    self.rejections[key] = self.rejections.get(key, 0) + 1
                    retry = go_duration(self.c.retry_interval)
                    self.log.err(
                        f"error when evicting {where} (will retry after {retry}): "
                        f"{status_message(err)}"
                    )
                    await asyncio.sleep(self.c.retry_interval)
                    continue
                if err.code == 403 and _has_cause(err, NAMESPACE_TERMINATING_CAUSE):
                    if meta.get("deletionTimestamp"):
                        break
                    self.log.err(
                        f"error when evicting pod {go_quote(name)} from terminating namespace "
                        f"{go_quote(namespace)} (will retry after "
                        f"{go_duration(self.c.retry_interval)}): {status_message(err)}"
                    )
                    await asyncio.sleep(self.c.retry_interval)
                    continue
                return f"error when evicting {where}: {status_message(err)}"
        error = await self._wait_for_delete(pod, uses_global_deadline=True)
        if error is not None:
            return (
                f"error when waiting for pod {go_quote(name)} in namespace "
                f"{go_quote(namespace)} to terminate: {error}"
            )
        self.evicted.append(key)
        self.log.out(f"pod/{name} evicted")
        return None

    async def _wait_for_delete(self, pod: Obj, uses_global_deadline: bool) -> str | None:
        """waitForDelete: poll until 404 or another UID under the same name."""
        meta = pod["metadata"]
        skip = self.c.options.skip_wait_for_delete_timeout_seconds
        while True:
            current = await api.get_pod(self.client, meta["namespace"], meta["name"])
            if current is None or current["metadata"].get("uid") != meta.get("uid"):
                return None
            if should_skip_pod(current, skip, self.c.wall_clock()):
                self.log.out(
                    f"pod {go_quote(meta['name'])} has DeletionTimestamp older than {skip} "
                    "seconds, skipping"
                )
                return None
            if self._expired():
                if uses_global_deadline:
                    return f"global timeout reached: {self._timeout_text()}"
                return "timed out waiting for the condition"
            await asyncio.sleep(self.c.poll_interval)

    # deletion (--disable-eviction, or no eviction subresource)

    async def _delete_pods(self, pods: list[Obj]) -> str | None:
        for pod in pods:
            try:
                await api.delete_pod(self.client, pod, self._delete_options_grace())
            except ApiStatusError as err:
                if err.code != 404:
                    return status_message(err)
        results = await asyncio.gather(
            *(self._wait_for_delete(pod, uses_global_deadline=False) for pod in pods)
        )
        for pod, error in zip(pods, results, strict=True):
            if error is not None:
                return error
            self.deleted.append(pod_key(pod))
            self.log.out(f"pod/{pod['metadata']['name']} deleted")
        return None
