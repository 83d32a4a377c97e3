"""Availability accounting: Ready pods per Deployment over time (pure, no I/O).

A pod counts as Ready when its Ready condition is True and it is not
terminating: a terminating pod is taken out of its Service's ready endpoints,
so it no longer serves. Pods belong to a Deployment through their controlling
ReplicaSet, as the Deployment controller itself attributes them.

`AvailabilityLedger` is fed watch events with the time they were seen and
keeps, per Deployment, the Ready count as a step function of time
(`samples`), the ReplicaSets it got (rollouts) and free-form marks such as a
drain's start and finish. `zero_ready_intervals` turns samples into outages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubesim.types import Key, Obj

Sample = tuple[float, int]  # (time, ready pods from then on)


def zero_ready_intervals(
    samples: Iterable[Sample], start: float, end: float, initial: int | None = None
) -> list[tuple[float, float]]:
    """The half-open intervals within [start, end) where the Ready count is zero.

    The count is a step function: from each sample's time on it is that
    sample's count (a later sample at the same time wins). Before the first
    sample it is `initial`; None means unknown, which is never counted as zero.
    Adjacent zero stretches are merged; empty ones dropped.
    """
    if end <= start:
        return []
    ordered = sorted(samples, key=lambda s: s[0])  # stable: equal times keep their order
    segments: list[tuple[float, float, int | None]] = []
    cursor, value = start, initial
    for at, count in ordered:
        if at <= start:
            value = count
            continue
        if at >= end:
            break
        segments.append((cursor, at, value))
        cursor, value = at, count
    segments.append((cursor, end, value))
    out: list[tuple[float, float]] = []
    for lo, hi, level in segments:
        if level != 0 or hi <= lo:
            continue
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def zero_ready_seconds(
    samples: Iterable[Sample], start: float, end: float, initial: int | None = None
) -> float:
    return sum(hi - lo for lo, hi in zero_ready_intervals(samples, start, end, initial))


def count_at(samples: Sequence[Sample], at: float, initial: int | None = None) -> int | None:
    value = initial
    for when, count in sorted(samples, key=lambda s: s[0]):
        if when > at:
            break
        value = count
    return value


def _controller(obj: Obj) -> Obj | None:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def is_serving(pod: Obj) -> bool:
    """Ready and not terminating."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass(frozen=True, slots=True)
class Mark:
    at: float
    label: str
    detail: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeploymentTimeline:
    """A snapshot of one Deployment's availability, observed until `until`."""

    namespace: str
    name: str
    samples: tuple[Sample, ...]
    replicasets: tuple[tuple[float, str], ...]
    until: float

    @property
    def first_seen(self) -> float | None:
        return self.samples[0][0] if self.samples else None

    def _window(self, start: float | None, end: float | None) -> tuple[float, float]:
        first = self.first_seen
        lo = first if first is not None else self.until
        begin = lo if start is None else max(start, lo)
        return begin, self.until if end is None else end

    def ready_at(self, at: float) -> int:
        return count_at(self.samples, at) or 0

    def zero_ready_intervals(
        self, start: float | None = None, end: float | None = None
    ) -> list[tuple[float, float]]:
        """Outages in [start, end), never before the Deployment was first seen."""
        return zero_ready_intervals(self.samples, *self._window(start, end))

    def zero_ready_seconds(self, start: float | None = None, end: float | None = None) -> float:
        return sum(hi - lo for lo, hi in self.zero_ready_intervals(start, end))

    def max_ready(self, start: float | None = None, end: float | None = None) -> int:
        begin, finish = self._window(start, end)
        inside = [count for at, count in self.samples if begin < at < finish]
        return max([self.ready_at(begin), *inside])

    def rollouts(self, start: float | None = None, end: float | None = None) -> list[str]:
        """ReplicaSets created for the Deployment in [start, end]."""
        lo = float("-inf") if start is None else start
        hi = float("inf") if end is None else end
        return [name for at, name in self.replicasets if lo <= at <= hi]


class AvailabilityLedger:
    """Ready counts kept up to date per event for the Deployments the event can affect (the
    pod's owner before and after; the pods of a changed ReplicaSet), not recounted over every
    pod: a rollout of N Deployments is N times more events over N times more pods."""

    def __init__(self) -> None:
        self._pods: dict[Key, Obj] = {}
        self._replicasets: dict[Key, Obj] = {}
        self._deployments: set[Key] = set()
        self._seen_replicasets: set[str] = set()
        self._owner: dict[Key, Key | None] = {}  # pod -> the Deployment it counts for
        self._members: dict[Key, set[Key]] = {}  # Deployment -> its pods
        self._by_replicaset: dict[Key, set[Key]] = {}  # ReplicaSet -> pods it controls
        self._counts: dict[Key, int] = {}  # what ready_counts() answers, kept per event
        self.samples: dict[Key, list[Sample]] = {}
        self.replicasets_created: dict[Key, list[tuple[float, str]]] = {}
        self.marks: list[Mark] = []

    @staticmethod
    def _key(obj: Obj) -> Key:
        meta = obj["metadata"]
        return (meta.get("namespace", "") or "", meta["name"])

    def deployment_of(self, pod: Obj) -> Key | None:
        ref = _controller(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return None
        namespace = pod["metadata"].get("namespace", "") or ""
        rs = self._replicasets.get((namespace, ref["name"]))
        if rs is None or (ref.get("uid") and rs["metadata"].get("uid") != ref["uid"]):
            return None
        owner = _controller(rs)
        if owner is None or owner.get("kind") != "Deployment":
            return None
        return (namespace, str(owner["name"]))

    def ready_counts(self) -> dict[Key, int]:
        """Ready pods per Deployment: every Deployment seen, and every one a pod counts for."""
        return dict(self._counts)

    def _ready(self, deployment: Key) -> int:
        return sum(1 for pod in self._members.get(deployment, ()) if is_serving(self._pods[pod]))

    def _refresh(self, at: float, touched: Iterable[Key | None]) -> None:
        for key in touched:
            if key is None:
                continue
            if key not in self._deployments and not self._members.get(key):
                self._counts.pop(key, None)
                continue  # not in ready_counts(): its series stays as it was
            count = self._counts[key] = self._ready(key)
            series = self.samples.setdefault(key, [])
            if not series or series[-1][1] != count:
                series.append((at, count))

    def _replicaset_of(self, pod: Obj) -> Key | None:
        ref = _controller(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return None
        return (pod["metadata"].get("namespace", "") or "", str(ref["name"]))

    def _attribute(self, key: Key, pod: Obj | None) -> tuple[Key | None, Key | None]:
        """Re-file one pod (None: gone) under its Deployment; (owner before, owner after)."""
        before = self._owner.pop(key, None)
        if before is not None:
            self._members[before].discard(key)
        old = self._pods.get(key)
        old_rs = None if old is None else self._replicaset_of(old)
        if old_rs is not None:
            self._by_replicaset[old_rs].discard(key)
        if pod is None:
            self._pods.pop(key, None)
            return before, None
        self._pods[key] = pod
        rs = self._replicaset_of(pod)
        if rs is not None:
            self._by_replicaset.setdefault(rs, set()).add(key)
        after = self.deployment_of(pod)
        self._owner[key] = after
        if after is not None:
            self._members.setdefault(after, set()).add(key)
        return before, after

    def pod_event(self, at: float, type_: str, pod: Obj) -> None:
        key = self._key(pod)
        before, after = self._attribute(key, None if type_ == "DELETED" else pod)
        self._refresh(at, (before, after))

    def replicaset_event(self, at: float, type_: str, rs: Obj) -> None:
        key = self._key(rs)
        if type_ == "DELETED":
            self._replicasets.pop(key, None)
        else:
            self._replicasets[key] = rs
            uid = str(rs["metadata"].get("uid", ""))
            owner = _controller(rs)
            if uid not in self._seen_replicasets and owner and owner.get("kind") == "Deployment":
                self._seen_replicasets.add(uid)
                deployment = (key[0], str(owner["name"]))
                self.replicasets_created.setdefault(deployment, []).append((at, key[1]))
        touched: set[Key | None] = set()
        for pod_key in list(self._by_replicaset.get(key, ())):
            touched.update(self._attribute(pod_key, self._pods[pod_key]))
        self._refresh(at, touched)

    def deployment_event(self, at: float, type_: str, deployment: Obj) -> None:
        key = self._key(deployment)
        if type_ != "DELETED":
            self._deployments.add(key)
        self._refresh(at, (key,))

    def mark(self, at: float, label: str, **detail: str) -> Mark:
        mark = Mark(at, label, dict(detail))
        self.marks.append(mark)
        return mark

    def timeline(self, namespace: str, name: str, until: float) -> DeploymentTimeline:
        key = (namespace, name)
        return DeploymentTimeline(
            namespace=namespace,
            name=name,
            samples=tuple(self.samples.get(key, ())),
            replicasets=tuple(self.replicasets_created.get(key, ())),
            until=until,
        )

    def pod_departed(self, namespace: str, name: str) -> bool:
        """Whether the pod is gone or terminating, as far as the events seen so far tell."""
        pod = self._pods.get((namespace, name))
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

    def deployments(self) -> list[Key]:
        return sorted(set(self.samples) | self._deployments)
