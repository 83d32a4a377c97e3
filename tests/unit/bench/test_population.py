"""The webhook benchmark's cluster and request mix: exact totals, every row, the right answers."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from bench.webhook import population
from bench.webhook.population import PopulationSpec, Shape, Variant
from bench.webhook.servers import InstantPatcher, decision_config, filled_cache, verify_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from graceful_drain.controller.decision.decide import EvictionRequest
from graceful_drain.controller.serving.admission import parse_review
from graceful_drain.controller.serving.webhook import EvictionWebhook

SMALL = PopulationSpec(
    deployments=40, pods=200, namespaces=4, samples_per_row=3, bare_pod_share=0.02
)
CACHE_ROWS = [1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]


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
    # A surge rollout's old pod and its Ready replacement: row 13 finds the replacement cached.
    assert all(plan.pods == (2 if plan.variant is Variant.SURGE_READY else 1) for plan in single)


def test_the_full_size_plan_is_the_issues_cluster() -> None:
    layout = population.plan(PopulationSpec())
    assert (len(layout.deployments), layout.pod_count) == (10_000, 50_000)


def test_a_spec_without_room_for_every_row_is_refused() -> None:
    with pytest.raises(ValueError, match="too few"):
        population.plan(PopulationSpec(deployments=8, pods=100))


def test_raw_objects_match_the_plan() -> None:
    layout = population.plan(SMALL)
    pods = list(population.raw_pods(layout, SMALL))
    assert len(pods) == SMALL.pods
    assert len({(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}) == SMALL.pods
    assert len(list(population.raw_replicasets(layout))) == SMALL.deployments


def test_the_mix_covers_every_row_the_cache_answers_evenly() -> None:
    cases = population.request_mix(SMALL, population.plan(SMALL))
    per_row = Counter(case.row for case in cases)
    assert sorted(per_row) == CACHE_ROWS
    assert all(count == SMALL.samples_per_row for row, count in per_row.items() if row != 17)
    assert len({case.uid for case in cases}) == len(cases)
    assert {case.row for case in cases if not case.allowed} == {15, 16}


@pytest.mark.parametrize("shape", [Shape.PLAIN, Shape.DRY_RUN, Shape.UID_MISMATCH])
def test_reviews_parse_as_the_api_server_sends_them(shape: Shape) -> None:
    case = population.RequestCase(16, "team-000", "app-00000-7f9c8d6b5-00000", shape, "u-1")
    parsed = parse_review(population.admission_review(case))
    assert isinstance(parsed, EvictionRequest)
    assert (parsed.uid, parsed.namespace, parsed.name) == ("u-1", case.namespace, case.pod)
    assert parsed.is_pod_eviction_create
    assert parsed.is_dry_run is (shape is Shape.DRY_RUN)
    assert (parsed.precondition_uid is not None) is (shape is Shape.UID_MISMATCH)


def test_a_not_eviction_review_is_a_delete() -> None:
    case = population.RequestCase(2, "team-000", "p", Shape.NOT_EVICTION, "u-2")
    document = json.loads(population.admission_review(case))
    assert document["request"]["operation"] == "DELETE"
    assert document["request"]["subResource"] == ""


async def test_the_webhook_decides_every_request_on_its_expected_row() -> None:
    layout = population.plan(SMALL)
    prepared = population.prepared_requests(SMALL, layout)
    config = decision_config()
    cache = await filled_cache(SMALL, config)
    try:
        assert len(cache.pods) == SMALL.pods
        assert len(cache.deployments) == SMALL.deployments
        webhook = EvictionWebhook(cache, InstantPatcher(), config=config)
        assert await verify_rows(webhook, prepared) == []
    finally:
        await cache.stop()


async def test_verify_rows_reports_a_request_decided_elsewhere() -> None:
    layout = population.plan(SMALL)
    [prepared] = population.prepared_requests(SMALL, layout)[:1]
    wrong = population.PreparedRequest(
        population.RequestCase(16, prepared.case.namespace, prepared.case.pod,
                               prepared.case.shape, prepared.case.uid),
        prepared.body,
    )  # fmt: skip
    config = decision_config()
    cache = await filled_cache(SMALL, config)
    try:
        webhook = EvictionWebhook(cache, InstantPatcher(), config=config)
        [mismatch] = await verify_rows(webhook, [wrong])
    finally:
        await cache.stop()
    assert "row 1 (dry-run), expected 16" in mismatch
