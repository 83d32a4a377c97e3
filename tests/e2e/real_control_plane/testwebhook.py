"""Admission webhooks of the test's own, registered beside graceful-drain's, for what only
another webhook makes kube-apiserver do: hold a request inside the API server for as long as
the test says (an eviction already allowed by graceful-drain whose pod is not deleted yet; a
request occupying its API Priority and Fairness seat), or refuse every write of a kind
(`closed_port_url`: nothing listens there, so a `failurePolicy: Fail` webhook refuses).

    webhook = await HoldingWebhook().start()
    hold = webhook.hold(lambda request: request["name"] == "web-1")   # its reviews
    await kubectl_apply(configuration("e2e-hold", webhook.url, webhook.ca_pem, RULES, ns))
    ... await hold.received.wait() ...; hold.release()                 # then allowed
    await webhook.stop()

Every review it does not hold is allowed at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from realcluster.cluster import free_port
from realcluster.pki import ClusterCA

from .apiproxy import serving_context

Obj = dict[str, Any]
HOLD_BOUND = 60.0  # a held review is answered by then whatever the test does (a hang guard)


@dataclass
class Hold:
    """Every review `matches` accepts is held until `release()` (`received`: one was)."""

    matches: Callable[[Obj], bool]
    received: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[Obj] = field(default_factory=list)

    def release(self) -> None:
        self.released.set()


@dataclass
class HoldingWebhook:
    url: str = ""
    ca_pem: bytes = b""
    reviews: list[Obj] = field(default_factory=list)  # every review's `request`, in order
    _holds: list[Hold] = field(default_factory=list)
    _runner: web.AppRunner | None = None

    def hold(self, matches: Callable[[Obj], bool]) -> Hold:
        hold = Hold(matches)
        self._holds.append(hold)
        return hold

    async def start(self) -> HoldingWebhook:
        authority = ClusterCA("e2e-webhook-ca")
        pair = authority.issue_serving(["127.0.0.1"])
        self.ca_pem = authority.cert_pem
        app = web.Application()
        app.router.add_post("/review", self._review)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0,
                           ssl_context=serving_context(pair.cert_pem, pair.key_pem))  # fmt: skip
        await site.start()
        self.url = f"https://127.0.0.1:{self._runner.addresses[0][1]}/review"
        return self

    async def stop(self) -> None:
        for hold in self._holds:
            hold.release()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _review(self, request: web.Request) -> web.Response:
        review = json.loads(await request.read())
        subject: Obj = review["request"]
        self.reviews.append(subject)
        for hold in self._holds:
            if not hold.released.is_set() and hold.matches(subject):
                hold.requests.append(subject)
                hold.received.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(hold.released.wait(), HOLD_BOUND)
                break
        answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "response": {"uid": subject["uid"], "allowed": True}}  # fmt: skip
        return web.json_response(answer)


def closed_port_url() -> str:
    """An https URL on loopback where nothing listens (a webhook there is never reached)."""
    return f"https://127.0.0.1:{free_port()}/review"


def configuration(
    name: str, url: str, ca_pem: bytes, rules: list[Obj], namespace: str, *,
    failure_policy: str = "Ignore", timeout_seconds: int = 30,
) -> Obj:  # fmt: skip
    """A ValidatingWebhookConfiguration calling `url` for `rules`, in `namespace` only."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{name}.e2e.graceful-drain.test",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
            "rules": rules,
            "failurePolicy": failure_policy,
            "sideEffects": "None",
            "timeoutSeconds": timeout_seconds,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        }],
    }  # fmt: skip
