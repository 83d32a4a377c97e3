"""The shapes every kubesim module shares: an API object as JSON, and its cache key."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
