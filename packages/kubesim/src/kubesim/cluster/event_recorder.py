"""Recording core/v1 Events the way client-go's event recorder does.

Repeats of the same (object, reason, message, source) within the series
window bump `count` and `lastTimestamp` on one Event instead of creating a
new object, as the real correlator aggregates them.
"""

from __future__ import annotations

import datetime as dt
import logging

from kubesim.apiserver.meta import rfc3339
from kubesim.client import ApiStatusError, KubeClient, resource_path
from kubesim.types import Obj

log = logging.getLogger(__name__)


def involved_object(obj: Obj, field_path: str = "") -> Obj:
    meta = obj["metadata"]
    ref: Obj = {
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": obj.get("apiVersion", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
        "fieldPath": field_path,
    }
    return {k: v for k, v in ref.items() if v}


class EventRecorder:
    def __init__(self, client: KubeClient, component: str, host: str = "") -> None:
        self.client = client
        self.component = component
        self.host = host
        self._seen: dict[tuple[str, str, str, str], tuple[str, int]] = {}

    async def emit(
        self, obj: Obj, type_: str, reason: str, message: str, *, action: str = "",
        related: Obj | None = None, annotations: dict[str, str] | None = None,
        field_path: str = "",
    ) -> None:  # fmt: skip
        """Record an event about `obj`; never raises (events are best effort, as upstream).

        `action` and `related` are what the events.k8s.io recorder (the scheduler's)
        sets; `annotations` are client-go's AnnotatedEventf (the kubelet's Evicted);
        `field_path` names a container (`spec.containers{app}`).
        """
        try:
            await self._emit(obj, type_, reason, message, action, related, annotations, field_path)
        except (ApiStatusError, OSError) as err:
            log.debug("event %s on %s dropped: %s", reason, obj["metadata"].get("name"), err)

    async def _emit(
        self, obj: Obj, type_: str, reason: str, message: str, action: str,
        related: Obj | None, annotations: dict[str, str] | None, field_path: str,
    ) -> None:  # fmt: skip
        ref = involved_object(obj, field_path)
        namespace = ref.get("namespace") or "default"
        now = dt.datetime.now(dt.UTC)
        key = (str(ref.get("uid", ref["name"])) + field_path, reason, message, type_)
        seen = self._seen.get(key)
        if seen is not None:
            name, count = seen
            path = resource_path("v1", "events", namespace, name)
            patch = {"count": count + 1, "lastTimestamp": rfc3339(now)}
            try:
                await self.client.patch(path, patch)
                self._seen[key] = (name, count + 1)
                return
            except ApiStatusError as err:
                if err.code != 404:
                    raise
        source: Obj = {"component": self.component}
        if self.host:
            source["host"] = self.host
        event: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{ref['name']}.{int(now.timestamp() * 1e9):x}",
                "namespace": namespace,
                **({"annotations": dict(annotations)} if annotations else {}),
            },
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": type_,
            "source": source,
            "firstTimestamp": rfc3339(now),
            "lastTimestamp": rfc3339(now),
            "count": 1,
            "eventTime": None,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        if action:
            event["action"] = action
        if related is not None:
            event["related"] = involved_object(related)
        created = await self.client.create(resource_path("v1", "events", namespace), event)
        self._seen[key] = (created["metadata"]["name"], 1)
