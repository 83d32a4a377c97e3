"""Which connection the guard drops to make room under its cap (connections.py), table-driven
and as a property: the least recently used of the first kind there is — leaves its answers
unread or has not sent a whole request (its TLS handshake included) within a tenth of its
read deadline, then one that sent nothing, then idle after a single request, then idle after
several, then a newcomer still in that tenth, then slow with a later request — and never one
running a handler."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.controller.serving.connections import (
    YOUNG_SHARE,
    ConnectionGuard,
    GuardedConnection,
)


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
    if state == "silent":
        pass
    elif state == "handshaking":
        guard.heard(connection)
    elif state == "handshaking-long":  # accepted longer ago than YOUNG_SHARE of the deadline
        guard.heard(connection)
        connection.opened_at -= guard.read_timeout * YOUNG_SHARE
    elif state == "handshaken":
        guard.heard(connection)
        guard.handshaken(connection)
    elif state == "first-request-begun":
        guard.heard(connection)
        guard.handshaken(connection)
        guard.data(connection)
    elif state in ("busy", "idle", "idle-reused", "stalled", "later-request-begun"):
        guard.heard(connection)
        guard.handshaken(connection)
        guard.busy(connection)  # a request arrived whole
        if state == "idle-reused":
            guard.done(connection, mid_request=False)
            guard.busy(connection)  # and a second one
            guard.done(connection, mid_request=False)
        elif state == "idle":
            guard.done(connection, mid_request=False)
        elif state == "later-request-begun":
            guard.done(connection, mid_request=True)
        elif state == "stalled":
            guard.stalled(connection)
    else:
        raise AssertionError(state)
    return transport


STATES = ["silent", "handshaking", "handshaking-long", "handshaken", "first-request-begun",
          "stalled", "idle", "idle-reused", "later-request-begun", "busy"]  # fmt: skip
RANK = {"handshaking-long": 0, "stalled": 0, "silent": 1, "idle": 2, "idle-reused": 3,
        "handshaking": 4, "handshaken": 4, "first-request-begun": 4,
        "later-request-begun": 5}  # fmt: skip


def expected_victim(states: list[str], order: list[int] | None = None) -> int | None:
    """The index of the connection the guard must drop: the least recently used within the
    first rank there is. `order`: the indexes from least to most recently used (default: in
    order of opening)."""
    position = {i: n for n, i in enumerate(order or range(len(states)))}
    ranked = [(RANK[state], position[i], i) for i, state in enumerate(states) if state != "busy"]
    return min(ranked)[2] if ranked else None


async def newcomer_at_cap(states: list[str]) -> tuple[list[FakeTransport], bool]:
    guard = ConnectionGuard(max_connections=len(states))
    transports = [put(guard, f"c{i}", state) for i, state in enumerate(states)]
    admitted = guard.opened(GuardedConnection(), FakeTransport("newcomer"))
    return transports, admitted


@pytest.mark.parametrize(
    ("states", "victim"),
    [
        (["idle", "handshaking-long"], 1),  # not yet in TLS a while: before a served one
        (["handshaking", "idle"], 1),  # a newcomer gets its chance before an idle one goes
        (["idle", "silent"], 1),  # ... unless it has sent nothing at all
        (["handshaking-long", "silent"], 0),
        (["later-request-begun", "idle"], 1),
        (["idle", "stalled"], 1),  # leaving answers unread: dropped like one never served
        (["idle-reused", "idle"], 1),  # a newcomer that sent one request, before a kept one
        (["later-request-begun", "idle-reused"], 1),
        (["handshaken", "first-request-begun"], 0),  # same kind: the least recently used
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


def reuse(guard: ConnectionGuard, connection: GuardedConnection) -> None:
    guard.busy(connection)
    guard.done(connection, mid_request=False)


@given(
    st.lists(st.sampled_from(["idle", "idle-reused"]), min_size=2, max_size=10),
    st.lists(st.integers(min_value=0, max_value=9), max_size=30),
)
async def test_a_request_moves_its_connection_behind_every_other(
    states: list[str], uses: list[int]
) -> None:
    """Least recently used first: a connection in steady use (the API server's) is the last
    of its kind to go, however long ago it was opened."""
    guard = ConnectionGuard(max_connections=len(states))
    transports = [put(guard, f"c{i}", state) for i, state in enumerate(states)]
    connections = [guard._open[transport] for transport in transports]
    order = list(range(len(states)))
    for use in (u % len(states) for u in uses):
        reuse(guard, connections[use])  # a second request (at least): now reused
        states[use] = "idle-reused"
        order.remove(use)
        order.append(use)
    assert guard.opened(GuardedConnection(), FakeTransport("newcomer"))
    victim = expected_victim(states, order)
    assert [i for i, t in enumerate(transports) if t.aborted] == [victim]
