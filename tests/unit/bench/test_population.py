"""The webhook benchmark's cluster and request mix: exact totals, every reason, the right
answers."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from bench.webhook import population
from bench.webhook.population import PopulationSpec, Shape, Variant
from bench.webhook.servers import InstantPatcher, decision_config, filled_cache, verify_reasons
from hypothesis import given, settings
from hypothesis import strategies as st

from graceful_drain.controller.decision.reasons import Reason
from graceful_drain.controller.decision.request import EvictionRequest
from graceful_drain.controller.serving.admission import parse_review
from graceful_drain.controller.serving.webhook import EvictionWebhook

SMALL = PopulationSpec(
    deployments=40, pods=200, namespaces=4, samples_per_reason=3, bare_pod_share=0.02
)
# What the cache answers: not pod-gone and cache-cold (a live GET, the API server's cost).
CACHE_REASONS = {
    Reason.DRY_RUN, Reason.NOT_EVICTION, Reason.POD_TERMINATING, Reason.UID_MISMATCH,
    Reason.NO_DEPLOYMENT, Reason.DEPLOYMENT_DELETING, Reason.NOT_ENABLED,
    Reason.REPLICAS_NOT_ONE, Reason.CANNOT_SURGE, Reason.POD_NOT_READY, Reason.SURGE_READY,
    Reason.ROLLOUT_TIMEOUT, Reason.ROLLOUT_IN_PROGRESS, Reason.ROLLOUT_REQUESTED,
    Reason.MALFORMED_REVIEW,
}  # fmt: skip


@given(
    deployments=st.integers(min_value=10, max_value=400),
    extra_pods=st.integers(min_value=0, max_value=2000),
    namespaces=st.integers(min_value=1, max_value=30),
)
@settings(max_examples=50, deadline=None)
def test_plan_adds_up_exactly(deployments: int, extra_pods: int, namespaces: int) -> None:
    spec = PopulationSpec(deployments=deployments, pods=2 * deployments + extra_pods,
                          namespaces=namespaces)  # fmt: skip
    layout = population.plan(spec)
    assert len(layout.deployments) == spec.deployments
    assert layout.pod_count == spec.pods
    assert {plan.variant for plan in layout.deployments} == set(Variant)
    assert all(plan.replicas != 1 for plan in layout.deployments if plan.variant is Variant.MULTI)
    single = [plan for plan in layout.deployments if plan.variant is not Variant.MULTI]
    assert all(plan.replicas == 1 for plan in single)
    # A surge rollout's old pod and its Ready replacement: surge-ready finds it cached.
    assert all(plan.pods == (2 if plan.variant is Variant.SURGE_READY else 1) for plan in single)


def test_the_full_size_plan_is_the_issues_cluster() -> None:
    layout = population.plan(PopulationSpec())
    assert (len(layout.deployments), layout.pod_count) == (10_000, 50_000)


def test_a_spec_without_room_for_every_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="too few"):
        population.plan(PopulationSpec(deployments=8, pods=100))


def test_raw_objects_match_the_plan() -> None:
    layout = population.plan(SMALL)
    pods = list(population.raw_pods(layout, SMALL))
    assert len(pods) == SMALL.pods
    assert len({(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}) == SMALL.pods
    assert len(list(population.raw_replicasets(layout))) == SMALL.deployments


def test_the_mix_covers_the_reasons_the_cache_answers_evenly() -> None:
    cases = population.request_mix(SMALL, population.plan(SMALL))
    per_reason = Counter(case.reason for case in cases)
    assert set(per_reason) == CACHE_REASONS
    assert all(count == SMALL.samples_per_reason for reason, count in per_reason.items()
               if reason is not Reason.MALFORMED_REVIEW)  # fmt: skip
    assert len({case.uid for case in cases}) == len(cases)
    assert {case.reason for case in cases if not case.allowed} == {
        Reason.ROLLOUT_IN_PROGRESS,
        Reason.ROLLOUT_REQUESTED,
    }


@pytest.mark.parametrize("shape", [Shape.PLAIN, Shape.DRY_RUN, Shape.UID_MISMATCH])
def test_reviews_parse_as_the_api_server_sends_them(shape: Shape) -> None:
    case = population.RequestCase(
        Reason.ROLLOUT_REQUESTED, "team-000", "app-00000-7f9c8d6b5-00000", shape, "u-1"
    )
    parsed = parse_review(population.admission_review(case))
    assert isinstance(parsed, EvictionRequest)
    assert (parsed.uid, parsed.namespace, parsed.name) == ("u-1", case.namespace, case.pod)
    assert parsed.is_pod_eviction_create
    assert parsed.is_dry_run is (shape is Shape.DRY_RUN)
    assert (parsed.precondition_uid is not None) is (shape is Shape.UID_MISMATCH)


def test_a_not_eviction_review_is_a_delete() -> None:
    case = population.RequestCase(Reason.NOT_EVICTION, "team-000", "p", Shape.NOT_EVICTION, "u-2")
    document = json.loads(population.admission_review(case))
    assert document["request"]["operation"] == "DELETE"
    assert document["request"]["subResource"] == ""


async def test_the_webhook_decides_every_request_on_its_expected_reason() -> None:
    layout = population.plan(SMALL)
    prepared = population.prepared_requests(SMALL, layout)
    config = decision_config()
    cache = await filled_cache(SMALL, config)
    try:
        assert len(cache.pods) == SMALL.pods
        assert len(cache.deployments) == SMALL.deployments
        webhook = EvictionWebhook(cache, InstantPatcher(), config=config)
        assert await verify_reasons(webhook, prepared) == []
    finally:
        await cache.stop()


async def test_verify_reasons_reports_a_request_decided_elsewhere() -> None:
    layout = population.plan(SMALL)
    [prepared] = population.prepared_requests(SMALL, layout)[:1]
    wrong = population.PreparedRequest(
        population.RequestCase(Reason.ROLLOUT_REQUESTED, prepared.case.namespace, prepared.case.pod,
                               prepared.case.shape, prepared.case.uid),
        prepared.body,
    )  # fmt: skip
    config = decision_config()
    cache = await filled_cache(SMALL, config)
    try:
        webhook = EvictionWebhook(cache, InstantPatcher(), config=config)
        [mismatch] = await verify_reasons(webhook, [wrong])
    finally:
        await cache.stop()
    assert "dry-run, expected rollout-requested" in mismatch
