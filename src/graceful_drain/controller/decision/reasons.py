"""The reason catalogue: every outcome of the webhook's decision table (docs/decisions.md, one
anchor per `Reason`), which of them deny or ask for a Warning event, and the `Decision` that
carries one. The table that chooses them, and the words of every message, are table.py's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from enum import StrEnum

import msgspec

from graceful_drain.controller.decision.model import ObjectRef
from graceful_drain.controller.decision.stamp import RecordIntent, StampIntent


class Reason(StrEnum):
    """Stable, machine-readable outcome of one decision (logs, metrics, messages); each one
    is an anchor of docs/decisions.md."""

    DRY_RUN = "dry-run"
    NOT_EVICTION = "not-eviction"
    INVALID_NAME = "invalid-name"
    POD_GONE = "pod-gone"
    NAMESPACE_OUT_OF_SCOPE = "namespace-out-of-scope"
    CACHE_COLD = "cache-cold"
    POD_TERMINATING = "pod-terminating"
    UID_MISMATCH = "uid-mismatch"
    NO_DEPLOYMENT = "no-deployment"
    OWNER_UNRESOLVED = "owner-unresolved"
    DEPLOYMENT_DELETING = "deployment-deleting"
    OPTED_OUT = "opted-out"
    ENABLED_ANNOTATION_INVALID = "enabled-annotation-invalid"
    NOT_ENABLED = "not-enabled"
    REPLICAS_NOT_ONE = "replicas-not-one"
    READY_ELSEWHERE = "ready-elsewhere"
    CANNOT_SURGE = "cannot-surge"
    CANNOT_PROTECT = "cannot-protect"
    POD_NOT_READY = "pod-not-ready"
    SURGE_READY = "surge-ready"
    ROLLOUT_TIMEOUT = "rollout-timeout"
    ROLLOUT_IN_PROGRESS = "rollout-in-progress"
    ROLLOUT_REQUESTED = "rollout-requested"
    REREAD_FAILED = "reread-failed"
    WRITE_DEFERRED = "write-deferred"
    BUDGET_SPENT = "budget-spent"
    WRITE_TIMEOUT = "write-timeout"
    STAMP_FAILED = "stamp-failed"
    RECORD_FAILED = "record-failed"
    ERROR = "error"
    MALFORMED_REVIEW = "malformed-review"


DENYING_REASONS = frozenset(
    {
        Reason.CACHE_COLD,
        Reason.ROLLOUT_IN_PROGRESS,
        Reason.ROLLOUT_REQUESTED,
        Reason.REREAD_FAILED,
        Reason.WRITE_DEFERRED,
        Reason.BUDGET_SPENT,
    }
)
# Outcomes that also ask for a Warning event on the Deployment.
WARNING_REASONS = frozenset(
    {
        Reason.ENABLED_ANNOTATION_INVALID,
        Reason.CANNOT_SURGE,
        Reason.CANNOT_PROTECT,
        Reason.WRITE_DEFERRED,
        Reason.WRITE_TIMEOUT,
        Reason.STAMP_FAILED,
        Reason.RECORD_FAILED,
    }
)


# A decision's message, or what renders it: most decisions are allowed without anyone reading
# their message (only denials, warnings and Events carry it), so the table hands in a function.
Message = str | Callable[[], str]


class Decision(msgspec.Struct, frozen=True, gc=False):
    """One decision of the table: its outcome, its reason, and what it asks of the caller. A
    frozen msgspec struct rather than a frozen dataclass: every admission builds one or more,
    and a frozen dataclass would set each field through object.__setattr__ (several times the
    cost of building the struct). Constructed positionally, as
    `Decision(allowed, reason, message, deployment, waited, stamp, record)`."""

    allowed: bool
    reason: Reason
    # the message, or what renders it (read through `message`)
    _message: Message
    deployment: ObjectRef | None = None
    waited: timedelta | None = None  # since restarted-at, when the Deployment carries it
    stamp: StampIntent | None = None  # Reason.ROLLOUT_REQUESTED only
    record: RecordIntent | None = None  # the ledger write of READY_ELSEWHERE and SURGE_READY

    @property
    def message(self) -> str:
        """Human readable; the 429 message kubectl drain prints. Rendered on first read (the
        struct is frozen to its users; the rendered text replaces its renderer)."""
        message = self._message
        if isinstance(message, str):
            return message
        text = message()
        msgspec.structs.force_setattr(self, "_message", text)
        return text

    def _key(self) -> tuple[object, ...]:
        return (self.allowed, self.reason, self.message, self.deployment, self.waited,
                self.stamp, self.record)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Decision(allowed={self.allowed!r}, reason={self.reason!r}, "
            f"message={self.message!r}, deployment={self.deployment!r}, "
            f"waited={self.waited!r}, stamp={self.stamp!r}, record={self.record!r})"
        )

    @property
    def write(self) -> StampIntent | RecordIntent | None:
        """The write the caller must make before answering (stamp.py)."""
        return self.stamp if self.stamp is not None else self.record

    @property
    def warning_event(self) -> bool:
        """Emit a Warning event on the Deployment (WARNING_REASONS; the reason says which)."""
        return self.reason in WARNING_REASONS
