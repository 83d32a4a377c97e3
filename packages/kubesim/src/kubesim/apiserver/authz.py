"""RBAC authorization backed by the RBAC objects in the store, rebuilt when they change."""

from __future__ import annotations

from .auth import UserInfo
from .rbac import AuthorizationDecision, RBACAuthorizer, RequestAttributes, RulesReview
from .store import Change, ObjectStore, StorageKey

RBAC_KEYS: tuple[StorageKey, ...] = tuple(
    ("rbac.authorization.k8s.io", plural)
    for plural in ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
)


class StoreAuthorizer:
    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._rbac = RBACAuthorizer()
        self._stale = True
        store.add_listener(self._on_change)

    def _on_change(self, key: StorageKey, change: Change) -> None:
        if key in RBAC_KEYS:
            self._stale = True

    def _current(self) -> RBACAuthorizer:
        if self._stale:
            self._rbac.update(obj for key in RBAC_KEYS for obj in self._store.iter_all(key))
            self._stale = False
        return self._rbac

    def authorize(self, attrs: RequestAttributes) -> AuthorizationDecision:
        return self._current().authorize(attrs)

    def rules_for(self, user: UserInfo, namespace: str) -> RulesReview:
        return self._current().rules_for(user, namespace)
