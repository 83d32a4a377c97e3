"""Event bodies, names and aggregation state (no API server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.kube.events import (
    MAX_MESSAGE_CHARS,
    REPORTING_CONTROLLER,
    EventRecord,
    InvolvedObject,
    Series,
    SeriesCache,
    event_body,
    repeat_patch,
)
from graceful_drain.kube.meta import event_name

AT = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
WEB = InvolvedObject.deployment("shop", "web", "dep-uid")


def record(message: str = "held", reason: str = "GracefulDrainWaiting") -> EventRecord:
    return EventRecord(WEB, "Normal", reason, message, AT)


def test_event_body_is_a_core_v1_event_kubectl_describe_finds() -> None:
    body = event_body(record(), "web.17cd", "controller-7f9-x2")

    assert body == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "web.17cd", "namespace": "shop"},
        "involvedObject": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": "shop",
            "name": "web",
            "uid": "dep-uid",  # describe selects on involvedObject.uid
        },
        "type": "Normal",
        "reason": "GracefulDrainWaiting",
        "message": "held",
        "source": {"component": REPORTING_CONTROLLER},  # describe's "From" column
        "reportingComponent": REPORTING_CONTROLLER,
        "reportingInstance": "controller-7f9-x2",
        "firstTimestamp": "2024-05-01T12:00:00Z",
        "lastTimestamp": "2024-05-01T12:00:00Z",
        "count": 1,
    }


def test_an_unknown_uid_is_left_out_of_the_reference() -> None:
    regarding = InvolvedObject.deployment("shop", "web")

    assert "uid" not in regarding.as_reference()


def test_long_messages_are_cut_to_the_api_limit() -> None:
    body = event_body(record("x" * 5000), "n", "i")

    assert len(body["message"]) == MAX_MESSAGE_CHARS
    assert body["message"].endswith("...")


def test_repeat_patch_counts_and_moves_last_timestamp() -> None:
    later = EventRecord(WEB, "Normal", "GracefulDrainWaiting", "held 2", AT + timedelta(minutes=1))

    assert repeat_patch(later, 3) == {
        "count": 3,
        "lastTimestamp": "2024-05-01T12:01:00Z",
        "message": "held 2",
    }


def test_event_name_is_object_dot_hex_nanoseconds() -> None:
    assert event_name("web", AT) == f"web.{1714564800123456000:x}"


@given(st.datetimes(timezones=st.just(UTC)), st.datetimes(timezones=st.just(UTC)))
def test_event_names_differ_exactly_when_times_differ(a: datetime, b: datetime) -> None:
    if a.year < 1971 or b.year < 1971:
        return
    name_a, name_b = event_name("web", a), event_name("web", b)
    assert (a == b) == (name_a == name_b)


def test_series_key_ignores_the_message() -> None:
    assert record("held 10s").series_key == record("held 40s").series_key
    assert record(reason="A").series_key != record(reason="B").series_key


def test_series_cache_expires_after_the_window() -> None:
    cache = SeriesCache(window=timedelta(minutes=6))
    cache.remember("k", Series("web.1", 1, AT))

    assert cache.find("k", AT + timedelta(minutes=5, seconds=59)) == Series("web.1", 1, AT)
    assert cache.find("k", AT + timedelta(minutes=6)) is None
    assert len(cache) == 0


def test_series_cache_is_bounded_and_drops_the_least_recent() -> None:
    cache = SeriesCache(max_keys=2)
    cache.remember("a", Series("a", 1, AT))
    cache.remember("b", Series("b", 1, AT))
    cache.remember("a", Series("a", 2, AT))  # "a" used again: "b" is now the oldest
    cache.remember("c", Series("c", 1, AT))

    assert cache.find("b", AT) is None
    assert cache.find("a", AT) == Series("a", 2, AT)
    assert cache.find("c", AT) is not None
