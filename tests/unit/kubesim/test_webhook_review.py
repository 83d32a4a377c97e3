"""AdmissionReview bodies and webhook errors, after upstream's request/admissionreview.go
and errors/statuserror.go."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.admission.review import (
    InvalidResponse,
    build_review,
    denial,
    dry_run_unsupported,
    http_error_reason,
    operation_options,
    review_version,
    verify_response,
)
from kubesim.apiserver.admission.rules import (
    AdmissionRequestAttributes,
    GroupVersionKind,
    GroupVersionResource,
    Invocation,
)
from kubesim.apiserver.auth import UserInfo

DEPLOYMENTS = GroupVersionResource("apps", "v1", "deployments")
DEPLOYMENT = GroupVersionKind("apps", "v1", "Deployment")
DENIED = 'admission webhook "w.example.com" denied the request'


@pytest.mark.parametrize(
    ("result", "code", "status", "message", "reason"),
    [
        ({"code": 429, "message": "wait"}, 429, "Failure", f"{DENIED}: wait", None),
        ({"message": "no"}, 400, "Failure", f"{DENIED}: no", None),  # code < 400 -> 400
        ({"code": 200, "status": "Success", "message": "no"}, 400, "Failure", f"{DENIED}: no",
         None),
        ({"code": 403, "reason": "Forbidden"}, 403, "Failure", f"{DENIED}: Forbidden",
         "Forbidden"),
        (None, 400, "Failure", f"{DENIED} without explanation", None),
        ({}, 400, "Failure", f"{DENIED} without explanation", None),
    ],
)  # fmt: skip
def test_denial_is_upstream_to_status_err(
    result: dict[str, Any] | None, code: int, status: str, message: str, reason: str | None
) -> None:
    err = denial("w.example.com", result)
    body = err.status()
    assert (err.code, body["code"], body["status"], body["message"]) == (
        code, code, status, message)  # fmt: skip
    assert body.get("reason") == reason
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"


def test_denial_keeps_the_webhooks_details() -> None:
    details = {"causes": [{"reason": "FieldValueInvalid", "field": "spec"}]}
    assert denial("w", {"code": 422, "details": details}).status()["details"] == details


def test_dry_run_unsupported() -> None:
    err = dry_run_unsupported("w.example.com")
    message = 'admission webhook "w.example.com" does not support dry run'
    assert (err.code, err.reason, err.message) == (400, "BadRequest", message)


UID = "0b7c1ae8-43c5-4f4e-9b1e-2d8a2b7c0f11"


def v1_review(**response: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": UID, **response}}  # fmt: skip


@pytest.mark.parametrize(
    ("review", "error"),
    [
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
         "webhook response was absent"),
        (v1_review(uid="other"), f'expected response.uid="{UID}", got "other"'),
        ({"response": {"uid": UID, "allowed": True}},
         "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /, Kind="),
        ({**v1_review(allowed=True), "apiVersion": "admission.k8s.io/v1beta1"},
         "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
         "admission.k8s.io/v1beta1, Kind=AdmissionReview"),
        (v1_review(allowed=True, patch="W10="),
         "validating webhook may not return response.patch"),
        (v1_review(allowed=True, patchType="JSONPatch"),
         "validating webhook may not return response.patchType"),
        ("not a review", "webhook response was absent"),
    ],
)  # fmt: skip
def test_verify_response_rejects(review: Any, error: str) -> None:
    with pytest.raises(InvalidResponse) as err:
        verify_response(UID, "v1", review)
    assert str(err.value) == error


def test_v1beta1_responses_are_not_checked_for_uid_or_kind() -> None:
    result = verify_response(UID, "v1beta1", {"response": {"allowed": True}})
    assert result.allowed


def test_verify_response_reads_the_verdict() -> None:
    result = verify_response(UID, "v1", v1_review(allowed=False, status={"code": 429},
                                                  warnings=["careful"]))  # fmt: skip
    assert (result.allowed, result.result, result.warnings) == (False, {"code": 429}, ["careful"])


@pytest.mark.parametrize(
    ("versions", "chosen"),
    [(["v1", "v1beta1"], "v1"), (["v2", "v1beta1"], "v1beta1"), (["v1beta1", "v1"], "v1beta1")],
)
def test_review_version_is_the_first_known(versions: list[str], chosen: str) -> None:
    assert review_version({"admissionReviewVersions": versions}) == chosen


def test_review_version_needs_a_known_one() -> None:
    with pytest.raises(InvalidResponse, match="does not accept known AdmissionReview versions"):
        review_version({"admissionReviewVersions": ["v2"]})


@pytest.mark.parametrize(
    ("operation", "options", "dry_run", "expected"),
    [
        ("CREATE", None, False, {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
        ("DELETE", {"gracePeriodSeconds": 0}, True,
         {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "gracePeriodSeconds": 0,
          "dryRun": ["All"]}),
        ("CONNECT", None, False, None),
    ],
)  # fmt: skip
def test_operation_options(
    operation: str, options: dict[str, Any] | None, dry_run: bool, expected: Any
) -> None:
    assert operation_options(operation, options, dry_run) == expected


def test_build_review_update_of_a_status_subresource() -> None:
    old = {"metadata": {"name": "web"}, "status": {}}
    new = {"metadata": {"name": "web"}, "status": {"replicas": 1}}
    attrs = AdmissionRequestAttributes(
        DEPLOYMENTS, "status", DEPLOYMENT, "UPDATE", "shop", "web", new, old
    )
    invocation = Invocation({"name": "w"}, DEPLOYMENTS, "status", DEPLOYMENT)
    user = UserInfo("system:serviceaccount:kube-system:deployment-controller",
                    ("system:serviceaccounts", "system:authenticated"), "uid-1")  # fmt: skip
    review = build_review(uid=UID, version="v1beta1", invocation=invocation, attrs=attrs,
                          user=user, dry_run=False, options=None, versioned_object=new,
                          versioned_old_object=old)  # fmt: skip
    assert review == {
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1",
        "request": {
            "uid": UID, "kind": DEPLOYMENT.to_json(), "resource": DEPLOYMENTS.to_json(),
            "subResource": "status", "requestKind": DEPLOYMENT.to_json(),
            "requestResource": DEPLOYMENTS.to_json(), "requestSubResource": "status",
            "name": "web", "namespace": "shop", "operation": "UPDATE",
            "userInfo": {"username": user.username, "uid": "uid-1", "groups": list(user.groups)},
            "object": new, "oldObject": old, "dryRun": False, "options": None,
        },
    }  # fmt: skip


@pytest.mark.parametrize(
    ("code", "body", "reason"),
    [
        (500, b"boom", 'an error on the server ("boom") has prevented the request from '
                       "succeeding"),
        (503, b"", "the server is currently unable to handle the request"),
        (418, b"", "the server responded with the status code 418 but did not return more "
                   "information"),
        (500, b'{"kind":"Status","message":"webhook broke"}', "webhook broke"),
    ],
)  # fmt: skip
def test_http_error_reason(code: int, body: bytes, reason: str) -> None:
    assert http_error_reason(code, body) == reason
