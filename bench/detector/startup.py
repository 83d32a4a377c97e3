"""The detector's command line as a preStop hook meets it: how long the interpreter and its
imports take before anything is asked of the API, and how long the process lives on after
the verdict is printed (the hook waits for the exit, not for the output).

Every series runs in the same run, interleaved round by round so that a change of load
falls on all of them: bare `python -c pass` (the floor), `graceful-drain --version`,
`graceful-drain termination-cause --help`, and a real classification against kubesim.

The sources are compiled to bytecode first (`compile_sources`), as the wheel's installer and
the image (imagebuild/release.py) ship them: with `PYTHONDONTWRITEBYTECODE` set and no
`__pycache__`, every spawn would compile each module it imports again, a cost no installed
detector pays.
"""

from __future__ import annotations

import compileall
import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.report import Column, Table, fixed
from bench.stats import Bound, Summary, Target, evaluate, ratio, summarize

STARTUP_TARGET = 8.0  # p50 start-up at most this many times bare Python's (issue 38)
GAP_TARGET_MS = 50.0  # p99 from the printed verdict to the exit (issue 42)
CLI = "import sys; from graceful_drain.cli import main; sys.exit(main())"


@dataclass(frozen=True)
class Run:
    seconds: float  # spawn to exit
    gap: float | None  # the verdict's last byte read to the exit (classifications only)
    status: int
    first_line: str


def timed(command: Sequence[str], env: Mapping[str, str], bound: float) -> Run:
    """Spawn `command`, read its stdout as it comes; note when its first line is complete
    (the verdict: one JSON line) and when the process has exited."""
    started = time.monotonic()
    process = subprocess.Popen(command, env=dict(env), stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    assert process.stdout is not None
    fd = process.stdout.fileno()
    buffer = b""
    printed: float | None = None
    deadline = started + bound
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            process.kill()
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break  # end of file: the process is gone (or closed its stdout)
        buffer += chunk
        if printed is None and b"\n" in buffer:
            printed = time.monotonic()
    status = process.wait()
    exited = time.monotonic()
    process.stdout.close()
    first = buffer.split(b"\n", 1)[0].decode(errors="replace")
    gap = None if printed is None else exited - printed
    return Run(exited - started, gap, status, first)


@dataclass(frozen=True)
class StartupSeries:
    what: str
    runs: list[Run]


def measure(
    commands: Mapping[str, Sequence[str]], env: Mapping[str, str], rounds: int, bound: float
) -> list[StartupSeries]:
    """`rounds` rounds, each running every command once, in order."""
    found: dict[str, list[Run]] = {what: [] for what in commands}
    for _ in range(rounds):
        for what, command in commands.items():
            found[what].append(timed(command, env, bound))
    return [StartupSeries(what, runs) for what, runs in found.items()]


def compile_sources(*roots: Path) -> None:
    """Bytecode for every module under `roots`, as an installed distribution has it."""
    for root in roots:
        compileall.compile_dir(root, quiet=1)


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-c", CLI, *args]


COLUMNS = [
    Column("what", "command"),
    Column("runs", "runs"),
    Column("p50", "start-up p50 ms", fixed(1)),
    Column("p99", "start-up p99 ms", fixed(1)),
    Column("ratio", "p50 / bare python", fixed(1)),
    Column("gap_p50", "verdict → exit p50 ms", fixed(1)),
    Column("gap_p99", "verdict → exit p99 ms", fixed(1)),
]
BARE = "python -c pass"
CLASSIFICATION = "termination-cause (real classification)"  # a pod's credentials: no YAML
YAML_KUBECONFIG = ", YAML kubeconfig"  # the same read with a kubeconfig as kubectl writes it


def build_table(series: list[StartupSeries], load: str) -> Table:
    table = Table("detector_startup", "Detector: start-up and exit", COLUMNS)
    summaries: dict[str, Summary | None] = {
        item.what: summarize(run.seconds * 1000 for run in item.runs) for item in series
    }
    bare = summaries.get(BARE)
    for item in series:
        summary = summaries[item.what]
        gaps = summarize(run.gap * 1000 for run in item.runs if run.gap is not None)
        factor = None if summary is None or bare is None else ratio(summary.p50, bare.p50)
        show_gap = CLASSIFICATION in item.what
        table.add(
            what=item.what,
            runs=len(item.runs),
            p50=None if summary is None else summary.p50,
            p99=None if summary is None else summary.p99,
            ratio=factor,
            gap_p50=gaps.p50 if show_gap and gaps is not None else None,
            gap_p99=gaps.p99 if show_gap and gaps is not None else None,
        )
        # The target is a pod's (its preStop hook's) start-up: a YAML kubeconfig is shown
        # beside it, what PyYAML's import adds on a laptop, without one.
        if item.what != BARE and not item.what.endswith(YAML_KUBECONFIG):
            target = Target("p50 start-up / bare python", Bound.AT_MOST, STARTUP_TARGET, "x")
            table.verdicts.append(evaluate(target, factor, item.what))
        if show_gap:
            target = Target("p99 verdict → exit", Bound.AT_MOST, GAP_TARGET_MS, " ms")
            table.verdicts.append(evaluate(target, None if gaps is None else gaps.p99, item.what))
    table.notes += [
        f"Load average (1/5/15 min) after the series: {load}. The series are interleaved "
        "round by round, so a change of load falls on all of them alike.",
        "The sources were compiled to bytecode before the series, as an installed wheel "
        "and the image have them.",
        "Start-up: from spawning the process to its exit, as a preStop hook waits for it. "
        "The classification is `graceful-drain termination-cause --json` against kubesim "
        "with the shipped RBAC (a pod being drained: the reads, the verdict, the exit), its "
        "credentials in a JSON kubeconfig, which costs what a pod's in-cluster account does "
        f"(no YAML); `{YAML_KUBECONFIG.lstrip(', ')}`: the same with the kubeconfig as kubectl "
        "writes it, PyYAML loaded to read it (a laptop's case, not a pod's: shown without "
        "the start-up target).",
        "Verdict → exit: from reading the verdict's last byte on the pipe to the process's "
        "exit status, i.e. what the hook waits for after the answer is known.",
    ]
    return table
