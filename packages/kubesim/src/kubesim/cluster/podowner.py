"""What the DaemonSet, StatefulSet and Job controllers share: an informer on their own kind
and one on pods, pod events mapped to the owner to reconcile, claiming (adoption and
release) of the pods their selector matches, pod creation and deletion with upstream's
events, and status writes through the status subresource."""

from __future__ import annotations

from kubesim import jsoncodec
from kubesim.cluster.event_recorder import EventRecorder
from kubesim.types import Key, Obj

from ..client import ApiStatusError, KubeClient, resource_path
from . import ownership
from .labels import labels_of, selector_matches
from .runtime import Controller, Informer, key_of


def _message(err: BaseException) -> str:
    if isinstance(err, ApiStatusError):
        return str(err.status.get("message") or err)
    return str(err)


class PodOwnerController(Controller):
    api_version = "apps/v1"
    plural = ""
    kind = ""
    observes_generation = True  # its status has observedGeneration (a Job's has none)
    kept_empty: tuple[str, ...] = ()  # status fields written even when empty

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.owners: Informer = self.informer(self.api_version, self.plural, self.kind)
        self.pods = self.informer("v1", "pods", "Pod")
        self.recorder = EventRecorder(client, self.name)
        self.owners.add_handler(lambda _type, obj, _old: self.queue.add(key_of(obj)))
        self.pods.add_handler(self._on_pod)

    def _owner_key(self, pod: Obj) -> Key | None:
        ref = ownership.controller_of(pod)
        if ref is None or ref.get("kind") != self.kind:
            return None
        namespace = pod["metadata"].get("namespace", "")
        owner = self.owners.get(namespace, str(ref.get("name")))
        if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
            return None
        return key_of(owner)

    def _on_pod(self, _type: str, pod: Obj, old: Obj | None) -> None:
        for candidate in (pod, old):
            if candidate is None:
                continue
            owner = self._owner_key(candidate)
            if owner is not None:
                self.queue.add(owner)
                continue
            namespace = candidate["metadata"].get("namespace", "")
            for obj in self.owners.items():  # an orphan: every owner that could adopt it
                selector = (obj.get("spec") or {}).get("selector")
                if obj["metadata"].get("namespace", "") == namespace and selector_matches(
                    selector, labels_of(candidate)
                ):
                    self.queue.add(key_of(obj))

    async def claimed_pods(self, owner: Obj) -> list[Obj]:
        """ClaimPods over the namespace's pods (terminating and terminal ones included)."""
        namespace = owner["metadata"].get("namespace", "")
        candidates = [
            p for p in self.pods.items() if p["metadata"].get("namespace", "") == namespace
        ]
        selector = (owner.get("spec") or {}).get("selector")
        return await ownership.claim(
            self.client, owner, candidates, "pods",
            lambda p: selector_matches(selector, labels_of(p)),
            lambda: ownership.fresh_and_alive(self.client, owner, self.plural),
        )  # fmt: skip

    async def create_pod(self, owner: Obj, pod: Obj) -> None:
        namespace = owner["metadata"].get("namespace", "")
        try:
            created = await self.client.create(resource_path("v1", "pods", namespace), pod)
        except ApiStatusError as err:
            await self.recorder.emit(
                owner, "Warning", "FailedCreate", f"Error creating: {_message(err)}"
            )
            raise
        name = created["metadata"]["name"]
        await self.recorder.emit(owner, "Normal", "SuccessfulCreate", f"Created pod: {name}")

    async def delete_pod(self, owner: Obj, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            await self.client.delete(
                resource_path("v1", "pods", meta.get("namespace"), meta["name"])
            )
        except ApiStatusError as err:
            if err.code == 404:
                return
            await self.recorder.emit(
                owner, "Warning", "FailedDelete", f"Error deleting: {_message(err)}"
            )
            raise
        await self.recorder.emit(
            owner, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}"
        )

    async def write_status(self, owner: Obj, status: Obj) -> None:
        """Replace the status when it changed; a 409 retries once on the latest copy."""
        status = {
            k: v for k, v in status.items() if v not in (None, [], {}) or k in self.kept_empty
        }
        generation = int(owner["metadata"].get("generation", 0))
        if generation and self.observes_generation:
            status["observedGeneration"] = generation
        if (owner.get("status") or {}) == status:
            return
        body = jsoncodec.copy(owner)
        body["status"] = status
        meta = owner["metadata"]
        path = resource_path(self.api_version, self.plural, meta.get("namespace"), meta["name"])
        try:
            await self.client.replace(path + "/status", body)
        except ApiStatusError as err:
            if err.code != 409:
                raise
            latest = await self.client.get(path)
            latest["status"] = status
            await self.client.replace(path + "/status", latest)
