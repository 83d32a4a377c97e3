"""`EvictionRequest`: what the webhook reads from an AdmissionReview (serving/admission.py
parses it; the decision table reads it)."""

from __future__ import annotations

import msgspec

from graceful_drain.controller.decision.model import ObjectRef


class EvictionRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What the webhook reads from an AdmissionReview (see admission.parse_review). A frozen
    msgspec struct rather than a frozen dataclass: one is built per admission, and a frozen
    dataclass would set each of its 14 fields through object.__setattr__."""

    uid: str
    operation: str
    group: str  # request.resource
    version: str
    resource: str
    sub_resource: str
    namespace: str
    name: str  # the pod's name
    dry_run: bool  # request.dryRun
    username: str
    precondition_uid: str | None = None  # Eviction deleteOptions.preconditions.uid
    options_dry_run: bool = False  # Eviction deleteOptions.dryRun is non-empty
    kind_group: str = "policy"  # request.kind.group
    kind: str = "Eviction"  # request.kind.kind

    @property
    def pod_ref(self) -> ObjectRef:
        return ObjectRef(self.namespace, self.name)

    @property
    def is_dry_run(self) -> bool:
        return self.dry_run or self.options_dry_run

    @property
    def is_pod_eviction_create(self) -> bool:
        return (
            self.operation == "CREATE"
            and self.group == ""
            and self.resource == "pods"
            and self.sub_resource == "eviction"
            and self.kind_group == "policy"
            and self.kind == "Eviction"
        )
