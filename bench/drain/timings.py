"""Part 3's clock: every duration of the drain benchmark, scaled, and the floor it is judged by.

Real drains take minutes (kubectl retries a refused eviction every 5 s, Cluster Autoscaler
every 10 s, a restart-on-cordon loop polls every 60 s); the benchmark runs them on kubesim
with every such duration multiplied by one factor (`scale`, 0.1 by default), the readiness
delay R included, so their proportions are those of a real cluster. What is not scaled is
the simulated control plane itself — API calls, controllers, scheduling — which reacts in
real time; the target's 2 s allowance for reaction stays 2 s for the same reason.

The floor of a drain that keeps a Ready pod is R + one retry interval: a replacement needs R
to become Ready somewhere else, and the client notices at its next retry. Karpenter retries
with an exponential back-off (client-go's per-item limiter), so its "one retry interval" is
the delay in effect when R has passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.backoff import Backoff
from kubesim.scenario import drain_parameters

CLIENT_NAMES = ("kubectl", "karpenter", "cluster-autoscaler")
REACTION_ALLOWANCE = 2.0  # seconds, unscaled: see the module docstring

# Upstream defaults, in real seconds.
READINESS_DELAY = 10.0
KUBECTL_RETRY = 5.0  # kubectl drain: "will retry after 5s"
KUBECTL_POLL = 1.0  # waitForDelete's interval
KARPENTER_BASE = 0.1  # evictionQueueBaseDelay
KARPENTER_MAX = 10.0  # evictionQueueMaxDelay
KARPENTER_REQUEUE = 1.0
KARPENTER_DEDUPE = 120.0  # its event recorder's defaultDedupeTimeout
AUTOSCALER_RETRY = 10.0  # DefaultEvictionRetryTime
AUTOSCALER_MAX_EVICTION = 120.0  # --max-pod-eviction-time
AUTOSCALER_POLL = 5.0
AUTOSCALER_HEADROOM = 30.0
RESTART_POLL_PERIOD = 60.0  # the polling restart-on-cordon alternative
BLOCKED_WINDOW = 60.0  # how long a drain a PDB blocks is watched before it is called blocked
ROLLOUT_TIMEOUT = 600.0  # the controller's default rolloutTimeout


def retry_interval_at(elapsed: float, base: float, cap: float) -> float:
    """The back-off delay of the retry that first comes after `elapsed` seconds of refusals
    (first attempt at 0, then base, 2·base... capped at `cap`)."""
    at, backoff = 0.0, Backoff(base, cap)  # the Karpenter-style client's eviction retries
    while True:
        delay = backoff.next_delay()
        at += delay
        if at >= elapsed or delay >= cap:
            return delay


@dataclass(frozen=True)
class DrainTimings:
    scale: float = 0.1

    def __post_init__(self) -> None:
        if not 0 < self.scale <= 1:
            raise ValueError(f"scale must be in (0, 1], not {self.scale}")

    def scaled(self, seconds: float) -> float:
        return seconds * self.scale

    @property
    def readiness_delay(self) -> float:
        return self.scaled(READINESS_DELAY)

    @property
    def restart_period(self) -> float:
        return self.scaled(RESTART_POLL_PERIOD)

    @property
    def blocked_window(self) -> float:
        return self.scaled(BLOCKED_WINDOW)

    @property
    def rollout_timeout(self) -> float:
        return self.scaled(ROLLOUT_TIMEOUT)

    def parameters(self, client: str) -> Mapping[str, Any]:
        """The drain client's keyword parameters (kubesim.drain), scaled."""
        s = self.scaled
        if client == "kubectl":
            return {
                "ignore_daemonsets": True,
                "retry_interval": s(KUBECTL_RETRY),
                "poll_interval": s(KUBECTL_POLL),
            }
        if client == "karpenter":
            parameters = {
                "eviction_base_delay": s(KARPENTER_BASE),
                "eviction_max_delay": s(KARPENTER_MAX),
                "requeue_interval": s(KARPENTER_REQUEUE),
            }
            # A baseline commit's client may predate its event dedupe (it then publishes
            # every event, as it did).
            if "dedupe_timeout" in drain_parameters(client):
                parameters["dedupe_timeout"] = s(KARPENTER_DEDUPE)
            return parameters
        if client == "cluster-autoscaler":
            return {
                "eviction_retry_time": s(AUTOSCALER_RETRY),
                "max_pod_eviction_time": s(AUTOSCALER_MAX_EVICTION),
                "wait_poll_interval": s(AUTOSCALER_POLL),
                "pod_eviction_headroom": s(AUTOSCALER_HEADROOM),
            }
        raise ValueError(f"unknown drain client {client!r}")

    def retry_interval(self, client: str) -> float:
        """The client's retry interval as it stands once R has passed."""
        s = self.scaled
        if client == "kubectl":
            return s(KUBECTL_RETRY)
        if client == "cluster-autoscaler":
            return s(AUTOSCALER_RETRY)
        if client == "karpenter":
            return retry_interval_at(self.readiness_delay, s(KARPENTER_BASE), s(KARPENTER_MAX))
        raise ValueError(f"unknown drain client {client!r}")

    def floor(self, client: str) -> float:
        """R + one retry interval."""
        return self.readiness_delay + self.retry_interval(client)

    def target(self, client: str) -> float:
        """The issue's bound: within R + one retry interval + 2 s of the floor."""
        return (
            self.floor(client)
            + self.readiness_delay
            + self.retry_interval(client)
            + (REACTION_ALLOWANCE)
        )
