"""The AdmissionReview a validating webhook receives for a pods/eviction CREATE, compared
field for field: each server calls a small recording webhook (HTTPS on loopback, its own
CA), registered by URL for this namespace only."""

from __future__ import annotations

import asyncio
import base64
import ssl
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from kubesim.client import ApiStatusError, resource_path
from kubesim.pki import CertificateAuthority

from .interactions import Api, Interaction, status_only

WEBHOOK_GUARD = 30.0  # a guard against hangs only: a server sees a new configuration soon
EVICTION_RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods/eviction"], "scope": "Namespaced"}]  # fmt: skip


class RecordingWebhook:
    """An HTTPS admission webhook that allows everything and keeps each review."""

    def __init__(self) -> None:
        self.ca = CertificateAuthority("differential-webhook-ca")
        self.reviews: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.port = 0

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        self.arrived.set()
        answer = {"uid": review["request"]["uid"], "allowed": True}
        return web.json_response({"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview", "response": answer})  # fmt: skip

    def _tls(self) -> ssl.SSLContext:
        pair = self.ca.issue_server(["127.0.0.1"])
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as directory:
            cert, key = Path(directory, "hook.crt"), Path(directory, "hook.key")
            cert.write_bytes(pair.cert_pem)
            key.write_bytes(pair.key_pem)
            tls.load_cert_chain(cert, key)
        return tls

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[RecordingWebhook]:
        tls = self._tls()
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
            await site.start()
            self.port = runner.addresses[0][1]
            yield self
        finally:
            await runner.cleanup()

    def configuration(self, name: str, namespace: str) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": "evictions.differential.example.com",
                "clientConfig": {"url": f"https://127.0.0.1:{self.port}/validate",
                                 "caBundle": base64.b64encode(self.ca.cert_pem).decode()},
                "rules": EVICTION_RULES,
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 5,
                "admissionReviewVersions": ["v1"],
            }],
        }  # fmt: skip


def _review_view(review: dict[str, Any]) -> dict[str, Any]:
    """The review, with only the fields of its userInfo: who calls is each server's own
    admin user, not part of the answer (realcluster's static token file also gives its
    admin a uid, which kubesim's admin token, as a kubeconfig's client certificate, has
    not)."""
    request = dict(review["request"])
    request["userInfo"] = sorted(set(request.get("userInfo") or {}) - {"uid"})
    return {**review, "request": request}


async def _eviction_review(api: Api) -> None:
    pods = resource_path("v1", "pods", api.namespace)
    configs = resource_path("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "labels": {"app": "p"}},
           "spec": {"nodeName": "no-such-node",
                    "containers": [{"name": "c", "image": "example/app:1"}]}}  # fmt: skip
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p", "namespace": api.namespace},
                "deleteOptions": {"gracePeriodSeconds": 5}}  # fmt: skip
    await api.call("create pod", "POST", pods, pod, view=status_only)
    hook = RecordingWebhook()
    async with hook.serving():
        await api.call("register", "POST", configs, hook.configuration(api.namespace,
                       api.namespace), view=status_only)  # fmt: skip
        try:
            # A server calls a new webhook once its configuration informer has it: dry-run
            # evictions (the webhook has no side effects) until one reaches it.
            async with asyncio.timeout(WEBHOOK_GUARD):
                while not hook.reviews:
                    hook.arrived.clear()
                    await api.client.request("POST", f"{pods}/p/eviction", eviction,
                                             params={"dryRun": "All"})  # fmt: skip
                    try:
                        await asyncio.wait_for(hook.arrived.wait(), 0.5)
                    except TimeoutError:
                        continue
            dry_run = hook.reviews[-1]
            api.note("dry-run review", _review_view(dry_run))
            hook.reviews.clear()
            await api.call("evict", "POST", f"{pods}/p/eviction", eviction)
            api.note("reviews of one eviction", len(hook.reviews))
            api.note("review", _review_view(hook.reviews[0]) if hook.reviews else None)
        finally:
            try:
                await api.client.delete(f"{configs}/{api.namespace}")
            except ApiStatusError as error:
                if error.code != 404:
                    raise


ADMISSION: list[tuple[str, Interaction]] = [
    ("admission: the review of an eviction", _eviction_review),
]
