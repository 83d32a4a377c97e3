"""The versions the tests run with, in one place: the tests that run them import these, and
tests/unit/deploy/test_compatibility.py checks that docs/install.md's matrix says the same."""

from __future__ import annotations

# kubectl releases (beside the `kubectl` dispatcher) run against the real control plane.
KUBECTL_ON_REAL_CONTROL_PLANE = ("1.33",)
# Minor versions kubesim reports in turn to the dispatcher, which runs the kubectl of each.
KUBECTL_MINORS_ON_KUBESIM = tuple(range(27, 34))
