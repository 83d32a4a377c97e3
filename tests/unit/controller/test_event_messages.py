"""What graceful-drain's Events say (controller/writes/events.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from graceful_drain.controller.decision.model import ObjectRef
from graceful_drain.controller.writes.events import (
    completed_message,
    held_message,
    started_message,
    timeout_message,
)

POD = ObjectRef("shop", "web-5d9-abcde")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            started_message(POD, "node-a", "2024-05-01T12:00:00Z"),
            "Rollout requested at 2024-05-01T12:00:00Z so that pod web-5d9-abcde can leave node "
            "node-a with a Ready replacement elsewhere; its eviction is held until then",
        ),
        (
            held_message(POD, "node-a", timedelta(seconds=95)),
            "Eviction of pod web-5d9-abcde from node node-a held until the replacement is Ready "
            "(waited 1m35s)",
        ),
        (
            held_message(POD, "", None),
            "Eviction of pod web-5d9-abcde from node (unscheduled) held until the replacement "
            "is Ready",
        ),
        (
            completed_message("2024-05-01T12:00:00Z", timedelta(seconds=42)),
            "Rollout requested at 2024-05-01T12:00:00Z completed in 42s; evictions proceed",
        ),
        (
            timeout_message(
                "2024-05-01T12:00:00Z", timedelta(minutes=10, seconds=3), timedelta(minutes=10)
            ),
            "Rollout requested at 2024-05-01T12:00:00Z did not complete within rolloutTimeout "
            "10m0s (waited 10m3s); evictions are no longer held",
        ),
    ],
)
def test_messages(message: str, expected: str) -> None:
    assert message == expected
