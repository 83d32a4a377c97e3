"""The msgspec fast paths, private to their modules: parsing (admission._usual_eviction)
answers exactly as the validating path (admission._parse_validating) on any body it accepts
and accepts nothing that path refuses; the validating path's decode (admission._decode) reads
every body as json.loads does; and the AdmissionReview answer encodes to the same JSON as
json.dumps."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from bench.webhook import population
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graceful_drain.controller.decision.reasons import DENYING_REASONS, Decision, Reason
from graceful_drain.controller.decision.request import EvictionRequest
from graceful_drain.controller.serving.admission import (
    _decode,
    _Invalid,
    _parse_validating,
    _usual_eviction,
    encode_review_response,
    parse_review,
    review_response,
)
from tests.unit.controller.objects import review

# Where a mutation may land: every field either parser reads, their parents, and neighbours.
PATHS: tuple[tuple[str, ...], ...] = (
    ("apiVersion",),
    ("kind",),
    ("request",),
    ("request", "uid"),
    ("request", "kind"),
    ("request", "kind", "group"),
    ("request", "kind", "version"),
    ("request", "kind", "kind"),
    ("request", "resource"),
    ("request", "resource", "group"),
    ("request", "resource", "version"),
    ("request", "resource", "resource"),
    ("request", "subResource"),
    ("request", "name"),
    ("request", "namespace"),
    ("request", "operation"),
    ("request", "dryRun"),
    ("request", "userInfo"),
    ("request", "userInfo", "username"),
    ("request", "object"),
    ("request", "object", "deleteOptions"),
    ("request", "object", "deleteOptions", "preconditions"),
    ("request", "object", "deleteOptions", "preconditions", "uid"),
    ("request", "object", "deleteOptions", "dryRun"),
    ("request", "oldObject"),
    ("request", "options"),
)

DELETE = object()

NAME_SAMPLES = ["", "a", "web-5d9-abcde", "Web", "a.b", "a..b", "-a", "a-", "a_b", "é", "a b",
                "x" * 63, "x" * 64, "x" * 253, "x" * 254, "policy", "v1", "Eviction",
                "pods", "eviction", "CREATE", "admission.k8s.io/v1", "AdmissionReview",
                "\ud800"]  # fmt: skip
names = st.sampled_from(NAME_SAMPLES)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    names,
    st.text(max_size=300),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["uid", "x"]), inner)
    ),
    max_leaves=6,
)
mutations = st.lists(
    st.tuples(st.sampled_from(PATHS), st.one_of(st.just(DELETE), values)), max_size=3
)


def mutated(changes: list[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    document = copy.deepcopy(review())
    for path, value in changes:
        parent: Any = document
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        if value is DELETE:
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = value
    return document


def same_answer(body: bytes) -> None:
    """The one entry answers as the validating path alone would."""
    assert parse_review(body) == _parse_validating(body)


def as_strict(
    body: bytes, fast_path: Callable[[bytes], EvictionRequest | None] = _usual_eviction
) -> bool:
    """The fast path's rule: what it accepts, the validating path accepts as the same
    request; so what the validating path refuses, the fast path refuses too (None). True when
    the fast path took the body."""
    fast = fast_path(body)
    assert fast is None or _parse_validating(body) == fast
    return fast is not None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations, st.booleans())
def test_mutated_reviews(changes: list[tuple[tuple[str, ...], Any]], ascii_only: bool) -> None:
    body = json.dumps(mutated(changes), ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    same_answer(body)


def damaged(body: bytes, offset: int, insert: bytes, cut: int) -> bytes:
    """`body` with `cut` bytes at `offset` (taken modulo its length + 1) replaced by `insert`."""
    at = offset % (len(body) + 1)
    return body[:at] + insert + body[at + cut :]


def damaged_review(offset: int, insert: bytes, cut: int) -> bytes:
    return damaged(json.dumps(review()).encode(), offset, insert, cut)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0), st.binary(max_size=8), st.integers(min_value=0, max_value=3))
def test_damaged_bytes(offset: int, insert: bytes, cut: int) -> None:
    same_answer(damaged_review(offset, insert, cut))


EDGE_BODIES = {
    "duplicate request": b'{"request": {"uid": "x"}, ' + json.dumps(review())[1:].encode(),
    "duplicate uid": json.dumps(review()).replace('"uid": ', '"uid": "a", "uid": ', 1).encode(),
    "deep nesting": json.dumps(review(oldObject="@"))
    .replace('"@"', "[" * 3000 + "]" * 3000)
    .encode(),
    "long integer": json.dumps(review(oldObject="@")).replace('"@"', "1" * 5000).encode(),
    "NaN": json.dumps(review(oldObject=float("nan"))).encode(),
    "invalid UTF-8": json.dumps(review(oldObject="@")).replace('"@"', '"\xff"').encode("latin-1"),
    "lone surrogate": json.dumps(review(name="\ud800")).encode(),
    "BOM": b"\xef\xbb\xbf" + json.dumps(review()).encode(),
    "trailing data": json.dumps(review()).encode() + b" x",
    "trailing space": json.dumps(review()).encode() + b" \n",
    "not an eviction": json.dumps(review(operation="DELETE", subResource="")).encode(),
    "empty": b"",
    "null": b"null",
}


@pytest.mark.parametrize("name", sorted(EDGE_BODIES))
def test_edge_bodies(name: str) -> None:
    same_answer(EDGE_BODIES[name])


def test_nesting_under_4_kib_at_every_depth_json_may_refuse() -> None:
    """Where json's recursion limit refuses a body and msgspec, skipping an unread field,
    goes a few levels further (both count the caller's stack too), the fast path refuses it
    as well: it counts a long body's brackets."""
    for depth in range(900, 1001):
        body = json.dumps(review(oldObject="@")).replace('"@"', "[" * depth + "]" * depth)
        as_strict(body.encode())


def test_the_usual_review_takes_the_fast_path() -> None:
    """Else the differential tests above would compare the validating path with itself."""
    spec = population.PopulationSpec(deployments=40, pods=200, namespaces=4, samples_per_reason=2)
    prepared = population.prepared_requests(spec, population.plan(spec))
    unusual = (Reason.NOT_EVICTION, Reason.MALFORMED_REVIEW)
    evictions = [p.body for p in prepared if p.case.reason not in unusual]
    assert evictions
    for body in [json.dumps(review()).encode(), *evictions]:
        assert _usual_eviction(body) is not None
        same_answer(body)


reviews = st.one_of(
    st.builds(lambda changes: json.dumps(mutated(changes)).encode(), mutations),
    st.builds(damaged_review, st.integers(min_value=0), st.binary(max_size=8),
              st.integers(min_value=0, max_value=3)),
    st.sampled_from(sorted(EDGE_BODIES.values())),
)  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reviews)
def test_the_fast_path_is_at_least_as_strict_as_the_validating_one(body: bytes) -> None:
    as_strict(body)


def test_the_strictness_property_can_fail() -> None:
    """Control: a fast path that accepted a review the validating path refuses (here one of
    admission.k8s.io/v1beta1) is caught."""
    usual = _usual_eviction(json.dumps(review()).encode())
    assert usual is not None
    document = review()
    document["apiVersion"] = "admission.k8s.io/v1beta1"
    with pytest.raises(AssertionError):
        as_strict(json.dumps(document).encode(), fast_path=lambda _: usual)


def verdict(body: bytes, decode: Callable[[bytes], object]) -> str:
    """What a decode makes of `body`: the value's repr (which tells 1 from 1.0 and True, and
    0.0 from -0.0), or the refusal's words."""
    try:
        return repr(decode(body))
    except _Invalid as invalid:
        return f"refused: {invalid}"


def json_verdict(body: bytes) -> str:
    """As `_decode` words json's refusal."""
    try:
        return repr(json.loads(body))
    except (ValueError, RecursionError) as error:
        return f"refused: body is not JSON ({type(error).__name__})"


def reads_as_json(body: bytes, decode: Callable[[bytes], object] = _decode) -> None:
    assert verdict(body, decode) == json_verdict(body)


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), names, st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(names, st.text(max_size=4)), inner)
    ),
    max_leaves=12,
)
json_texts = st.builds(
    lambda value, ascii_only, indent: json.dumps(
        value, ensure_ascii=ascii_only, indent=indent
    ).encode("utf-8", "surrogatepass"),
    json_values,
    st.booleans(),
    st.sampled_from([None, 0, 1]),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        reviews,
        json_texts,
        st.builds(damaged, json_texts, st.integers(min_value=0), st.binary(max_size=4),
                  st.integers(min_value=0, max_value=2)),
    )
)  # fmt: skip
def test_the_validating_decode_reads_every_body_as_json_does(body: bytes) -> None:
    reads_as_json(body)


@pytest.mark.parametrize("name", sorted(EDGE_BODIES))
def test_the_validating_decode_reads_edge_bodies_as_json_does(name: str) -> None:
    reads_as_json(EDGE_BODIES[name])


def test_the_validating_decode_reads_deep_nesting_as_json_does() -> None:
    """Up to the deepest body msgspec is given (800 levels under 1,600 bytes; deeper ones are
    longer and bracket-counted). Deeper still, json's own refusal depends on how deep its
    caller's stack is, which no two call sites share."""
    for depth in range(700, 801, 5):
        reads_as_json(b"[" * depth + b"]" * depth)


def test_the_decode_property_can_fail() -> None:
    """Control: a decode by msgspec alone (which refuses NaN, json reads it) is caught."""

    def msgspec_alone(body: bytes) -> object:
        try:
            return msgspec.json.decode(body)
        except msgspec.DecodeError as error:
            raise _Invalid(str(error)) from None

    reads_as_json(b"[1.5]", msgspec_alone)
    with pytest.raises(AssertionError):
        reads_as_json(b"[NaN]", msgspec_alone)


def old_encoding(uid: str, decision: Decision) -> bytes:
    return json.dumps(review_response(uid, decision), separators=(",", ":")).encode()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.sampled_from(list(Reason)), st.text(max_size=80))
def test_response_encoding_matches_json(uid: str, reason: Reason, message: str) -> None:
    decision = Decision(reason not in DENYING_REASONS, reason, message)
    new = encode_review_response(uid, decision)
    assert json.loads(new) == json.loads(old_encoding(uid, decision))
    # Byte for byte where json.dumps writes a character as is: it escapes DEL (0x7f), which
    # msgspec (like Go's encoding/json) writes raw; both parse to the same text.
    if all(" " <= c < "\x7f" for c in uid + message):
        assert new == old_encoding(uid, decision)
