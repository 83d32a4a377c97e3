"""AdmissionReview parsing and responses, alone and end to end with decide()."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graceful_drain.controller.decision.lookups import (
    DeploymentFound,
    NoDeployment,
    OwnerLookup,
    OwnerUnresolved,
    PodFound,
    PodGone,
    PodLookup,
    PodUnavailable,
)
from graceful_drain.controller.decision.model import DeploymentInfo, PodInfo
from graceful_drain.controller.decision.reasons import DENYING_REASONS, Decision, Reason
from graceful_drain.controller.decision.request import EvictionRequest
from graceful_drain.controller.decision.table import DecisionConfig, decide
from graceful_drain.controller.serving.admission import (
    MAX_REVIEW_BYTES,
    MalformedReview,
    answer_malformed,
    encode_review_response,
    parse_review,
    review_response,
)

from .objects import NOW, UID, review

PARSED = EvictionRequest(
    uid=UID,
    operation="CREATE",
    group="",
    version="v1",
    resource="pods",
    sub_resource="eviction",
    namespace="default",
    name="web-5d9-abcde",
    dry_run=False,
    username="kubernetes-admin",
    precondition_uid="pod-uid",
    options_dry_run=False,
)


@pytest.mark.parametrize(
    "body",
    [
        review(),
        json.dumps(review()),
        json.dumps(review()).encode(),
        bytearray(json.dumps(review()).encode()),
        memoryview(json.dumps(review()).encode()),
        b"\xef\xbb\xbf" + json.dumps(review()).encode(),  # UTF-8 byte order mark
        json.dumps(review()).encode("utf-16"),
    ],
    ids=["dict", "str", "bytes", "bytearray", "memoryview", "bom", "utf-16"],
)
def test_parse_an_eviction_review(body: object) -> None:
    assert parse_review(body) == PARSED


def test_parse_dry_run_flags_and_optional_parts() -> None:
    body = review(dryRun=True, userInfo=None, object=None)

    assert parse_review(body) == EvictionRequest(
        **{**_fields(PARSED), "dry_run": True, "username": "", "precondition_uid": None}
    )
    options = review()
    options["request"]["object"]["deleteOptions"] = {"dryRun": ["All"]}
    parsed = parse_review(options)
    assert isinstance(parsed, EvictionRequest)
    assert parsed.options_dry_run and parsed.is_dry_run and parsed.precondition_uid is None


def _fields(request: EvictionRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in EvictionRequest.__struct_fields__}


def test_non_eviction_requests_parse_without_name_or_object() -> None:
    body = review(operation="DELETE", subResource=None, name=None, object={"kind": "Pod"})

    parsed = parse_review(body)

    assert isinstance(parsed, EvictionRequest)
    assert not parsed.is_pod_eviction_create
    assert (parsed.sub_resource, parsed.name, parsed.precondition_uid) == ("", "", None)


def test_long_usernames_are_truncated() -> None:
    parsed = parse_review(review(userInfo={"username": "u" * 5000}))

    assert isinstance(parsed, EvictionRequest) and len(parsed.username) == 256


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = review()
    parent: Any = body
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("body", "uid", "problem"),
    [
        (b"", "", "body is not JSON (JSONDecodeError)"),
        (b"{", "", "body is not JSON (JSONDecodeError)"),
        (b"\xff\xfe\xfd", "", "body is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "", "body is not JSON (RecursionError)"),
        (b'{"n": ' + b"9" * 5000 + b"}", "", "body is not JSON (ValueError)"),
        (b"x" * (MAX_REVIEW_BYTES + 1), "", "body is larger than"),
        (b"[]", "", "body must be a JSON object, not list"),
        (None, "", "body must be a JSON object, not null"),
        (42, "", "body must be a JSON object, not int"),
        (_with(("apiVersion",), "admission.k8s.io/v1beta1"), UID, "expected admission.k8s.io/v1"),
        (_with(("kind",), "ConversionReview"), UID, "expected admission.k8s.io/v1"),
        (_with(("request",), None), "", "request must be an object, not null"),
        (_with(("request",), [UID]), "", "request must be an object, not list"),
        (_with(("request", "uid"), None), "", "request.uid must be a non-empty string"),
        (_with(("request", "uid"), 7), "", "request.uid must be a non-empty string"),
        (_with(("request", "uid"), ""), "", "request.uid must be a non-empty string"),
        (_with(("request", "uid"), "u" * 257), "", "request.uid must be a non-empty string"),
        (_with(("request", "operation"), None), UID, "request.operation is missing"),
        (_with(("request", "operation"), ["CREATE"]), UID, "request.operation must be a string"),
        (_with(("request", "resource"), "pods"), UID, "request.resource must be an object"),
        (_with(("request", "resource"), None), UID, "request.resource is missing"),
        (_with(("request", "resource", "group"), 0), UID, "request.resource.group must be"),
        (_with(("request", "subResource"), True), UID, "request.subResource must be a string"),
        (_with(("request", "dryRun"), "true"), UID, "request.dryRun must be a boolean, not str"),
        (_with(("request", "dryRun"), 1), UID, "request.dryRun must be a boolean, not int"),
        (_with(("request", "userInfo"), "admin"), UID, "request.userInfo must be an object"),
        (_with(("request", "userInfo", "username"), 1), UID, "request.userInfo.username must"),
        (_with(("request", "name"), None), UID, "request.name is missing"),
        (_with(("request", "name"), ""), UID, "request.name is empty"),
        (_with(("request", "name"), "p" * 254), UID, "request.name is longer than 253"),
        (_with(("request", "namespace"), "n" * 64), UID, "request.namespace is longer than 63"),
        (_with(("request", "namespace"), {"name": "x"}), UID, "request.namespace must be"),
        (_with(("request", "object"), "Eviction"), UID, "request.object must be an object"),
        (
            _with(("request", "object", "deleteOptions"), []),
            UID,
            "request.object.deleteOptions must be an object",
        ),
        (
            _with(("request", "object", "deleteOptions", "preconditions"), {"uid": 5}),
            UID,
            "request.object.deleteOptions.preconditions.uid must be a string",
        ),
        (
            _with(("request", "object", "deleteOptions", "dryRun"), "All"),
            UID,
            "request.object.deleteOptions.dryRun must be a list of strings",
        ),
        (
            _with(("request", "object", "deleteOptions", "dryRun"), [True]),
            UID,
            "request.object.deleteOptions.dryRun must be a list of strings",
        ),
    ],
)
def test_malformed_reviews(body: object, uid: str, problem: str) -> None:
    parsed = parse_review(body)

    assert isinstance(parsed, MalformedReview)
    assert parsed.uid == uid
    assert parsed.problem.startswith(problem)


# --- responses --------------------------------------------------------------------------------

WAITING = Decision(
    False,
    Reason.ROLLOUT_IN_PROGRESS,
    (
        "graceful-drain: waiting for a replacement of Deployment default/web to become Ready on "
        "another node (rollout requested 42s ago, gives up after 10m0s)"
    ),
)


def test_the_exact_429_response_body() -> None:
    assert encode_review_response(UID, WAITING) == (
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{'
        b'"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":false,"status":{'
        b'"code":429,"reason":"TooManyRequests","message":"graceful-drain: waiting for a '
        b"replacement of Deployment default/web to become Ready on another node (rollout "
        b'requested 42s ago, gives up after 10m0s)"}}}'
    )


def test_an_allowed_response_is_just_uid_and_allowed() -> None:
    allowed = Decision(True, Reason.SURGE_READY, "graceful-drain: up")

    assert review_response(UID, allowed) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": UID, "allowed": True},
    }


@pytest.mark.parametrize(
    "reason",
    [
        Reason.CANNOT_SURGE,
        Reason.ROLLOUT_TIMEOUT,
        Reason.STAMP_FAILED,
        Reason.OWNER_UNRESOLVED,
        Reason.ERROR,
        Reason.MALFORMED_REVIEW,
    ],
)
def test_degraded_allows_carry_a_warning(reason: Reason) -> None:
    decision = Decision(True, reason, "graceful-drain: careful")

    assert review_response(UID, decision)["response"] == {
        "uid": UID,
        "allowed": True,
        "warnings": ["graceful-drain: careful"],
    }


def test_a_malformed_review_is_answered_allowed_with_its_uid_echoed() -> None:
    parsed = parse_review(_with(("request", "dryRun"), "yes"))
    assert isinstance(parsed, MalformedReview)

    body = json.loads(answer_malformed(parsed))

    assert body["response"]["uid"] == UID
    assert body["response"]["allowed"] is True
    assert body["response"]["warnings"] == [
        "graceful-drain: malformed AdmissionReview (request.dryRun must be a boolean, not str); "
        "allowed"
    ]


# --- end to end: parse, decide, respond ---------------------------------------------------------

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
TIMES = st.datetimes(
    min_value=datetime(2024, 4, 30), max_value=datetime(2024, 5, 2), timezones=st.just(UTC)
)

PODS = st.builds(
    PodInfo,
    namespace=st.just("default"),
    name=NAMES,
    uid=st.sampled_from(["pod-uid", "other-uid", ""]),
    node_name=NAMES,
    terminating=st.booleans(),
    phase=st.sampled_from(["Running", "Pending", "Succeeded", "Failed", "Unknown", ""]),
    ready=st.booleans(),
    owner_kind=st.sampled_from([None, "ReplicaSet", "StatefulSet"]),
    owner_replicaset=st.none() | NAMES,
    malformed=st.just(()),
)


@st.composite
def deployments(draw: st.DrawFn) -> DeploymentInfo:
    restarted_at = draw(st.none() | TIMES)
    raw = None if restarted_at is None else restarted_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if restarted_at is None and draw(st.booleans()):
        raw = "not-a-time"
    return DeploymentInfo(
        namespace="default",
        name=draw(NAMES),
        uid=draw(st.text(max_size=8)),
        resource_version=draw(st.sampled_from(["", "1", "42"])),
        generation=draw(st.integers(0, 5)),
        deleting=draw(st.booleans()),
        has_annotations=draw(st.booleans()),
        replicas=draw(st.none() | st.integers(-1, 3)),
        strategy_type=draw(st.sampled_from(["RollingUpdate", "Recreate", ""])),
        max_surge=draw(st.integers(-1, 3)),
        paused=draw(st.booleans()),
        observed_generation=draw(st.integers(0, 5)),
        status_replicas=draw(st.integers(0, 3)),
        updated_replicas=draw(st.integers(0, 3)),
        ready_replicas=draw(st.integers(0, 3)),
        available_replicas=draw(st.integers(0, 3)),
        restarted_at=restarted_at,
        restarted_at_raw=raw,
        template_restarted_at=raw,
        max_unavailable=draw(st.integers(0, 2)),
        enabled_value=draw(st.none() | st.sampled_from(["true", "false", "", "yes"])),
    )


POD_LOOKUPS: st.SearchStrategy[PodLookup] = st.one_of(
    st.builds(PodFound, PODS), st.just(PodGone()), st.builds(PodUnavailable, st.text(max_size=300))
)
OWNER_LOOKUPS: st.SearchStrategy[OwnerLookup] = st.one_of(
    st.builds(DeploymentFound, deployments()),
    st.builds(NoDeployment, st.text(max_size=20)),
    st.builds(OwnerUnresolved, st.text(max_size=300)),
)
CONFIGS = st.builds(
    DecisionConfig,
    rollout_timeout=st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=2)),
    enabled_annotation=st.none() | st.just("graceful-drain.stonal.com/enabled"),
    namespaces=st.none() | st.just(frozenset({"default"})) | st.just(frozenset({"other"})),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=10,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        keys: list[Any] = list(node)
    elif isinstance(node, list):
        keys = list(range(len(node)))
    else:
        return []
    paths = []
    for key in keys:
        paths.append((*prefix, key))
        paths.extend(_paths(node[key], (*prefix, key)))
    return paths


REVIEW_PATHS = _paths(review())


@st.composite
def well_formed_reviews(draw: st.DrawFn) -> dict[str, Any]:
    body = review(
        operation=draw(st.sampled_from(["CREATE", "CREATE", "DELETE", "UPDATE", "CONNECT"])),
        subResource=draw(st.sampled_from(["eviction", "eviction", "", "status"])),
        name=draw(NAMES),
        dryRun=draw(st.none() | st.booleans()),
        uid=draw(st.uuids().map(str)),
    )
    delete_options: dict[str, Any] = {}
    if draw(st.booleans()):
        delete_options["preconditions"] = {"uid": draw(st.sampled_from(["pod-uid", "x", ""]))}
    if draw(st.booleans()):
        delete_options["dryRun"] = draw(st.sampled_from([[], ["All"]]))
    body["request"]["object"]["deleteOptions"] = delete_options
    return body


@st.composite
def broken_reviews(draw: st.DrawFn) -> dict[str, Any]:
    """A valid review with a few fields replaced by arbitrary JSON or deleted."""
    body = copy.deepcopy(draw(well_formed_reviews()))
    for path in draw(st.lists(st.sampled_from(REVIEW_PATHS), min_size=1, max_size=3)):
        parent: Any = body
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            if draw(st.booleans()):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(JSON)
    return body


@st.composite
def request_bodies(draw: st.DrawFn) -> object:
    """Every shape a body may take: parsed or raw, valid, broken, truncated, or noise."""
    kind = draw(st.sampled_from(["valid", "broken", "truncated", "json", "bytes"]))
    if kind == "json":
        return draw(JSON)
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    body: dict[str, Any] = draw(well_formed_reviews() if kind == "valid" else broken_reviews())
    encoded = json.dumps(body).encode()
    if kind == "truncated":
        return encoded[: draw(st.integers(0, len(encoded) - 1))]
    return draw(st.sampled_from([body, encoded, encoded.decode()]))


def _expected_uid(body: object) -> str:
    """The uid a correct answer must echo: the request's, when it is usable at all."""
    try:
        document = json.loads(body) if isinstance(body, bytes | str) else body
    except ValueError:
        return ""
    request = document.get("request") if isinstance(document, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) and 0 < len(uid) <= 256 else ""


def answer(
    body: object, pod: PodLookup, owner: OwnerLookup, config: DecisionConfig
) -> tuple[Decision, bytes]:
    """What the webhook handler does between reading the body and writing the response."""
    parsed = parse_review(body)
    if isinstance(parsed, MalformedReview):
        return parsed.decision(), answer_malformed(parsed)
    decision = decide(parsed, pod, owner, config, NOW)
    return decision, encode_review_response(parsed.uid, decision)


def assert_valid_response(raw: bytes, decision: Decision, uid: str) -> None:
    body = json.loads(raw)
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == uid
    assert response["allowed"] is decision.allowed
    assert set(response) <= {"uid", "allowed", "status", "warnings"}
    if decision.allowed:
        assert "status" not in response
        assert all(isinstance(w, str) and w for w in response.get("warnings", []))
    else:
        assert response["status"] == {
            "code": 429,
            "reason": "TooManyRequests",
            "message": decision.message,
        }
        assert decision.message
    assert (not decision.allowed) == (decision.reason in DENYING_REASONS)
    assert isinstance(decision.reason, Reason)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(request_bodies(), POD_LOOKUPS, OWNER_LOOKUPS, CONFIGS)
def test_every_body_gets_a_valid_admission_review(
    body: object, pod: PodLookup, owner: OwnerLookup, config: DecisionConfig
) -> None:
    decision, raw = answer(body, pod, owner, config)

    assert_valid_response(raw, decision, _expected_uid(body))


@given(well_formed_reviews(), POD_LOOKUPS, OWNER_LOOKUPS, CONFIGS)
def test_well_formed_reviews_are_never_malformed(
    body: dict[str, Any], pod: PodLookup, owner: OwnerLookup, config: DecisionConfig
) -> None:
    decision, raw = answer(json.dumps(body).encode(), pod, owner, config)

    assert decision.reason is not Reason.MALFORMED_REVIEW
    assert_valid_response(raw, decision, body["request"]["uid"])


@given(well_formed_reviews(), st.booleans(), POD_LOOKUPS, OWNER_LOOKUPS, CONFIGS)
def test_dry_run_always_allows_without_a_stamp(
    body: dict[str, Any],
    in_options: bool,
    pod: PodLookup,
    owner: OwnerLookup,
    config: DecisionConfig,
) -> None:
    if in_options:  # only an Eviction carries deleteOptions
        body["request"].update(operation="CREATE", subResource="eviction")
        body["request"]["object"]["deleteOptions"]["dryRun"] = ["All"]
    else:
        body["request"]["dryRun"] = True

    decision, raw = answer(body, pod, owner, config)

    assert decision.allowed and decision.stamp is None
    assert decision.reason is Reason.DRY_RUN
    assert json.loads(raw)["response"]["allowed"] is True


@given(well_formed_reviews(), POD_LOOKUPS, OWNER_LOOKUPS, CONFIGS)
def test_only_rollout_requested_stamps(
    body: dict[str, Any], pod: PodLookup, owner: OwnerLookup, config: DecisionConfig
) -> None:
    decision, _ = answer(body, pod, owner, config)

    assert (decision.stamp is not None) == (decision.reason is Reason.ROLLOUT_REQUESTED)
    if decision.stamp is not None:
        assert isinstance(owner, DeploymentFound)
        assert decision.stamp.deployment is owner.deployment
