"""Small helpers over object metadata shared by the registry and the controllers."""

from __future__ import annotations

import datetime as dt
import random
import string

from kubesim.types import Obj

_GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apiserver/pkg/storage/names


def rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def generate_name(prefix: str, rng: random.Random) -> str:
    # Upstream truncates the prefix to leave room for 5 random characters (max 63).
    return prefix[: 63 - 5] + "".join(rng.choice(_GENERATE_NAME_ALPHABET) for _ in range(5))


def controller_ref(obj: Obj) -> Obj | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def is_dns1123_subdomain(name: str) -> bool:
    if not name or len(name) > 253:
        return False
    allowed = set(string.ascii_lowercase + string.digits + "-.")
    if any(c not in allowed for c in name):
        return False
    return all(part and part[0].isalnum() and part[-1].isalnum() for part in name.split("."))
