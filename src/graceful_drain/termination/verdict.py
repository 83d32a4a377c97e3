"""The classifier's answer: a cause, an action, and the evidence behind them.

JSON schema of :meth:`Verdict.to_dict` / :meth:`Verdict.to_json` (stable; additions
only within ``v1``; keys are always present, ``null`` where stated)::

    {
      "schema": "graceful-drain/termination-verdict/v1",
      "cause": "voluntary" | "involuntary_eviction" | "preempted"
               | "oom_killed" | "indeterminate",
      "action": "drain_gracefully" | "shed_load_and_exit_fast" | "report_only",
      "resource": "memory" | "ephemeral-storage" | "pid" | "other" | null,
      "decided_by": "pod" | "events" | "node" | "owner" | "classifier",
      "trigger": "sigterm" | "after_restart",
      "decided_at": "<RFC 3339 UTC, the `now` given to classify>",
      "evidence": [
        {
          "source": "pod" | "events" | "node" | "owner" | "classifier",
          "fact": "<a Fact value, e.g. disruption_target>",
          "decisive": true | false,   # exactly one item is decisive
          "detail": "<one human-readable sentence>",
          "values": {"<key>": "<string>", ...}   # machine-readable particulars
        }, ...
      ]
    }

``resource`` is set only for ``involuntary_eviction`` caused by node pressure (or
a kubelet local-storage limit); it is null for taint-manager, PodGC and node
shutdown terminations and for every other cause.  ``evidence`` is never empty and
the decisive item's ``source`` equals ``decided_by``.

Actions: ``report_only`` is used for every ``after_restart`` verdict (an OOM kill
or any other past termination is reported, nothing is drained); at SIGTERM the
action is ``drain_gracefully`` only for a voluntary cause, otherwise
``shed_load_and_exit_fast``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from graceful_drain.kube.timefmt import format_rfc3339_exact
from graceful_drain.termination.evidence import Trigger
from graceful_drain.termination.kubelet import PressuredResource

SCHEMA = "graceful-drain/termination-verdict/v1"

JsonValue = str | int | bool | None | list["JsonValue"] | dict[str, "JsonValue"]


class Cause(StrEnum):
    VOLUNTARY = "voluntary"
    INVOLUNTARY_EVICTION = "involuntary_eviction"
    PREEMPTED = "preempted"
    OOM_KILLED = "oom_killed"
    INDETERMINATE = "indeterminate"


class Action(StrEnum):
    DRAIN_GRACEFULLY = "drain_gracefully"
    SHED_LOAD_AND_EXIT_FAST = "shed_load_and_exit_fast"
    REPORT_ONLY = "report_only"


class Source(StrEnum):
    """Where a fact came from; ``classifier`` marks the classifier's own reasoning."""

    POD = "pod"
    EVENTS = "events"
    NODE = "node"
    OWNER = "owner"
    CLASSIFIER = "classifier"


class Fact(StrEnum):
    # pod
    POD_UNAVAILABLE = "pod_unavailable"
    POD_UID_UNKNOWN = "pod_uid_unknown"
    POD_UID_MISMATCH = "pod_uid_mismatch"
    DISRUPTION_TARGET = "disruption_target"
    DISRUPTION_TARGET_NOT_TRUE = "disruption_target_not_true"
    KUBELET_STATUS = "kubelet_status"
    DELETION_REQUESTED = "deletion_requested"
    KUBELET_INITIATED = "kubelet_initiated"
    STATUS_REASON_UNRECOGNISED = "status_reason_unrecognised"
    CONTAINER_OOM_KILLED = "container_oom_killed"
    CONTAINER_TERMINATED = "container_terminated"
    # events
    EVENTS_UNAVAILABLE = "events_unavailable"
    EVENTS_UNATTRIBUTABLE = "events_unattributable"
    KUBELET_EVICTED_EVENT = "kubelet_evicted_event"
    PREEMPTION_EVENT = "preemption_event"
    OTHER_EVICTED_EVENT = "other_evicted_event"  # Karpenter's Eviction API record
    NO_EVICTED_EVENT = "no_evicted_event"
    # node
    NODE_UNAVAILABLE = "node_unavailable"
    NODE_PRESSURE = "node_pressure"
    NODE_NO_PRESSURE = "node_no_pressure"
    # owner
    OWNER_UNAVAILABLE = "owner_unavailable"
    NO_OWNING_DEPLOYMENT = "no_owning_deployment"
    NO_ROLLOUT_MARKER = "no_rollout_marker"
    ROLLOUT_MARKER = "rollout_marker"
    ROLLOUT_MARKER_REJECTED = "rollout_marker_rejected"
    # classifier
    KUBELET_EVICTION_OVERRIDE = "kubelet_eviction_override"
    KUBELET_TERMINATION_OVERRIDE = "kubelet_termination_override"
    PREEMPTION_OVERRIDE = "preemption_override"
    NODE_PRESSURE_OVERRIDE = "node_pressure_override"
    EVIDENCE_MALFORMED = "evidence_malformed"
    CANNOT_DETERMINE = "cannot_determine"
    CONSERVATIVE_FALLBACK = "conservative_fallback"
    CLASSIFIER_ERROR = "classifier_error"


class EvidenceItem(NamedTuple):
    """One fact the verdict rests on or notes: where it was read, what it says, its values."""

    source: Source
    fact: Fact
    detail: str
    decisive: bool = False
    values: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "source": self.source.value,
            "fact": self.fact.value,
            "decisive": self.decisive,
            "detail": _one_line(self.detail),
            "values": {key: value for key, value in self.values},
        }


@dataclass(frozen=True)
class Verdict:
    """The answer: the cause, the action it calls for, and the evidence behind it."""

    cause: Cause
    action: Action
    resource: PressuredResource | None
    decided_by: Source
    trigger: Trigger
    decided_at: datetime
    evidence: tuple[EvidenceItem, ...]

    def __post_init__(self) -> None:
        decisive = [item for item in self.evidence if item.decisive]
        if len(decisive) != 1 or decisive[0].source is not self.decided_by:
            raise ValueError("a verdict needs exactly one decisive item, from decided_by")

    @property
    def deciding_item(self) -> EvidenceItem:
        return next(item for item in self.evidence if item.decisive)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "schema": SCHEMA,
            "cause": self.cause.value,
            "action": self.action.value,
            "resource": self.resource.value if self.resource is not None else None,
            "decided_by": self.decided_by.value,
            "trigger": self.trigger.value,
            "decided_at": format_rfc3339_exact(self.decided_at),
            "evidence": [item.to_dict() for item in self.evidence],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False)

    def summary(self) -> str:
        """One line: ``cause[/resource] -> action (source/fact): detail``."""
        cause = self.cause.value
        if self.resource is not None:
            cause = f"{cause}/{self.resource.value}"
        item = self.deciding_item
        return _one_line(
            f"{cause} -> {self.action.value} ({item.source.value}/{item.fact.value}): {item.detail}"
        )


def _one_line(text: str) -> str:
    return " ".join(text.split())
