"""API errors as the real API server reports them: a `metav1.Status` body.

Messages follow k8s.io/apimachinery/pkg/api/errors/errors.go word for word,
because clients (kubectl, client-go, our own controller) print or match them.
"""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error the API server answers with a Status body and an HTTP code."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASONS.get(code, "")
        self.details = details

    def status(self) -> dict[str, Any]:
        return status_body(self.code, self.message, self.reason, self.details)


def status_body(
    code: int, message: str, reason: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:  # omitempty
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def success_status(details: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _details(group: str, plural: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = plural  # upstream puts the resource here, not the Kind
    return details


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        f'{_qualified(group, plural)} "{name}" not found',
        details=_details(group, plural, name),
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{_qualified(group, plural)} "{name}" already exists',
        "AlreadyExists",
        _details(group, plural, name),
    )


def forbidden(
    group: str, plural: str, name: str, why: str, causes: list[dict[str, str]] | None = None
) -> ApiError:
    """403 as NewForbidden words it: an admission plugin's or a subresource's refusal of an
    operation on an object (RBAC's refusal is rbac.py's `forbidden_status`)."""
    details = _details(group, plural, name)
    if causes:
        details["causes"] = causes
    return ApiError(
        403, f'{_qualified(group, plural)} "{name}" is forbidden: {why}', "Forbidden", details
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_qualified(group, plural)} "{name}": {why}',
        "Conflict",
        _details(group, plural, name),
    )


OBJECT_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


# field.Error's type, as its message starts (apimachinery/pkg/util/validation/field/errors.go).
_CAUSE_REASONS = (
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Forbidden", "FieldValueForbidden"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Not found", "FieldValueNotFound"),
)


def _cause_reason(message: str) -> str:
    return next((r for prefix, r in _CAUSE_REASONS if message.startswith(prefix)),
                "FieldValueInvalid")  # fmt: skip


def invalid(group: str, kind: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid; causes are (field, message) pairs, each message starting as field.Error's
    does ("Invalid value: ...", "Required value: ..."), which gives its reason."""
    qualified_kind = f"{kind}.{group}" if group else kind
    # The message lists each error once (ErrorList.ToAggregate), the causes all of them.
    shown = list(dict.fromkeys(f"{f}: {m}" for f, m in causes))
    joined = ", ".join(shown)
    if len(shown) > 1:
        joined = f"[{joined}]"
    details = _details(group, kind, name)
    if not name:
        del details["name"]  # omitempty
    details["kind"] = kind
    details["causes"] = [{"reason": _cause_reason(m), "message": m, "field": f} for f, m in causes]
    return ApiError(422, f'{qualified_kind} "{name}" is invalid: {joined}', "Invalid", details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def gone(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    # the router's answer for a method a resource does not serve, with empty details, as
    # path_not_found's (the differential suite's "delete: namespace lifecycle")
    return ApiError(405, message, details={})


def path_not_found() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", details={})


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized")
