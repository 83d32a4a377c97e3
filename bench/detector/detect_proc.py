"""Detections in a fresh process, as the library runs them in a workload on SIGTERM.

Each detection is a new `Detector.detect()` (one client, its TLS handshake included, the four
reads under one deadline, the classification), timed from the call to the verdict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from bench.detector.kubesim_proc import Workload
from bench.procs import run_child
from graceful_drain.termination.detector import Detector, DetectorConfig
from graceful_drain.termination.identity import PodIdentity


@dataclass(frozen=True)
class DetectOptions:
    workload: Workload
    runs: int
    deadline: float  # seconds, DetectorConfig.deadline_seconds
    uvloop: bool = False  # a workload's loop is its own business: plain asyncio


@dataclass(frozen=True)
class Detection:
    seconds: float
    budget: float  # what the detector allowed itself (the deadline, capped by the grace)
    cause: str
    action: str


def identity(workload: Workload) -> PodIdentity:
    return PodIdentity(
        name=workload.pod,
        namespace=workload.namespace,
        uid=workload.uid,
        node_name=workload.node,
        name_source="env:POD_NAME",
        namespace_source="env:POD_NAMESPACE",
    )


async def _detect(connection: Connection, options: DetectOptions) -> None:
    config = DetectorConfig(
        deadline_seconds=options.deadline, kubeconfig=Path(options.workload.kubeconfig)
    )
    detections = []
    for _ in range(options.runs):
        detector = Detector(identity(options.workload), config)
        started = time.monotonic()
        verdict = await detector.detect(started_at=started)
        seconds = time.monotonic() - started
        detections.append(
            Detection(seconds, detector.budget_seconds(), verdict.cause.value,
                      verdict.action.value)
        )  # fmt: skip
    connection.send(detections)


def detect_main(connection: Connection, options: DetectOptions) -> None:
    """Process entry point (spawned)."""
    run_child(connection, _detect(connection, options), uvloop=options.uvloop)
