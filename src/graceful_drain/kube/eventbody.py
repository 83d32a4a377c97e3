"""A core/v1 Event's body, as client-go's recorder writes it: pure, no client.

`event_body` is the one builder: the controller's recorder (kube/events.py) writes its
Events with it, and the termination-cause detector, which writes one Event and exits, builds
its own with it and creates it on its lean client (kube/rest.py) without loading the
recorder's lightkube stack.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from graceful_drain.kube.timefmt import format_rfc3339

REPORTING_CONTROLLER: Final = "graceful-drain.stonal.com/controller"
NORMAL: Final = "Normal"
WARNING: Final = "Warning"
MAX_MESSAGE_CHARS = 1024  # events.k8s.io caps `note` at 1 KiB; core events stay within it too


@dataclass(frozen=True, slots=True)
class InvolvedObject:
    """The object an Event is about. `uid` may be empty: the recorder then looks it up, since
    `kubectl describe` selects events by uid."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def deployment(cls, namespace: str, name: str, uid: str = "") -> InvolvedObject:
        return cls("apps/v1", "Deployment", namespace, name, uid)

    @classmethod
    def pod(cls, namespace: str, name: str, uid: str = "") -> InvolvedObject:
        return cls("v1", "Pod", namespace, name, uid)

    @classmethod
    def node(cls, name: str) -> InvolvedObject:
        """A Node, with its name as uid, as the kubelet writes it: `kubectl describe node`
        searches the node's events under its uid and under its name."""
        return cls("v1", "Node", "", name, name)

    @property
    def event_namespace(self) -> str:
        """Where its Events live: its namespace, `default` for a cluster-scoped object (as
        client-go's recorder does)."""
        return self.namespace or "default"

    def as_reference(self) -> dict[str, str]:
        reference = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }
        if self.uid:
            reference["uid"] = self.uid
        return reference


@dataclass(frozen=True, slots=True)
class EventRecord:
    regarding: InvolvedObject
    type: str  # Normal or Warning
    reason: str
    message: str
    at: datetime  # when it happened (aware UTC), not when it got written

    @property
    def series_key(self) -> Hashable:
        return (self.regarding, self.type, self.reason)


def _message(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def event_body(
    record: EventRecord,
    name: str,
    instance: str,
    *,
    component: str = REPORTING_CONTROLLER,
    host: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A new core/v1 Event for `record`, shaped as client-go's recorder writes them:
    `component` in `source.component` and `reportingComponent`, `instance` in
    `reportingInstance`, `host` (the node it happened on) in `source.host`."""
    stamp = format_rfc3339(record.at)  # metav1.Time has seconds
    metadata: dict[str, Any] = {"name": name, "namespace": record.regarding.event_namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    source = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": record.regarding.as_reference(),
        "type": record.type,
        "reason": record.reason,
        "message": _message(record.message),
        "source": source,
        "reportingComponent": component,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def repeat_patch(record: EventRecord, count: int) -> dict[str, Any]:
    """The merge patch turning an existing Event into the `count`-th occurrence of `record`."""
    return {
        "count": count,
        "lastTimestamp": format_rfc3339(record.at),
        "message": _message(record.message),
    }
