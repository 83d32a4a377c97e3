"""Exit codes for the future CLI."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graceful_drain.termination.actions import EXIT_CODES, Outcome, exit_code_of, outcome_of
from graceful_drain.termination.evidence import Trigger
from graceful_drain.termination.verdict import Action, Cause, EvidenceItem, Fact, Source, Verdict

ITEM = EvidenceItem(Source.CLASSIFIER, Fact.CONSERVATIVE_FALLBACK, "x", True)


def verdict(cause: Cause, action: Action) -> Verdict:
    trigger = Trigger.AFTER_RESTART if action is Action.REPORT_ONLY else Trigger.SIGTERM
    return Verdict(
        cause, action, None, Source.CLASSIFIER, trigger, datetime(2026, 1, 1, tzinfo=UTC), (ITEM,)
    )


@pytest.mark.parametrize(
    ("cause", "action", "outcome", "code"),
    [
        (Cause.VOLUNTARY, Action.DRAIN_GRACEFULLY, Outcome.DRAIN_GRACEFULLY, 0),
        (Cause.INVOLUNTARY_EVICTION, Action.SHED_LOAD_AND_EXIT_FAST, Outcome.SHED_LOAD, 10),
        (Cause.PREEMPTED, Action.SHED_LOAD_AND_EXIT_FAST, Outcome.SHED_LOAD, 10),
        (Cause.INDETERMINATE, Action.SHED_LOAD_AND_EXIT_FAST, Outcome.INDETERMINATE, 11),
        (Cause.OOM_KILLED, Action.REPORT_ONLY, Outcome.REPORT_ONLY, 0),
        (Cause.INDETERMINATE, Action.REPORT_ONLY, Outcome.REPORT_ONLY, 0),
    ],
)
def test_exit_code_of_verdict(cause: Cause, action: Action, outcome: Outcome, code: int) -> None:
    assert outcome_of(verdict(cause, action)) is outcome
    assert exit_code_of(verdict(cause, action)) == code


def test_every_outcome_has_a_code() -> None:
    assert set(EXIT_CODES) == set(Outcome)


def test_only_drain_and_report_exit_zero() -> None:
    zero = {outcome for outcome, code in EXIT_CODES.items() if code == 0}
    assert zero == {Outcome.DRAIN_GRACEFULLY, Outcome.REPORT_ONLY}


def test_usage_error_is_2_and_shedding_codes_are_distinct() -> None:
    assert EXIT_CODES[Outcome.USAGE_ERROR] == 2
    codes = [EXIT_CODES[o] for o in (Outcome.SHED_LOAD, Outcome.INDETERMINATE, Outcome.USAGE_ERROR)]
    assert len(set(codes)) == len(codes)
    assert 1 not in EXIT_CODES.values()  # Python's uncaught-exception status stays unambiguous
