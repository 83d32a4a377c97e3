"""The annotation keys graceful-drain writes and reads: the contract between its parts.

The controller writes restarted-at, completed-at and the evictions ledger on a Deployment
and reads the enabled key; the termination-cause detector reads restarted-at back (its
rollout marker) and writes the cause and action on its Events. Each key is defined here
once, so the detector reads exactly what the controller writes
(tests/e2e/termination/test_rollouts_e2e.py
`test_a_graceful_drain_rollout_is_voluntary`: a stamp written through the controller's
patcher, classified by the detector from that same object).

Why here, at the top of the package, and not in either part: the termination package may
not import the controller (tests/unit/test_import_graph.py), and `kube/` knows nothing of
the domain (these keys carry the project's own prefix). This module imports nothing of the
project, so both sides may depend on it without depending on each other.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

PREFIX: Final = "graceful-drain.stonal.com/"

# Stamped by the webhook on a Deployment whose last Ready pod's eviction it holds: the
# rollout it asked for (RFC 3339 UTC). The detector reads it as its rollout marker.
RESTARTED_AT_ANNOTATION: Final = PREFIX + "restarted-at"
# How long a restarted-at stamp stands for a rollout in progress, unless the controller's
# --rollout-timeout (and the detector's, which must match it) says otherwise.
DEFAULT_ROLLOUT_TIMEOUT: Final = timedelta(minutes=10)
# Set by the reconciler when the rollout restarted-at asked for has completed; both are removed
# once the old pod's grace period has passed (docs/decisions.md, "Reconciler").
COMPLETED_AT_ANNOTATION: Final = PREFIX + "completed-at"
# The ledger (docs/decisions.md, "The ledger"): the pods whose eviction the webhook let go
# while other pods of the Deployment had to stay Ready, as compact JSON, pod name ->
# {"uid": pod uid, "at": RFC 3339 UTC}; written with the Deployment's resourceVersion, so two
# replicas counting on each other's pod cannot both let theirs go.
EVICTIONS_ANNOTATION: Final = PREFIX + "evictions"
# Read on every Deployment: "false" opts out; with --enabled-annotation (opt-in mode) that key
# is read instead and only "true" opts in.
DEFAULT_ENABLED_ANNOTATION: Final = PREFIX + "enabled"
# On the detector's TerminationClassified Events: the verdict, for selection without parsing.
CAUSE_ANNOTATION: Final = PREFIX + "cause"
ACTION_ANNOTATION: Final = PREFIX + "action"
