"""The verdict as an Event on this pod, so cluster telemetry sees what the process saw.

A core/v1 Event shaped like client-go's recorder writes them (name
``<pod>.<nanoseconds in hex>``, ``source.component``, first/last timestamps, count 1),
reason ``TerminationClassified``, message = :meth:`Verdict.summary` (cut to 1024
characters, the events.k8s.io limit on ``note``).  Type ``Normal`` for a drain or an
after-the-fact report, ``Warning`` when the pod sheds load.  The cause and action are
also annotations, for selection without parsing the message.
"""

from __future__ import annotations

from datetime import datetime

from graceful_drain.annotations import ACTION_ANNOTATION, CAUSE_ANNOTATION
from graceful_drain.kube.meta import event_name
from graceful_drain.kube.timefmt import format_rfc3339
from graceful_drain.termination.identity import PodIdentity
from graceful_drain.termination.verdict import Action, Verdict

REASON = "TerminationClassified"
COMPONENT = "graceful-drain"
MAX_MESSAGE_LENGTH = 1024


def verdict_event(identity: PodIdentity, verdict: Verdict, now: datetime) -> dict[str, object]:
    involved: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": identity.namespace,
        "name": identity.name,
    }
    if identity.uid is not None:
        involved["uid"] = identity.uid
    source: dict[str, object] = {"component": COMPONENT}
    if identity.node_name is not None:
        source["host"] = identity.node_name
    stamp = format_rfc3339(now)  # metav1.Time has seconds
    message = verdict.summary()
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[: MAX_MESSAGE_LENGTH - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(identity.name, now),
            "namespace": identity.namespace,
            "annotations": {
                CAUSE_ANNOTATION: verdict.cause.value,
                ACTION_ANNOTATION: verdict.action.value,
            },
        },
        "involvedObject": involved,
        "reason": REASON,
        "message": message,
        "type": "Warning" if verdict.action is Action.SHED_LOAD_AND_EXIT_FAST else "Normal",
        "source": source,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": COMPONENT,
        "reportingInstance": identity.name,
    }
