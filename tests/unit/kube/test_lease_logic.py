"""Whose Lease is it, and what gets written (client-go tools/leaderelection semantics)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graceful_drain.kube.lease import LeaseRecord, Verdict, claimed, judge, released

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
LATER = T0 + timedelta(seconds=30)


def held_by(holder: str, duration: int = 15, transitions: int = 3) -> LeaseRecord:
    return LeaseRecord(holder, duration, T0, T0, transitions)


@pytest.mark.parametrize(
    ("record", "observed_at", "now", "verdict"),
    [
        (held_by("me"), 100.0, 100.0, "renew"),
        (held_by("me"), 100.0, 500.0, "renew"),  # our own, even if we were slow
        (held_by("other"), 100.0, 114.9, "held-by-another"),
        (held_by("other"), 100.0, 115.0, "take-over"),  # not renewed for leaseDurationSeconds
        (held_by(""), 100.0, 100.0, "take-over"),  # released
        (held_by("other", duration=1), 100.0, 101.0, "take-over"),  # released the client-go way
    ],
)
def test_judge(record: LeaseRecord, observed_at: float, now: float, verdict: Verdict) -> None:
    assert judge(record, "me", observed_at, now) == verdict


def test_first_claim_creates_the_record() -> None:
    assert claimed(None, "me", 15, T0) == LeaseRecord("me", 15, T0, T0, 0)


def test_renewal_keeps_acquire_time_and_transitions() -> None:
    assert claimed(held_by("me"), "me", 15, LATER) == LeaseRecord("me", 15, T0, LATER, 3)


@pytest.mark.parametrize("previous", ["other", ""])
def test_take_over_counts_a_transition(previous: str) -> None:
    assert claimed(held_by(previous), "me", 15, LATER) == LeaseRecord("me", 15, LATER, LATER, 4)


def test_release_empties_the_holder_and_shortens_the_lease() -> None:
    assert released(held_by("me"), LATER) == LeaseRecord("", 1, LATER, LATER, 3)


def test_record_round_trips_through_the_lease_spec() -> None:
    from lightkube.resources.coordination_v1 import Lease

    record = held_by("me")
    assert LeaseRecord.of(Lease(spec=record.spec())) == record
