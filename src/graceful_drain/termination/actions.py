"""Process exit codes for the detector CLI, as data.

The contract for callers (a preStop hook, an entrypoint wrapper): **exit 0 at
SIGTERM means drain gracefully; any other status means do not drain** — shed load
and exit fast.  Status 1 is never returned on purpose (it is Python's status for
an uncaught exception) and must be read like ``indeterminate``.

=====================  ====  ==========================================================
outcome                code  meaning
=====================  ====  ==========================================================
``drain_gracefully``      0  voluntary disruption: finish in-flight work, then exit
``usage_error``           2  bad flags or missing identity (argparse's own status)
``shed_load``            10  cause known and involuntary (eviction, preemption)
``indeterminate``        11  cause unknown: shed load anyway (conservative fallback)
``report_only``           0  after-the-fact report (e.g. an OOM kill): informational,
                             never fails a startup script; the cause is in the JSON
=====================  ====  ==========================================================
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType
from typing import Final

from graceful_drain.termination.verdict import Action, Cause, Verdict


class Outcome(StrEnum):
    DRAIN_GRACEFULLY = "drain_gracefully"
    SHED_LOAD = "shed_load"
    INDETERMINATE = "indeterminate"
    REPORT_ONLY = "report_only"
    USAGE_ERROR = "usage_error"


EXIT_CODES: Final = MappingProxyType(
    {
        Outcome.DRAIN_GRACEFULLY: 0,
        Outcome.USAGE_ERROR: 2,
        Outcome.SHED_LOAD: 10,
        Outcome.INDETERMINATE: 11,
        Outcome.REPORT_ONLY: 0,
    }
)


def outcome_of(verdict: Verdict) -> Outcome:
    if verdict.action is Action.DRAIN_GRACEFULLY:
        return Outcome.DRAIN_GRACEFULLY
    if verdict.action is Action.REPORT_ONLY:
        return Outcome.REPORT_ONLY
    if verdict.cause is Cause.INDETERMINATE:
        return Outcome.INDETERMINATE
    return Outcome.SHED_LOAD


def exit_code_of(verdict: Verdict) -> int:
    return EXIT_CODES[outcome_of(verdict)]
