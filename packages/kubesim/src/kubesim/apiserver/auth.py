"""Bearer-token authentication: users, groups and ServiceAccount tokens."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class UserInfo:
    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def service_account(cls, namespace: str, name: str, uid: str = "") -> UserInfo:
        """A ServiceAccount token's user, with the groups the authenticator adds."""
        return service_account_user(namespace, name, uid)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"username": self.username, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        return out


ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    return UserInfo(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        uid,
    )


class TokenAuthenticator:
    def __init__(self) -> None:
        self._tokens: dict[str, UserInfo] = {}

    def add(self, user: UserInfo, token: str | None = None) -> str:
        token = token or secrets.token_urlsafe(32)
        groups = user.groups
        if "system:authenticated" not in groups:
            groups = (*groups, "system:authenticated")
        self._tokens[token] = UserInfo(user.username, groups, user.uid, user.extra)
        return token

    def revoke(self, token: str) -> None:
        self._tokens.pop(token, None)

    def authenticate(self, authorization_header: str | None) -> UserInfo | None:
        """None: credentials were presented but are not valid (401)."""
        if not authorization_header:
            return ANONYMOUS
        scheme, _, token = authorization_header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self._tokens.get(token.strip())
