"""How long a simulated pod's containers run and how they exit, read off its annotations:
`run-for` and `exit-code`, a Job's pod finishing after a short run without them, malformed
values falling back to the defaults."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.cluster.behaviour import EXIT_CODE, JOB_POD_RUN_FOR, RUN_FOR, PodBehaviour

JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
RS_OWNER = {**JOB_OWNER, "apiVersion": "apps/v1", "kind": "ReplicaSet"}


def pod(annotations: dict[str, str], owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "annotations": annotations}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("annotations", "owner", "run_for", "exit_code"),
    [
        ({}, None, None, 0),
        ({}, RS_OWNER, None, 0),
        ({}, JOB_OWNER, JOB_POD_RUN_FOR, 0),
        ({}, {**JOB_OWNER, "controller": False}, None, 0),
        ({RUN_FOR: "1h"}, JOB_OWNER, 3600.0, 0),
        ({RUN_FOR: "250ms", EXIT_CODE: "3"}, None, 0.25, 3),
        ({RUN_FOR: "soon"}, JOB_OWNER, JOB_POD_RUN_FOR, 0),
        ({RUN_FOR: "2s", EXIT_CODE: "x"}, None, 2.0, 0),
        ({RUN_FOR: "2s", EXIT_CODE: "300"}, None, 2.0, 0),
        ({EXIT_CODE: "1"}, None, None, 1),
    ],
)
def test_run_for_and_exit_code(
    annotations: dict[str, str], owner: dict[str, Any] | None, run_for: float | None,
    exit_code: int,
) -> None:  # fmt: skip
    behaviour = PodBehaviour.from_pod(pod(annotations, owner))
    assert (behaviour.run_for, behaviour.exit_code) == (run_for, exit_code)
