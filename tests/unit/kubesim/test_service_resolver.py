"""kubesim's webhook Service resolution: one endpoint, or several taken in turn per call."""

from __future__ import annotations

import pytest

from kubesim.apiserver.admission.webhooks import ServiceResolver


def test_one_endpoint_always_answers() -> None:
    resolver = ServiceResolver()
    resolver.register("ns", "hook", 443, "127.0.0.1", 8443)
    assert [resolver.resolve("ns", "hook", 443) for _ in range(3)] == [("127.0.0.1", 8443)] * 3


def test_several_endpoints_are_taken_in_turn_one_per_call() -> None:
    resolver = ServiceResolver()
    resolver.register_endpoints("ns", "hook", 443, "127.0.0.1", [1001, 1002, 1003])
    ports = [resolver.resolve("ns", "hook", 443)[1] for _ in range(7)]
    assert ports == [1001, 1002, 1003, 1001, 1002, 1003, 1001]
    resolver.register("ns", "hook", 443, "127.0.0.1", 2001)  # re-pointed: the turn restarts
    assert resolver.resolve("ns", "hook", 443) == ("127.0.0.1", 2001)


def test_unknown_services_and_ports_and_non_loopback_hosts() -> None:
    resolver = ServiceResolver()
    resolver.register_endpoints("ns", "hook", 443, "127.0.0.1", [1001])
    with pytest.raises(LookupError, match='no service port 444 found for service "hook"'):
        resolver.resolve("ns", "hook", 444)
    with pytest.raises(LookupError, match='service "other" not found'):
        resolver.resolve("ns", "other", 443)
    with pytest.raises(ValueError, match="loopback only"):
        resolver.register_endpoints("ns", "hook", 443, "10.0.0.1", [1001])
    with pytest.raises(ValueError, match="at least one endpoint"):
        resolver.register_endpoints("ns", "hook", 443, "127.0.0.1", [])
    resolver.unregister("ns", "hook", 443)
    with pytest.raises(LookupError):
        resolver.resolve("ns", "hook", 443)
