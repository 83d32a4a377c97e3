"""The verdict as an Event on this pod, so cluster telemetry sees what the process saw.

The body is kube/eventbody.py's `event_body`, the one core/v1 Event builder (name
``<pod>.<nanoseconds in hex>``, ``source.component`` and ``source.host``, first/last
timestamps, count 1, the message cut to the events.k8s.io limit on ``note``): reason
``TerminationClassified``, message = :meth:`Verdict.summary`.  Type ``Normal`` for a drain
or an after-the-fact report, ``Warning`` when the pod sheds load.  The cause and action are
also annotations (graceful_drain/annotations.py), for selection without parsing the message.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from graceful_drain.annotations import ACTION_ANNOTATION, CAUSE_ANNOTATION
from graceful_drain.kube.eventbody import NORMAL, WARNING, EventRecord, InvolvedObject, event_body
from graceful_drain.kube.meta import event_name
from graceful_drain.termination.identity import PodIdentity
from graceful_drain.termination.verdict import Action, Verdict

REASON = "TerminationClassified"
COMPONENT = "graceful-drain"


def verdict_event(identity: PodIdentity, verdict: Verdict, now: datetime) -> dict[str, Any]:
    """The Event body (kube/eventbody.py's `event_body`, as the controller's Events are built)."""
    regarding = InvolvedObject.pod(identity.namespace, identity.name, identity.uid or "")
    kind = WARNING if verdict.action is Action.SHED_LOAD_AND_EXIT_FAST else NORMAL
    record = EventRecord(regarding, kind, REASON, verdict.summary(), now)
    return event_body(
        record,
        event_name(identity.name, now),
        identity.name,
        component=COMPONENT,
        host=identity.node_name,
        annotations={
            CAUSE_ANNOTATION: verdict.cause.value,
            ACTION_ANNOTATION: verdict.action.value,
        },
    )
