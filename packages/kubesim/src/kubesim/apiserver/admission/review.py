"""AdmissionReview requests and responses, and the errors a webhook call turns into.

Field for field after staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/
request/admissionreview.go (CreateV1AdmissionReview, VerifyAdmissionResponse),
errors/statuserror.go (ToStatusErr, NewDryRunUnsupportedErr) and the validating
dispatcher's error wrapping. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesim import jsoncodec
from kubesim.apiserver.admission.rules import AdmissionRequestAttributes, Invocation
from kubesim.apiserver.auth import UserInfo
from kubesim.apiserver.errors import ApiError
from kubesim.types import Obj

KNOWN_REVIEW_VERSIONS = ("v1", "v1beta1")
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


class InvalidResponse(Exception):
    """VerifyAdmissionResponse failed: the webhook answered, but not with a usable review."""


class StatusError(ApiError):
    """An ApiError whose Status body is kept verbatim (a webhook's own denial)."""

    def __init__(self, body: Obj) -> None:
        details = body.get("details")
        super().__init__(int(body["code"]), str(body.get("message", "")),
                         str(body.get("reason", "")),
                         details if isinstance(details, dict) else None)  # fmt: skip
        self._body = body

    def status(self) -> dict[str, Any]:
        return jsoncodec.copy(self._body)


@dataclass(frozen=True, slots=True)
class WebhookResult:
    allowed: bool
    result: Obj | None
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)


def go_quote(text: str) -> str:
    """Go's %q for the strings we quote (names, uids): JSON escaping is close enough."""
    return json.dumps(text, ensure_ascii=False)


def review_version(webhook: Mapping[str, Any]) -> str:
    """CreateAdmissionObjects: the first admissionReviewVersions entry kubesim can send."""
    for version in webhook.get("admissionReviewVersions") or ():
        if version in KNOWN_REVIEW_VERSIONS:
            return str(version)
    raise InvalidResponse("webhook does not accept known AdmissionReview versions (v1, v1beta1)")


def user_info_json(user: UserInfo) -> Obj:
    # authenticationv1.UserInfo: every field omitempty.
    out: Obj = {}
    if user.username:
        out["username"] = user.username
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out


def operation_options(operation: str, options: Obj | None, dry_run: bool) -> Obj | None:
    """The options object as the handlers hand it to admission (TypeMeta set, dryRun kept)."""
    if options is None:
        kind = _OPTIONS_KIND.get(operation)
        if kind is None:
            return None
        options = {}
    out = jsoncodec.copy(options)
    kind = out.get("kind") or _OPTIONS_KIND.get(operation)
    typed: Obj = {"kind": kind, "apiVersion": out.get("apiVersion") or "meta.k8s.io/v1"}
    typed.update({k: v for k, v in out.items() if k not in ("kind", "apiVersion")})
    if dry_run and not typed.get("dryRun"):
        typed["dryRun"] = ["All"]
    return typed


def build_review(
    *,
    uid: str,
    version: str,
    invocation: Invocation,
    attrs: AdmissionRequestAttributes,
    user: UserInfo,
    dry_run: bool,
    options: Obj | None,
    versioned_object: Obj | None,
    versioned_old_object: Obj | None,
) -> Obj:
    """CreateV1AdmissionReview (v1beta1 has the same request body)."""
    request: Obj = {
        "uid": uid,
        "kind": invocation.kind.to_json(),
        "resource": invocation.resource.to_json(),
    }
    if invocation.subresource:
        request["subResource"] = invocation.subresource
    request["requestKind"] = attrs.kind.to_json()
    request["requestResource"] = attrs.resource.to_json()
    if attrs.subresource:
        request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    request["operation"] = attrs.operation
    request["userInfo"] = user_info_json(user)
    # runtime.RawExtension of a nil object marshals as null: these keys are always present.
    request["object"] = versioned_object
    request["oldObject"] = versioned_old_object
    request["dryRun"] = dry_run
    request["options"] = options
    return {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}",
            "request": request}  # fmt: skip


def verify_response(uid: str, version: str, review: Any) -> WebhookResult:
    """VerifyAdmissionResponse for a validating webhook."""
    response = review.get("response") if isinstance(review, dict) else None
    if not isinstance(response, dict):
        raise InvalidResponse("webhook response was absent")
    if version == "v1":
        got_uid = str(response.get("uid", ""))
        if got_uid != uid:
            raise InvalidResponse(f"expected response.uid={go_quote(uid)}, got {go_quote(got_uid)}")
        api_version, kind = str(review.get("apiVersion", "")), str(review.get("kind", ""))
        if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview"):
            group, _, ver = api_version.rpartition("/")
            raise InvalidResponse(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, "
                f"got {group}/{ver}, Kind={kind}"
            )
        if response.get("patch"):
            raise InvalidResponse("validating webhook may not return response.patch")
        if response.get("patchType") is not None:
            raise InvalidResponse("validating webhook may not return response.patchType")
    result = response.get("status")
    return WebhookResult(
        allowed=response.get("allowed") is True,
        result=result if isinstance(result, dict) else None,
        warnings=[str(w) for w in response.get("warnings") or []],
        audit_annotations={str(k): str(v)
                           for k, v in (response.get("auditAnnotations") or {}).items()},
    )  # fmt: skip


def denial(webhook_name: str, result: Obj | None) -> StatusError:
    """webhookerrors.ToStatusErr (k8s 1.15+): the webhook's status, made a failure >= 400."""
    denied_by = f"admission webhook {go_quote(webhook_name)} denied the request"
    status = dict(result) if result is not None else {"status": "Failure"}
    code = status.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or code < 400:
        code = 400
    if status.get("status") in (None, "", "Success"):
        status["status"] = "Failure"
    if status.get("message"):
        message = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied_by}: {status['reason']}"
    else:
        message = f"{denied_by} without explanation"
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                 "status": status["status"], "message": message}  # fmt: skip
    if status.get("reason"):
        body["reason"] = status["reason"]
    if isinstance(status.get("details"), dict):
        body["details"] = status["details"]
    body["code"] = code
    return StatusError(body)


def calling_error(webhook_name: str, reason: str) -> str:
    """webhookutil.ErrCallingWebhook.Error()."""
    return f"failed calling webhook {go_quote(webhook_name)}: {reason}"


def internal_error(message: str) -> ApiError:
    """apierrors.NewInternalError: how a failing-closed call reaches the client."""
    return ApiError(500, f"Internal error occurred: {message}", "InternalError",
                    {"causes": [{"message": message}]})  # fmt: skip


def dry_run_unsupported(webhook_name: str) -> ApiError:
    """webhookerrors.NewDryRunUnsupportedErr: always rejects, whatever the failurePolicy."""
    return ApiError(400, f"admission webhook {go_quote(webhook_name)} does not support dry run",
                    "BadRequest")  # fmt: skip


def http_error_reason(code: int, body: bytes) -> str:
    """What client-go's REST client reports for a non-2xx webhook answer."""
    try:
        decoded = json.loads(body) if body else None
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status" and decoded.get("message"):
        return str(decoded["message"])
    messages = {
        400: "the server rejected our request for an unknown reason",
        401: "the server has asked for the client to provide credentials",
        403: "the server does not allow access to the requested resource",
        404: "the server could not find the requested resource",
        405: "the server does not allow this method on the requested resource",
        409: "the server reported a conflict",
        422: "the server rejected our request due to an error in our request",
        429: "the server has received too many requests and has asked us to try again later",
        503: "the server is currently unable to handle the request",
        504: "the server was unable to return a response in the time allotted, but may still be "
        "processing the request",
    }
    if code in messages:
        return messages[code]
    if code >= 500:
        text = body.decode(errors="replace").strip() or "unknown"
        return (
            f"an error on the server ({go_quote(text)}) has prevented the request from succeeding"
        )
    return f"the server responded with the status code {code} but did not return more information"
