"""Errors a PATCH request fails with, each carrying the ``metav1.Status`` the API server answers.

``message`` is what the real server puts in ``Status.message``; ``detail`` is the underlying
library error (evanphx/json-patch or strategicpatch text), kept for logs. They differ for 422s:
upstream builds those with ``NewGenericServerResponse(422, ..., isUnexpectedResponse=false)``,
which drops the library text (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go).
"""

from typing import ClassVar

from kubesim.apiserver.gofmt import go_quote
from kubesim.apiserver.patching.jsontypes import Json, JsonObject

GENERIC_422_MESSAGE = "the server rejected our request due to an error in our request"


class PatchError(Exception):
    """A failed PATCH. ``status()`` is the response body, ``code`` its HTTP status."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = ""

    def __init__(
        self, message: str, *, detail: str | None = None, details: JsonObject | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = message if detail is None else detail
        self._details = details

    def __str__(self) -> str:
        if self.detail != self.message:
            return f"{self.message} ({self.detail})"
        return self.message

    def status(self) -> JsonObject:
        """The ``metav1.Status`` body, field for field as the API server encodes it."""
        body: JsonObject = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self._details is not None:
            body["details"] = self._details
        body["code"] = self.code
        return body


class PatchBadRequest(PatchError):
    """400: the patch body cannot be decoded or has a malformed directive (``NewBadRequest``)."""

    code = 400
    reason = "BadRequest"


class PatchInvalid(PatchError):
    """422 Invalid: the patch does not apply to the object (failed ``test``, missing path...)."""

    code = 422
    reason = "Invalid"

    @classmethod
    def generic(cls, detail: str) -> "PatchInvalid":
        """``NewGenericServerResponse(422, ...)``: a fixed message and empty details."""
        return cls(GENERIC_422_MESSAGE, detail=detail, details={})

    @classmethod
    def field_invalid(cls, field: str, value: str, detail: str) -> "PatchInvalid":
        """``NewInvalid(schema.GroupKind{}, "", field.Invalid(path, value, detail))``."""
        body = f"Invalid value: {go_quote(value)}: {detail}"
        cause: Json = {"reason": "FieldValueInvalid", "message": body, "field": field}
        return cls(f' "" is invalid: {field}: {body}', detail=detail, details={"causes": [cause]})


class PatchRequestEntityTooLarge(PatchError):
    """413: more JSON-patch operations than the server accepts."""

    code = 413
    reason = "RequestEntityTooLarge"

    def __init__(self, message: str) -> None:
        super().__init__(f"Request entity too large: {message}", detail=message)


class PatchUnsupportedMediaType(PatchError):
    """415: a Content-Type the server does not accept for this resource."""

    code = 415
    reason = "UnsupportedMediaType"

    def __init__(self, accepted: tuple[str, ...]) -> None:
        self.accepted = accepted
        super().__init__(
            "the body of the request was in an unknown format - "
            f"accepted media types include: {', '.join(accepted)}"
        )


class PatchInternalError(PatchError):
    """500 with an empty reason: a plain Go ``error`` that reached ``ErrorToAPIStatus``.

    Upstream returns most strategic-merge failures this way (missing merge key, unknown
    ``$patch`` value, mismatched ``$setElementOrder``), so clients print them verbatim.
    """

    code = 500
    reason = ""
