"""AdmissionReview (admission.k8s.io/v1) in and out, for the pods/eviction webhook.

`parse_review` turns any request body into either an `EvictionRequest` or a
`MalformedReview`; it never raises. It is the one entry; behind it, two private paths:

- `_usual_eviction`, the fast path, decodes the body with msgspec into typed structs that
  declare only the fields the webhook reads (the rest is skipped, not built), and returns the
  `EvictionRequest` only when the review is unremarkable: exactly what a Kubernetes API server
  sends for `CREATE pods/eviction` (request.kind policy/v1 Eviction, every field of the
  expected type and within its limits), else None. Whether the namespace and name are valid
  DNS names is not checked here: `table.precheck` checks that once, for either path
  (`Reason.INVALID_NAME`).
- `_parse_validating`, for anything else (a decode or type error, an unusual value, a large
  or non-ASCII body): the one validating path, which also words every refusal. It reads the
  body as `json.loads` does (`_decode`: through msgspec's untyped decode where that gives the
  same, for a fraction of the cost; through json whenever msgspec refuses). A check added
  there keeps applying to anything it could refuse, provided the fast path stays at least as
  strict: whatever it accepts, the validating path accepts as the same `EvictionRequest`
  (tests/unit/controller/test_admission_typed_parse.py, a property over generated bodies).
 `review_response` builds the AdmissionReview the API
server expects back: the request uid echoed, `allowed`, and for a denial
`status: {code: 429, reason: TooManyRequests, message}`
(https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/;
the API server checks apiVersion, kind and uid in
apiserver/pkg/admission/plugin/webhook/request/admissionreview.go VerifyAdmissionResponse).

The handler always answers HTTP 200 with a valid AdmissionReview, even for garbage: a 4xx/5xx makes
the API server fall back to failurePolicy, and an AdmissionReview lets us say why. A malformed
review is allowed (`Reason.MALFORMED_REVIEW`) with a warning. When the request carries no usable uid
(absent, not a string, empty or longer than 256 characters) the response uid is "": no response can
match it, and the API server — which always sends a UUID, so this only happens with other clients —
then applies failurePolicy: Ignore, i.e. admits, which is also our answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

from graceful_drain.controller.decision.reasons import Decision, Reason
from graceful_drain.controller.decision.request import EvictionRequest
from graceful_drain.controller.decision.table import malformed_review
from graceful_drain.kube.meta import HTTP_TOO_MANY_REQUESTS

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_KIND = "AdmissionReview"
MAX_REVIEW_BYTES = 1 << 20  # an eviction review is a few KiB; refuse to parse more than this
TOO_LARGE = f"body is larger than {MAX_REVIEW_BYTES} bytes"  # the problem a malformed review names
MAX_UID_CHARS = 256
MAX_NAME_CHARS = 253  # DNS subdomain
MAX_NAMESPACE_CHARS = 63  # DNS label
MAX_USERNAME_CHARS = 256  # informational only: longer ones are truncated, not refused

_encoder = msgspec.json.Encoder()

# Allowed outcomes worth showing to the client that asked for the eviction (kubectl prints
# "Warning: ..."); the API server may truncate a warning beyond 256 characters.
WARNED_REASONS = frozenset(
    {
        Reason.CANNOT_SURGE,
        Reason.CANNOT_PROTECT,
        Reason.ENABLED_ANNOTATION_INVALID,
        Reason.ROLLOUT_TIMEOUT,
        Reason.STAMP_FAILED,
        Reason.OWNER_UNRESOLVED,
        Reason.ERROR,
        Reason.MALFORMED_REVIEW,
    }
)


@dataclass(frozen=True, slots=True)
class MalformedReview:
    uid: str  # the request uid if one could be read, else ""
    problem: str

    def decision(self) -> Decision:
        return malformed_review(self.problem)


ParsedReview = EvictionRequest | MalformedReview


class _Invalid(Exception):
    """Internal: one field is unusable; _parse_validating turns it into a MalformedReview."""


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _field(parent: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> Any:
    value = parent.get(key)
    if value is None and required:
        raise _Invalid(f"{path} is missing")
    return value


def _string(
    parent: Mapping[str, Any], key: str, path: str, *, required: bool = False, limit: int
) -> str:
    value = _field(parent, key, path, required=required)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Invalid(f"{path} must be a string, not {_type_name(value)}")
    if required and value == "":
        raise _Invalid(f"{path} is empty")
    if len(value) > limit:
        raise _Invalid(f"{path} is longer than {limit} characters")
    return value


def _mapping(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = parent.get(key)
    if value is None or isinstance(value, Mapping):
        return value
    raise _Invalid(f"{path} must be an object, not {_type_name(value)}")


def _usable_uid(request: object) -> str:
    if not isinstance(request, Mapping):
        return ""
    uid = request.get("uid")
    if isinstance(uid, str) and 0 < len(uid) <= MAX_UID_CHARS:
        return uid
    return ""


def _decode(body: bytes | bytearray | memoryview | str) -> object:
    """The body's JSON as `json.loads` reads it, or `_Invalid` with its refusal. A body msgspec
    reads exactly as json does (`_msgspec_reads_as_json`) is decoded by msgspec, several times
    cheaper; what msgspec refuses (NaN, a number out of float range, a lone surrogate, ...)
    goes to json all the same, which decides and words the refusal."""
    if len(body) > MAX_REVIEW_BYTES:
        raise _Invalid(TOO_LARGE)
    if isinstance(body, bytes) and _msgspec_reads_as_json(body):
        try:
            return _untyped_decoder.decode(body)
        except (msgspec.DecodeError, RecursionError):
            pass
    try:
        return json.loads(bytes(body) if isinstance(body, memoryview) else body)
    except (ValueError, RecursionError) as error:  # also bad UTF-8 and over-long integers
        raise _Invalid(f"body is not JSON ({type(error).__name__})") from None


def _delete_options(obj: Mapping[str, Any] | None) -> tuple[str | None, bool]:
    """(deleteOptions.preconditions.uid, whether deleteOptions.dryRun is non-empty)."""
    if obj is None:
        return None, False
    options = _mapping(obj, "deleteOptions", "request.object.deleteOptions")
    if options is None:
        return None, False
    preconditions = _mapping(options, "preconditions", "request.object.deleteOptions.preconditions")
    uid: str | None = None
    if preconditions is not None and preconditions.get("uid") is not None:
        uid = _string(
            preconditions,
            "uid",
            "request.object.deleteOptions.preconditions.uid",
            limit=MAX_UID_CHARS,
        )
    dry_run = options.get("dryRun")
    if dry_run is None:
        return uid, False
    if not isinstance(dry_run, list) or not all(isinstance(item, str) for item in dry_run):
        raise _Invalid("request.object.deleteOptions.dryRun must be a list of strings")
    return uid, len(dry_run) > 0


def _eviction_request(request: Mapping[str, Any], uid: str) -> EvictionRequest:
    operation = _string(request, "operation", "request.operation", required=True, limit=64)
    resource = _mapping(request, "resource", "request.resource")
    if resource is None:
        raise _Invalid("request.resource is missing")
    group = _string(resource, "group", "request.resource.group", limit=MAX_NAME_CHARS)
    version = _string(resource, "version", "request.resource.version", limit=64)
    resource_name = _string(
        resource, "resource", "request.resource.resource", required=True, limit=MAX_NAME_CHARS
    )
    sub_resource = _string(request, "subResource", "request.subResource", limit=64)
    kind = _mapping(request, "kind", "request.kind") or {}
    kind_group = _string(kind, "group", "request.kind.group", limit=MAX_NAME_CHARS)
    kind_name = _string(kind, "kind", "request.kind.kind", limit=MAX_NAME_CHARS)
    dry_run = _field(request, "dryRun", "request.dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise _Invalid(f"request.dryRun must be a boolean, not {_type_name(dry_run)}")
    user_info = _mapping(request, "userInfo", "request.userInfo")
    username = "" if user_info is None else user_info.get("username")
    if username is not None and not isinstance(username, str):
        raise _Invalid(f"request.userInfo.username must be a string, not {_type_name(username)}")

    is_eviction = (operation, group, resource_name, sub_resource, kind_group, kind_name) == (
        "CREATE",
        "",
        "pods",
        "eviction",
        "policy",
        "Eviction",
    )
    namespace = _string(
        request, "namespace", "request.namespace", required=is_eviction, limit=MAX_NAMESPACE_CHARS
    )
    name = _string(request, "name", "request.name", required=is_eviction, limit=MAX_NAME_CHARS)
    precondition_uid, options_dry_run = None, False
    if is_eviction:  # the object of any other request is not an Eviction: leave it alone
        precondition_uid, options_dry_run = _delete_options(
            _mapping(request, "object", "request.object")
        )
    return EvictionRequest(
        uid=uid,
        operation=operation,
        group=group,
        version=version,
        resource=resource_name,
        sub_resource=sub_resource,
        namespace=namespace,
        name=name,
        dry_run=bool(dry_run),
        username=(username or "")[:MAX_USERNAME_CHARS],
        precondition_uid=precondition_uid,
        options_dry_run=options_dry_run,
        kind_group=kind_group,
        kind=kind_name,
    )


def parse_review(body: bytes | bytearray | memoryview | str | object) -> ParsedReview:
    """An AdmissionReview request body (raw bytes/str, or already-parsed JSON). Never raises."""
    if isinstance(body, bytes):
        usual = _usual_eviction(body)
        if usual is not None:
            return usual
    return _parse_validating(body)


def _parse_validating(body: bytes | bytearray | memoryview | str | object) -> ParsedReview:
    """The validating path: every body, every refusal worded."""
    uid = ""
    try:
        document = _decode(body) if isinstance(body, bytes | bytearray | memoryview | str) else body
        if not isinstance(document, Mapping):
            raise _Invalid(f"body must be a JSON object, not {_type_name(document)}")
        request = document.get("request")
        uid = _usable_uid(request)
        api_version, kind = document.get("apiVersion"), document.get("kind")
        if api_version != ADMISSION_API_VERSION or kind != ADMISSION_KIND:
            raise _Invalid(f"expected {ADMISSION_API_VERSION} {ADMISSION_KIND}")
        if not isinstance(request, Mapping):
            raise _Invalid(f"request must be an object, not {_type_name(request)}")
        if uid == "":
            raise _Invalid(f"request.uid must be a non-empty string of at most {MAX_UID_CHARS}")
        return _eviction_request(request, uid)
    except _Invalid as invalid:
        return MalformedReview(uid=uid, problem=str(invalid))


# --- the fast path: the usual eviction review ---------------------------------------------------

# Python's json refuses what nests deeper than its recursion limit allows (some 990 levels
# from a shallow stack; msgspec, skipping an unread field, a few more) and integers of over
# 4,300 digits; msgspec skips unread fields without the latter check and does not validate
# UTF-8, hence ASCII only, and bodies too short to hold such an integer. A body shorter than
# _COUNT_BRACKETS_FROM nests at most half as deep as it is long (800 levels), which json parses
# from any stack under 190 frames; a longer one must hold few brackets. A real eviction review
# is about 1.5 KiB.
_MAX_FAST_BYTES = 4096
_COUNT_BRACKETS_FROM = 1600
_MAX_FAST_BRACKETS = 64

# The usual review, as types: a value outside them (another kind, operation or resource, a
# name too long, a wrong type) fails the decode in msgspec, and the body goes to the
# validating path. Strings that must be one value are Literals, so none is built.
_Uid = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_UID_CHARS)]
_Short = Annotated[str, msgspec.Meta(max_length=64)]


class _GroupVersionKind(msgspec.Struct, gc=False):
    group: Literal["policy"]
    version: Literal["v1"]
    kind: Literal["Eviction"]


class _GroupVersionResource(msgspec.Struct, gc=False):
    resource: Literal["pods"]
    group: Literal[""] = ""
    version: _Short = ""


class _UserInfo(msgspec.Struct, gc=False):
    username: str | None = None


class _Preconditions(msgspec.Struct, gc=False):
    uid: Annotated[str, msgspec.Meta(max_length=MAX_UID_CHARS)] | None = None


class _DeleteOptions(msgspec.Struct, gc=False):
    preconditions: _Preconditions | None = None
    dry_run: list[str] | None = msgspec.field(name="dryRun", default=None)


class _Eviction(msgspec.Struct, gc=False):
    delete_options: _DeleteOptions | None = msgspec.field(name="deleteOptions", default=None)


class _Request(msgspec.Struct, gc=False):
    uid: _Uid
    kind: _GroupVersionKind
    resource: _GroupVersionResource
    operation: Literal["CREATE"]
    sub_resource: Literal["eviction"] = msgspec.field(name="subResource")
    namespace: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAMESPACE_CHARS)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME_CHARS)]
    dry_run: bool | None = msgspec.field(name="dryRun", default=None)
    user_info: _UserInfo | None = msgspec.field(name="userInfo", default=None)
    object: _Eviction | None = None


class _Review(msgspec.Struct, gc=False):
    api_version: Literal["admission.k8s.io/v1"] = msgspec.field(name="apiVersion")
    kind: Literal["AdmissionReview"]
    request: _Request


_decoder = msgspec.json.Decoder(_Review)
_untyped_decoder = msgspec.json.Decoder()  # the validating path's, see `_decode`


def _msgspec_reads_as_json(body: bytes) -> bool:
    """Whether msgspec's decode of `body`, when it succeeds, is what `json.loads` gives (see
    above: ASCII, short, not nesting deep; tests/unit/controller/test_admission_typed_parse.py
    holds the untyped decode to json's over generated bodies)."""
    if len(body) > _MAX_FAST_BYTES or not body.isascii():
        return False
    return (
        len(body) < _COUNT_BRACKETS_FROM
        or body.count(b"[") + body.count(b"{") <= _MAX_FAST_BRACKETS
    )


def _usual_eviction(body: bytes) -> EvictionRequest | None:
    """The fast path: the usual eviction review, else None (see the module's docstring)."""
    if not _msgspec_reads_as_json(body):
        return None
    try:
        request = _decoder.decode(body).request
    except (msgspec.DecodeError, RecursionError):  # ValidationError: not the usual review
        return None
    precondition_uid: str | None = None
    options_dry_run = False
    options = None if request.object is None else request.object.delete_options
    if options is not None:
        if options.preconditions is not None:
            precondition_uid = options.preconditions.uid
        options_dry_run = bool(options.dry_run)
    username = "" if request.user_info is None else request.user_info.username
    resource = request.resource
    return EvictionRequest(
        uid=request.uid,
        operation="CREATE",
        group="",
        version=resource.version,
        resource="pods",
        sub_resource="eviction",
        namespace=request.namespace,
        name=request.name,
        dry_run=bool(request.dry_run),
        username=(username or "")[:MAX_USERNAME_CHARS],
        precondition_uid=precondition_uid,
        options_dry_run=options_dry_run,
    )


def review_response(uid: str, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview v1 answer for `decision` to the request `uid`."""
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {
            "code": HTTP_TOO_MANY_REQUESTS,
            "reason": "TooManyRequests",
            "message": decision.message,
        }
    elif decision.reason in WARNED_REASONS:
        response["warnings"] = [decision.message]
    return {"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "response": response}


# review_response's bytes, around the three strings an answer carries: the uid and, for a
# denial or a warning, the message (tests/unit/controller/test_admission_typed_parse.py holds
# them to the dict's encoding, byte for byte).
_RESPONSE_HEAD = (
    b'{"apiVersion":' + _encoder.encode(ADMISSION_API_VERSION) + b',"kind":'
    + _encoder.encode(ADMISSION_KIND) + b',"response":{"uid":'
)  # fmt: skip
_ALLOWED_TAIL = b',"allowed":true}}'
_WARNING_HEAD, _WARNING_TAIL = b',"allowed":true,"warnings":[', b"]}}"
_DENIED_HEAD = (
    b',"allowed":false,"status":{"code":' + _encoder.encode(HTTP_TOO_MANY_REQUESTS)
    + b',"reason":"TooManyRequests","message":'
)  # fmt: skip
_DENIED_TAIL = b"}}}"


def encode_review_response(uid: str, decision: Decision) -> bytes:
    """`review_response` as the HTTP body (Content-Type: application/json, status 200), written
    from its fixed parts: only the uid and the message are encoded per answer."""
    try:
        head = _RESPONSE_HEAD + _encoder.encode(uid)
        if not decision.allowed:
            message = _encoder.encode(decision.message)
            return b"".join((head, _DENIED_HEAD, message, _DENIED_TAIL))
        if decision.reason in WARNED_REASONS:
            message = _encoder.encode(decision.message)
            return b"".join((head, _WARNING_HEAD, message, _WARNING_TAIL))
        return head + _ALLOWED_TAIL
    except UnicodeEncodeError:  # a lone surrogate (from an escaped name, say): escape it
        return json.dumps(review_response(uid, decision), separators=(",", ":")).encode()


def answer_malformed(review: MalformedReview) -> bytes:
    return encode_review_response(review.uid, review.decision())
