"""The ServiceAccounts controller, after pkg/controller/serviceaccount's: every active
namespace has a ServiceAccount named `default`, made when the namespace is and made again if
it is deleted, so that `kubectl create token default` and a pod's default service account
work in any namespace as they do on a cluster. Upstream's ServiceAccount admission plugin,
which refuses a pod whose service account does not exist yet, is not modelled: kubesim
admits such a pod.
"""

from __future__ import annotations

from kubesim.types import Key, Obj

from ..client import ApiStatusError, KubeClient, resource_path
from .runtime import Controller

DEFAULT = "default"  # the ServiceAccounts every namespace is given (upstream's list: one)


class ServiceAccountsController(Controller):
    """Keeps a `default` ServiceAccount in every namespace that is not terminating."""

    name = "serviceaccount-controller"

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client)
        self.namespaces = self.informer("v1", "namespaces", "Namespace")
        self.accounts = self.informer("v1", "serviceaccounts", "ServiceAccount")
        self.namespaces.add_handler(lambda _t, ns, _old: self._enqueue(ns["metadata"]["name"]))
        self.accounts.add_handler(self._on_account)

    def _enqueue(self, namespace: str) -> None:
        self.queue.add(("", namespace))

    def _on_account(self, kind: str, account: Obj, _old: Obj | None) -> None:
        meta = account["metadata"]
        if kind == "DELETED" and meta.get("name") == DEFAULT:
            self._enqueue(meta.get("namespace", ""))

    async def reconcile(self, key: Key) -> float | None:
        namespace = key[1]
        found = self.namespaces.get("", namespace)
        if found is None or found["metadata"].get("deletionTimestamp"):
            return None
        if self.accounts.get(namespace, DEFAULT) is not None:
            return None
        body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT}}
        try:
            await self.client.create(resource_path("v1", "serviceaccounts", namespace), body)
        except ApiStatusError as error:
            # made meanwhile (409), or the namespace went or began terminating (404, 403)
            if error.code not in (403, 404, 409):
                raise
        return None
