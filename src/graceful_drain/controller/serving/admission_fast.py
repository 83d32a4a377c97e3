"""A fast path in front of `admission.parse_review` for the usual pods/eviction AdmissionReview.

`parse_review_fast` decodes the body with msgspec into typed structs that declare only the
fields the webhook reads (the rest is skipped, not built), and returns the `EvictionRequest`
only when the review is unremarkable: exactly what a Kubernetes API server sends for
`CREATE pods/eviction` (request.kind policy/v1 Eviction, every field of the expected type and
within its limits). Whether the namespace and name are valid DNS names is not checked here:
`table.precheck` checks that once, for either path (`Reason.INVALID_NAME`). Anything else —
a decode or type error, an unusual value, a large or non-ASCII body — goes through
`admission.parse_review`, the one validating path, which also words every refusal. So a check
added there keeps applying to anything it could refuse, provided the fast path's notion of
"unremarkable" stays at least as strict; tests/unit/controller/test_admission_fast.py compares
the two on generated bodies.
"""

from __future__ import annotations

import msgspec

from graceful_drain.controller.decision.request import EvictionRequest
from graceful_drain.controller.serving.admission import (
    ADMISSION_API_VERSION,
    ADMISSION_KIND,
    MAX_NAME_CHARS,
    MAX_NAMESPACE_CHARS,
    MAX_UID_CHARS,
    MAX_USERNAME_CHARS,
    ParsedReview,
    parse_review,
)

# Below the 4,300 digits Python's json refuses in an integer, with few enough brackets to stay
# far from its recursion limit: msgspec skips unread fields without those two checks (and
# without validating UTF-8, hence ASCII only). A real eviction review is about 1.5 KiB.
MAX_FAST_BYTES = 4096
MAX_FAST_BRACKETS = 64
MAX_VERSION_CHARS = 64


class _GroupVersionKind(msgspec.Struct):
    group: str = ""
    version: str = ""
    kind: str = ""


class _GroupVersionResource(msgspec.Struct):
    group: str = ""
    version: str = ""
    resource: str = ""


class _UserInfo(msgspec.Struct):
    username: str | None = None


class _Preconditions(msgspec.Struct):
    uid: str | None = None


class _DeleteOptions(msgspec.Struct):
    preconditions: _Preconditions | None = None
    dry_run: list[str] | None = msgspec.field(name="dryRun", default=None)


class _Eviction(msgspec.Struct):
    delete_options: _DeleteOptions | None = msgspec.field(name="deleteOptions", default=None)


class _Request(msgspec.Struct):
    uid: str
    kind: _GroupVersionKind
    resource: _GroupVersionResource
    operation: str
    namespace: str
    name: str
    sub_resource: str | None = msgspec.field(name="subResource", default=None)
    dry_run: bool | None = msgspec.field(name="dryRun", default=None)
    user_info: _UserInfo | None = msgspec.field(name="userInfo", default=None)
    object: _Eviction | None = None


class _Review(msgspec.Struct):
    api_version: str = msgspec.field(name="apiVersion")
    kind: str
    request: _Request


_decoder = msgspec.json.Decoder(_Review)


def parse_review_fast(body: bytes) -> ParsedReview:
    """Same answer as `parse_review(body)`, cheaper for the usual eviction review."""
    usual = _usual_eviction(body)
    return parse_review(body) if usual is None else usual


def _usual_eviction(body: bytes) -> EvictionRequest | None:
    if (
        len(body) > MAX_FAST_BYTES
        or not body.isascii()
        or body.count(b"[") + body.count(b"{") > MAX_FAST_BRACKETS
    ):
        return None
    try:
        review = _decoder.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return None
    request = review.request
    kind, resource = request.kind, request.resource
    if not (
        review.api_version == ADMISSION_API_VERSION
        and review.kind == ADMISSION_KIND
        and 0 < len(request.uid) <= MAX_UID_CHARS
        and (kind.group, kind.version, kind.kind) == ("policy", "v1", "Eviction")
        and (request.operation, resource.group, resource.resource, request.sub_resource)
        == ("CREATE", "", "pods", "eviction")
        and len(resource.version) <= MAX_VERSION_CHARS
        and 0 < len(request.namespace) <= MAX_NAMESPACE_CHARS
        and 0 < len(request.name) <= MAX_NAME_CHARS
    ):
        return None
    precondition_uid: str | None = None
    options_dry_run = False
    options = None if request.object is None else request.object.delete_options
    if options is not None:
        if options.preconditions is not None:
            precondition_uid = options.preconditions.uid
            if precondition_uid is not None and len(precondition_uid) > MAX_UID_CHARS:
                return None
        options_dry_run = bool(options.dry_run)
    username = "" if request.user_info is None else request.user_info.username
    return EvictionRequest(
        uid=request.uid,
        operation=request.operation,
        group=resource.group,
        version=resource.version,
        resource=resource.resource,
        sub_resource="eviction",
        namespace=request.namespace,
        name=request.name,
        dry_run=bool(request.dry_run),
        username=(username or "")[:MAX_USERNAME_CHARS],
        precondition_uid=precondition_uid,
        options_dry_run=options_dry_run,
    )
