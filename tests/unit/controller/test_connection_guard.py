"""Which connection the guard drops to make room under its cap (connections.py), table-driven
and as a property: the oldest of the first kind there is — never sent a whole request (its
TLS handshake included) or leaves its answers unread, then idle between requests, then slow
with a later request — and never one running a handler."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.controller.serving.connections import ConnectionGuard, GuardedConnection


@dataclass(eq=False)
class FakeTransport(asyncio.BaseTransport):
    name: str
    aborted: bool = False

    def abort(self) -> None:
        self.aborted = True


def put(guard: ConnectionGuard, name: str, state: str) -> FakeTransport:
    """Open a connection and bring it to `state`, as the server would tell the guard."""
    connection, transport = GuardedConnection(), FakeTransport(name)
    assert guard.opened(connection, transport)
    if state == "handshaking":
        pass
    elif state == "handshaken":
        guard.handshaken(connection)
    elif state == "first-request-begun":
        guard.handshaken(connection)
        guard.data(connection)
    elif state in ("busy", "idle", "stalled", "later-request-begun"):
        guard.handshaken(connection)
        guard.busy(connection)  # a request arrived whole
        if state == "idle":
            guard.done(connection, mid_request=False)
        elif state == "later-request-begun":
            guard.done(connection, mid_request=True)
        elif state == "stalled":
            guard.stalled(connection)
    else:
        raise AssertionError(state)
    return transport


STATES = ["handshaking", "handshaken", "first-request-begun", "stalled", "idle",
          "later-request-begun", "busy"]  # fmt: skip
RANK = {"handshaking": 0, "handshaken": 0, "first-request-begun": 0, "stalled": 0, "idle": 1,
        "later-request-begun": 2}  # fmt: skip


def expected_victim(states: list[str]) -> int | None:
    """The index of the connection the guard must drop (oldest first within a rank)."""
    ranked = [(RANK[state], i) for i, state in enumerate(states) if state != "busy"]
    return min(ranked)[1] if ranked else None


async def newcomer_at_cap(states: list[str]) -> tuple[list[FakeTransport], bool]:
    guard = ConnectionGuard(max_connections=len(states))
    transports = [put(guard, f"c{i}", state) for i, state in enumerate(states)]
    admitted = guard.opened(GuardedConnection(), FakeTransport("newcomer"))
    return transports, admitted


@pytest.mark.parametrize(
    ("states", "victim"),
    [
        (["idle", "handshaking"], 1),  # a connection not yet in TLS goes before a served one
        (["later-request-begun", "idle"], 1),
        (["idle", "stalled"], 1),  # leaving answers unread: dropped like one never served
        (["handshaken", "first-request-begun"], 0),  # same kind: the oldest
        (["busy", "later-request-begun"], 1),
        (["busy", "busy"], None),  # refused
    ],
)
async def test_the_guard_drops_the_oldest_of_the_first_kind_there_is(
    states: list[str], victim: int | None
) -> None:
    assert expected_victim(states) == victim  # the table agrees with the rule it states
    transports, admitted = await newcomer_at_cap(states)
    assert [t.aborted for t in transports] == [i == victim for i in range(len(states))]
    assert admitted == (victim is not None)


@given(st.lists(st.sampled_from(STATES), min_size=1, max_size=12))
async def test_any_mix_of_connections_loses_the_one_the_rule_names(states: list[str]) -> None:
    transports, admitted = await newcomer_at_cap(states)
    victim = expected_victim(states)
    assert [i for i, t in enumerate(transports) if t.aborted] == ([] if victim is None
                                                                   else [victim])  # fmt: skip
    assert admitted == (victim is not None)
