"""Part 4: the detector's time to verdict with a healthy API, and its deadline held when the
API hangs (kubesim fault injection: every request of the workload's ServiceAccount hangs).

kubesim runs in its own process with a pod being drained (bench/detector/kubesim_proc.py).
The library is timed in a fresh process, one `Detector.detect()` after another; the CLI
(`graceful-drain termination-cause`, as a preStop hook runs it) is timed from spawning the
process to its exit, since its deadline counts from the process start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.detector import startup
from bench.detector.detect_proc import Detection, DetectOptions, detect_main
from bench.detector.kubesim_proc import Workload, kubesim_main
from bench.machine import load_average
from bench.procs import Child
from bench.report import Column, Table, fixed
from bench.stats import Bound, Target, evaluate, summarize

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
EXPECTED = ("voluntary", "drain_gracefully")
FALLBACK = ("indeterminate", "shed_load_and_exit_fast")
CLI_MARGIN = 30.0  # bound on waiting for one CLI process beyond its deadline


@dataclass(frozen=True)
class DetectorProfile:
    healthy_runs: int = 200
    healthy_deadline: float = 5.0  # the detector's default
    hanging_runs: int = 10
    hanging_deadline: float = 1.0
    cli_healthy_runs: int = 5
    cli_hanging_runs: int = 3
    cli_deadline: float = 2.0
    startup_rounds: int = 20  # start-up and verdict → exit: rounds of every command


COLUMNS = [
    Column("how", "how"),
    Column("api", "API"),
    Column("runs", "runs"),
    Column("deadline", "deadline s", fixed(1)),
    Column("p50", "p50 ms", fixed(1)),
    Column("p99", "p99 ms", fixed(1)),
    Column("max", "max ms", fixed(1)),
    Column("within", "within deadline"),
    Column("verdicts", "verdicts"),
]


@dataclass(frozen=True)
class Series:
    how: str
    api: str
    deadline: float
    detections: list[Detection]
    expected: tuple[str, str]


def _library(workload: Workload, runs: int, deadline: float) -> list[Detection]:
    child = Child("detector", detect_main, DetectOptions(workload, runs, deadline))
    try:
        detections: list[Detection] = child.receive(60.0 + runs * (deadline + 1.0))
        return detections
    finally:
        child.finish()


def _cli_env(workload: Workload) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
        "POD_NAME": workload.pod,
        "POD_NAMESPACE": workload.namespace,
        "POD_UID": workload.uid,
        "NODE_NAME": workload.node,
    }


def _startup(workload: Workload, profile: DetectorProfile) -> Table:
    commands = {
        startup.BARE: [sys.executable, "-c", "pass"],
        "graceful-drain --version": startup.cli_command("--version"),
        "termination-cause --help": startup.cli_command("termination-cause", "--help"),
        startup.CLASSIFICATION: startup.cli_command(
            "termination-cause", "--json", "--kubeconfig", workload.pod_kubeconfig,
            "--deadline", str(profile.cli_deadline),
        ),
        startup.CLASSIFICATION + startup.YAML_KUBECONFIG: startup.cli_command(
            "termination-cause", "--json", "--kubeconfig", workload.kubeconfig,
            "--deadline", str(profile.cli_deadline),
        ),
    }  # fmt: skip
    startup.compile_sources(SRC)
    series = startup.measure(
        commands, _cli_env(workload), profile.startup_rounds, profile.cli_deadline + CLI_MARGIN
    )
    return startup.build_table(series, load_average())


def _cli(workload: Workload, runs: int, deadline: float) -> list[Detection]:
    env = _cli_env(workload)
    command = [
        sys.executable, "-c", "import sys; from graceful_drain.cli import main; sys.exit(main())",
        "termination-cause", "--json", "--kubeconfig", workload.kubeconfig,
        "--deadline", str(deadline),
    ]  # fmt: skip
    detections = []
    for _ in range(runs):
        started = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=deadline + CLI_MARGIN, check=False)  # fmt: skip
        seconds = time.monotonic() - started
        cause, action = _verdict_of(done.stdout)
        detections.append(Detection(seconds, deadline, cause, action))
    return detections


def _verdict_of(output: str) -> tuple[str, str]:
    try:
        document = json.loads(output)
        return str(document["cause"]), str(document["action"])
    except (ValueError, KeyError, TypeError):
        return "no verdict", "none"


def run(profile: DetectorProfile) -> list[Table]:
    series: list[Series] = []
    sim = Child("kubesim-detector", kubesim_main, True)
    try:
        workload: Workload = sim.receive(60.0)
        healthy = (profile.healthy_runs, profile.healthy_deadline)
        series.append(Series("library", "healthy", profile.healthy_deadline,
                             _library(workload, *healthy), EXPECTED))  # fmt: skip
        series.append(Series("CLI process", "healthy", profile.cli_deadline,
                             _cli(workload, profile.cli_healthy_runs, profile.cli_deadline),
                             EXPECTED))  # fmt: skip
        startup_table = _startup(workload, profile)
        sim.ask("hang", 10.0)
        hanging = (profile.hanging_runs, profile.hanging_deadline)
        series.append(Series("library", "hanging", profile.hanging_deadline,
                             _library(workload, *hanging), FALLBACK))  # fmt: skip
        series.append(Series("CLI process", "hanging", profile.cli_deadline,
                             _cli(workload, profile.cli_hanging_runs, profile.cli_deadline),
                             FALLBACK))  # fmt: skip
        sim.ask("heal", 10.0)
        sim.ask("stop", 30.0)
    finally:
        sim.finish()
    return [build_table(series), startup_table]


def build_table(series: list[Series]) -> Table:
    table = Table("detector", "Detector: time to verdict", COLUMNS)
    for item in series:
        summary = summarize(d.seconds * 1000 for d in item.detections)
        within = sum(1 for d in item.detections if d.seconds <= d.budget)
        verdicts: dict[tuple[str, str], int] = {}
        for d in item.detections:
            verdicts[(d.cause, d.action)] = verdicts.get((d.cause, d.action), 0) + 1
        table.add(
            how=item.how,
            api=item.api,
            runs=len(item.detections),
            deadline=item.deadline,
            p50=None if summary is None else summary.p50,
            p99=None if summary is None else summary.p99,
            max=None if summary is None else summary.max,
            within=f"{within}/{len(item.detections)}",
            verdicts=", ".join(f"{c} / {a} x{n}" for (c, a), n in sorted(verdicts.items())),
        )
        target = Target("runs past the deadline", Bound.AT_MOST, 0)
        table.verdicts.append(
            evaluate(target, len(item.detections) - within, f"{item.how}, {item.api} API")
        )
        unexpected = sum(n for verdict, n in verdicts.items() if verdict != item.expected)
        if unexpected:
            table.notes.append(
                f"{item.how}, {item.api} API: {unexpected} verdicts other than "
                f"{' / '.join(item.expected)}."
            )
    table.notes += [
        "The pod is being drained (evicted through the Eviction API, DisruptionTarget set) and "
        "belongs to a Deployment: the detector reads the pod, its events, the node and the "
        "owners, under the shipped RBAC (deploy/detector) with the workload's ServiceAccount.",
        "Library: a fresh `Detector.detect()` per run (new client and TLS handshake), in its own "
        "process on plain asyncio. CLI: `graceful-drain termination-cause --json` as a preStop "
        "hook runs it, timed from spawn to exit; its deadline counts from process start, "
        "interpreter start-up and imports included.",
        "Hanging API: kubesim holds every request of the workload's ServiceAccount unanswered; "
        "the answer must then be the conservative fallback (shed load) within the deadline.",
    ]
    return table
