"""Small facts of the Kubernetes API that the controller, the CLI and the detector share:
the HTTP statuses they act on, the clock, JSON pointer tokens and Event names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

HTTP_CREATED: Final = 201
HTTP_UNAUTHORIZED: Final = 401  # no valid credentials (an expired or revoked token)
HTTP_FORBIDDEN: Final = 403  # authenticated, but RBAC does not allow it
HTTP_NOT_FOUND: Final = 404
HTTP_CONFLICT: Final = 409  # a create of an existing object, a stale resourceVersion
HTTP_GONE: Final = 410  # a watch's resourceVersion is too old
HTTP_UNPROCESSABLE: Final = 422  # e.g. a JSON patch whose `test` failed
# The message of the 422 kube-apiserver answers when a JSON patch does not apply to the stored
# object (a `test` that fails, a `remove` of a member that is gone; apiserver
# endpoints/handlers/patch.go `applyJSPatch`: errors.NewGenericServerResponse(422, ...)); a
# validation failure says "<Kind> \"<name>\" is invalid: ..." instead.
JSON_PATCH_NOT_APPLICABLE: Final = "the server rejected our request due to an error in our request"
HTTP_TOO_MANY_REQUESTS: Final = 429  # how the webhook holds an eviction
# Either way the caller may not read it: what it learns is that, not the object.
HTTP_NOT_ALLOWED: Final = frozenset({HTTP_UNAUTHORIZED, HTTP_FORBIDDEN})


def utc_now() -> datetime:
    """The wall clock, aware and in UTC (every timestamp the API server reads or writes)."""
    return datetime.now(UTC)


def json_pointer_token(key: str) -> str:
    """RFC 6901 escaping of one JSON pointer token (an annotation key holds a `/`)."""
    return key.replace("~", "~0").replace("/", "~1")


def event_name(object_name: str, at: datetime) -> str:
    """`<object>.<unix nanoseconds in hex>`, as client-go names events (tools/record)."""
    nanos = int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000
    return f"{object_name}.{nanos:x}"
