"""The evictions ledger on a Deployment (docs/decisions.md, "The ledger"): the pods whose
eviction the webhook let go while other pods had to stay Ready, pod name -> (uid, when), in
the annotation `EVICTIONS_ANNOTATION` as compact JSON. Pure: parsing, what counts as gone at
a moment, what the reconciler may remove, and the guarded JSON patch that records a pod.

The kube-apiserver's eviction subresource keeps the same record in a PodDisruptionBudget's
`status.disruptedPods` and writes it with optimistic concurrency (k8s.io/kubernetes
pkg/registry/core/pod/storage/eviction.go, `checkAndDecrement`); the disruption controller
forgets an entry after `DeletionTimeout`, 2 min (pkg/controller/disruption/disruption.go),
the bound used here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import msgspec

from graceful_drain.annotations import EVICTIONS_ANNOTATION
from graceful_drain.kube.meta import json_pointer_token
from graceful_drain.kube.timefmt import format_rfc3339_micro, parse_rfc3339

# An entry counts the pod as gone this long after it was written: the disruption
# controller's DeletionTimeout for status.disruptedPods.
ENTRY_LIFETIME = timedelta(minutes=2)
# A pod recorded more recently than this is not recorded again when its eviction is retried
# (every decision already counts it as gone); older, the retry refreshes it.
REFRESH_AFTER = ENTRY_LIFETIME / 2
# An entry whose pod's deletion was observed is removed from the annotation no sooner than
# this after it was written: a replica whose pod cache lags the remover's by less still
# sees the pod leaving.
SETTLE = timedelta(seconds=15)
# At most this many entries that still count: past it a record is not written and the
# eviction is held (write-deferred) until deletions are seen. About 90 bytes an entry keeps the
# annotation near 90 KiB, well inside the 256 KiB all of an object's annotations may take
# (upstream's eviction subresource refuses past MaxDisruptedPodSize, 2000, the same way).
MAX_ENTRIES = 1000
EVICTIONS_PATH = "/metadata/annotations/" + json_pointer_token(EVICTIONS_ANNOTATION)


class LedgerEntry(msgspec.Struct, frozen=True, gc=False):
    """One pod let go: built for every entry of every Deployment the cache decodes, and by
    every record (a frozen msgspec struct: a frozen dataclass costs several times as much)."""

    pod: str  # the pod's name
    uid: str
    at: datetime  # aware UTC

    def counts(self, now: datetime) -> bool:
        """Still counts the pod as gone at `now` (an entry from the future counts: clock skew
        between replicas errs on the side of holding)."""
        return now < self.at + ENTRY_LIFETIME


class _Entry(msgspec.Struct):
    uid: str
    at: str


_decoder = msgspec.json.Decoder(dict[str, _Entry])
_encoder = msgspec.json.Encoder()


def parse_ledger(raw: str | None) -> tuple[tuple[LedgerEntry, ...], bool]:
    """The entries of the annotation's value, and whether it was malformed (then no entry:
    the next record replaces it whole). An entry whose time does not parse is dropped."""
    if raw is None:
        return (), False
    try:
        decoded = _decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return (), True
    entries: list[LedgerEntry] = []
    malformed = False
    for pod, entry in decoded.items():
        at = parse_rfc3339(entry.at)
        if at is None or not pod:
            malformed = True
            continue
        entries.append(LedgerEntry(pod, entry.uid, at))
    return tuple(entries), malformed


def encode_ledger(entries: Iterable[LedgerEntry]) -> str:
    return _encoder.encode(
        {entry.pod: {"uid": entry.uid, "at": format_rfc3339_micro(entry.at)} for entry in entries}
    ).decode()


def gone_uids(entries: Iterable[LedgerEntry], now: datetime) -> frozenset[str]:
    """The uids of the pods the ledger counts as gone at `now`."""
    return frozenset(entry.uid for entry in entries if entry.counts(now))


def recorded_recently(entries: Iterable[LedgerEntry], pod: str, uid: str, now: datetime) -> bool:
    """`pod` (this uid) is recorded, less than REFRESH_AFTER ago: recording it again changes
    nothing any decision counts."""
    return any(
        entry.pod == pod and entry.uid == uid and now < entry.at + REFRESH_AFTER
        for entry in entries
    )


# (namespace, pod name) -> the uid a synced pod cache holds, or None when it holds no such pod;
# the whole callable is None when no synced cache can tell (deletion then goes unobserved).
PodUid = Callable[[str, str], str | None]


def keep(entry: LedgerEntry, namespace: str, now: datetime, pod_uid: PodUid | None) -> bool:
    """Whether `entry` stays in the annotation: it still counts, unless the pod's deletion was
    observed (gone from a synced cache, or another uid under its name) at least SETTLE after
    it was written."""
    if not entry.counts(now):
        return False
    if pod_uid is None or now < entry.at + SETTLE:
        return True
    return pod_uid(namespace, entry.pod) == entry.uid


def kept(
    entries: Iterable[LedgerEntry], namespace: str, now: datetime, pod_uid: PodUid | None
) -> tuple[LedgerEntry, ...]:
    return tuple(entry for entry in entries if keep(entry, namespace, now, pod_uid))


def next_expiry(entries: Iterable[LedgerEntry], now: datetime) -> datetime | None:
    """When the reconciler should look again: the earliest moment an entry expires or may be
    removed for its pod's observed deletion."""
    moments = [
        moment
        for entry in entries
        for moment in (entry.at + SETTLE, entry.at + ENTRY_LIFETIME)
        if moment > now
    ]
    return min(moments, default=None)


def _guard(uid: str, resource_version: str) -> list[dict[str, Any]]:
    """The stamp's optimistic concurrency (stamp.py `stamp_patch`): a `test` on the uid pins
    the object's identity, and the resourceVersion the decision was made on, sent back, makes
    the API server answer 409 Conflict if the Deployment changed since."""
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": uid}]
    if resource_version:
        ops.append({"op": "add", "path": "/metadata/resourceVersion", "value": resource_version})
    return ops


def ledger_patch(
    uid: str, resource_version: str, has_annotations: bool, entries: Iterable[LedgerEntry]
) -> list[dict[str, Any]]:
    """The guarded JSON patch that sets the ledger to `entries` (removes the annotation when
    there are none)."""
    ops = _guard(uid, resource_version)
    entries = tuple(entries)
    if not entries:
        ops.append({"op": "remove", "path": EVICTIONS_PATH})
    elif has_annotations:
        ops.append({"op": "add", "path": EVICTIONS_PATH, "value": encode_ledger(entries)})
    else:
        ops.append(
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {EVICTIONS_ANNOTATION: encode_ledger(entries)},
            }
        )
    return ops


def with_recorded(
    entries: Iterable[LedgerEntry],
    pod: str,
    uid: str,
    now: datetime,
    namespace: str,
    pod_uid: PodUid | None,
) -> tuple[LedgerEntry, ...]:
    """The ledger after recording `pod` at `now`: the entries still kept (pruned in the same
    write), this pod's replaced by the new one."""
    others = tuple(entry for entry in entries if entry.pod != pod)
    return (*kept(others, namespace, now, pod_uid), LedgerEntry(pod, uid, now))


def entries_of(annotations: Mapping[str, Any] | None) -> tuple[LedgerEntry, ...]:
    """The ledger of a raw Deployment's annotations (for `plan`/`status`, which read raw)."""
    raw = None if annotations is None else annotations.get(EVICTIONS_ANNOTATION)
    return parse_ledger(raw if isinstance(raw, str) else None)[0]
