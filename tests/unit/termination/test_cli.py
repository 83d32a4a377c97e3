"""``graceful-drain termination-cause``: flags, output, exit codes, and the library's verdicts."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from graceful_drain import cli as graceful_drain_cli
from graceful_drain.termination import cli
from graceful_drain.termination.actions import EXIT_CODES, Outcome
from graceful_drain.termination.detector import Detector, DetectorConfig
from graceful_drain.termination.evidence import Trigger
from graceful_drain.termination.identity import resolve_identity
from graceful_drain.termination.verdict import SCHEMA
from tests.unit.termination.fakes import (
    HANG,
    MEMORY_MESSAGE,
    NAMESPACE,
    NODE,
    POD_NAME,
    UID,
    FakeReader,
    ReaderFactory,
    deployment_obj,
    events_list,
    evicted_event,
    forbidden,
    node_obj,
    not_found,
    pod_obj,
)

NOW = datetime(2026, 11, 11, 12, 0, tzinfo=UTC)
ENV = {"POD_NAME": POD_NAME, "POD_NAMESPACE": NAMESPACE, "POD_UID": UID, "NODE_NAME": NODE}
OOM_STATUS = {
    "containerStatuses": [
        {"name": "web", "restartCount": 1,
         "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                      "finishedAt": "2026-11-11T11:59:00Z"}}}
    ]
}  # fmt: skip

SCENARIOS = {
    "delete": (FakeReader(pod=pod_obj(deleted=True)), [], Outcome.DRAIN_GRACEFULLY),
    "drain-eviction": (
        FakeReader(pod=pod_obj(deleted=True, disruption="EvictionByEvictionAPI")),
        [],
        Outcome.DRAIN_GRACEFULLY,
    ),
    "kubelet-eviction": (
        FakeReader(events=events_list(evicted_event()), node=node_obj("MemoryPressure")),
        [],
        Outcome.SHED_LOAD,
    ),
    "preemption": (
        FakeReader(pod=pod_obj(deleted=True, disruption="PreemptionByScheduler")),
        [],
        Outcome.SHED_LOAD,
    ),
    "marker-only": (
        FakeReader(
            pod=not_found(),
            deployments={"web": deployment_obj(restarted_at="2026-11-11T11:58:00Z")},
        ),
        [],
        Outcome.DRAIN_GRACEFULLY,
    ),
    "nothing-readable": (
        FakeReader(pod=forbidden(), events=forbidden(), node=forbidden()),
        [],
        Outcome.INDETERMINATE,
    ),
    "oom-report": (
        FakeReader(pod=pod_obj(status=OOM_STATUS)),
        ["--after-restart"],
        Outcome.REPORT_ONLY,
    ),
    # v3: a kubelet-, preemption- or shutdown-sourced record beats a voluntary marker
    "drain-eviction-beside-kubelet-preempting": (
        FakeReader(
            pod=pod_obj(
                deleted=True,
                disruption="EvictionByEvictionAPI",
                status={
                    "reason": "Preempting",
                    "message": "Preempted in order to admit critical pod",
                },
            )
        ),
        [],
        Outcome.SHED_LOAD,
    ),
    "drain-eviction-beside-node-shutdown": (
        FakeReader(
            pod=pod_obj(
                deleted=True,
                disruption="EvictionByEvictionAPI",
                status={
                    "reason": "Terminated",
                    "message": "Pod was terminated in response to imminent node shutdown.",
                },
            )
        ),
        [],
        Outcome.SHED_LOAD,
    ),
    # v3: malformed evidence fails closed
    "deletion-beside-an-unknown-disruption-target": (
        FakeReader(
            pod=pod_obj(
                deleted=True,
                status={
                    "conditions": [
                        {
                            "type": "DisruptionTarget",
                            "status": "Unknown",
                            "reason": "TerminationByKubelet",
                        }
                    ]
                },
            )
        ),
        [],
        Outcome.INDETERMINATE,
    ),
    "deletion-beside-a-kubelet-evicted-event-without-type": (
        FakeReader(
            pod=pod_obj(deleted=True),
            events=events_list({k: v for k, v in evicted_event().items() if k != "type"}),
        ),
        [],
        Outcome.SHED_LOAD,
    ),
    "kubelet-status-past-retention": (
        FakeReader(
            pod=pod_obj(
                disruption="TerminationByKubelet",
                status={"phase": "Failed", "reason": "Evicted", "message": MEMORY_MESSAGE},
            )
        ),
        ["--grace-period", "7200"],
        Outcome.SHED_LOAD,
    ),
}


def parse(*argv: str) -> argparse.Namespace:
    return graceful_drain_cli.build_parser().parse_args(["termination-cause", *argv])


def run(reader: FakeReader, *argv: str, env: dict[str, str] = ENV) -> int:
    return cli.run(
        parse(*argv),
        env=env,
        reader_factory=ReaderFactory(reader),
        now=lambda: NOW,
        started_at=time.monotonic(),
    )


def test_the_subcommand_is_registered() -> None:
    args = parse("--json", "--deadline", "2.5", "--grace-period", "10", "--after-restart")
    assert args._subcommand.name == cli.NAME  # its module loads when it is configured
    assert (args.json, args.deadline, args.grace_period, args.after_restart) == (
        True,
        2.5,
        10,
        True,
    )
    assert (args.output, args.record_event, args.event_retention) == (None, False, 3600)


@pytest.mark.parametrize(
    "argv",
    [
        ["--deadline", "0"],
        ["--deadline", "-1"],
        ["--deadline", "nan"],
        ["--deadline", "inf"],
        ["--grace-period", "-1"],
        ["--event-retention", "0"],
        ["--rollout-timeout", "0s"],
        ["--rollout-timeout", "-1m"],
        ["--rollout-timeout", "10"],
        ["--rollout-timeout", "soon"],
        ["--unknown"],
    ],
)
def test_bad_flags_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == EXIT_CODES[Outcome.USAGE_ERROR]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_exit_codes(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    reader, argv, outcome = SCENARIOS[scenario]
    assert run(reader, *argv) == EXIT_CODES[outcome]
    out = capsys.readouterr().out
    assert f"(exit {EXIT_CODES[outcome]})" in out


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_cli_and_library_give_the_same_verdict_on_the_same_evidence(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    reader, argv, _ = SCENARIOS[scenario]
    grace = int(argv[argv.index("--grace-period") + 1]) if "--grace-period" in argv else None
    trigger = Trigger.AFTER_RESTART if "--after-restart" in argv else Trigger.SIGTERM
    library = Detector(
        resolve_identity(ENV),
        DetectorConfig(grace_period_seconds=grace),
        reader_factory=ReaderFactory(reader),
        now=lambda: NOW,
    )
    expected = (await library.detect(trigger)).to_json()

    code = await _run_cli_off_loop(reader, "--json", *argv)
    out = capsys.readouterr().out

    assert out == expected + "\n"
    assert json.loads(out)["schema"] == SCHEMA
    assert code in EXIT_CODES.values()


async def _run_cli_off_loop(reader: FakeReader, *argv: str) -> int:
    """``cli.run`` starts its own event loop, so it runs in a thread here."""
    return await asyncio.to_thread(run, reader, *argv)


def test_text_output_marks_the_deciding_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    run(SCENARIOS["kubelet-eviction"][0])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        "cause:      involuntary_eviction (memory)",
        "action:     shed_load_and_exit_fast (exit 10)",
        "decided by: events (kubelet_evicted_event)",
        "trigger:    sigterm",
    ]
    assert lines[4] == "evidence:"
    decisive = [line for line in lines[5:] if line.startswith("  * ")]
    assert len(decisive) == 1 and decisive[0].startswith("  * events/kubelet_evicted_event: ")


def test_output_file_gets_what_stdout_gets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "verdict.json"
    target.write_text("stale")
    code = run(FakeReader(pod=pod_obj(deleted=True)), "--json", "--output", str(target))
    assert code == 0
    assert target.read_text() == capsys.readouterr().out
    assert json.loads(target.read_text())["cause"] == "voluntary"
    assert [p.name for p in tmp_path.iterdir()] == ["verdict.json"]  # no temporary left


def test_an_unwritable_output_does_not_change_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(FakeReader(), "--output", str(tmp_path / "missing-dir" / "verdict"))
    captured = capsys.readouterr()
    assert code == EXIT_CODES[Outcome.INDETERMINATE]  # a running pod: no voluntary evidence
    assert "could not write" in captured.err
    assert captured.out.startswith("cause:      indeterminate")


def test_a_missing_identity_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(FakeReader(), env={"POD_UID": UID})
    captured = capsys.readouterr()
    assert code == EXIT_CODES[Outcome.USAGE_ERROR]
    assert captured.out == ""
    assert "cannot determine this pod's name and namespace" in captured.err


def test_record_event_posts_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    reader = FakeReader(pod=pod_obj(deleted=True))
    assert run(reader, "--record-event") == 0
    [(namespace, event)] = reader.created
    assert namespace == NAMESPACE and event["reason"] == "TerminationClassified"


def test_a_failed_recording_is_reported_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    reader = FakeReader(pod=pod_obj(deleted=True), create_event=forbidden("events"))
    assert run(reader, "--record-event") == 0
    err = capsys.readouterr().err
    assert "verdict not recorded as an Event (forbidden: " in err
    assert "Unavailable(" not in err and "UnavailableReason" not in err  # v3: for people


def stat_line(starttime_ticks: int, comm: str = "python3") -> str:
    after = ["S"] + ["0"] * 18 + [str(starttime_ticks)] + ["0"] * 30  # field 22 = index 19
    return f"4242 ({comm}) " + " ".join(after) + "\n"


@pytest.mark.parametrize(
    ("content", "booted", "age"),
    [
        (stat_line(1000), 12.5, 2.5),  # started at tick 1000 of 100/s
        (stat_line(1000, comm="a) (b c"), 12.5, 2.5),  # a command name with ')' and spaces
        (stat_line(1250), 12.5, 0.0),
        (stat_line(1300), 12.5, 0.0),  # in the future: /proc and the clock disagree
        (stat_line(0), 3600.0, 0.0),  # older than any deadline: disagreement again
        ("garbage", 12.5, 0.0),
        (None, 12.5, 0.0),  # no /proc
    ],
)
def test_process_age(tmp_path: Path, content: str | None, booted: float, age: float) -> None:
    path = tmp_path / "stat"
    if content is not None:
        path.write_text(content)
    found = cli.process_age_seconds(path, since_boot=lambda: booted, ticks_per_second=100)
    assert found == pytest.approx(age)


@pytest.mark.parametrize("value", ["four", "-1", "4.5"])
def test_a_bad_grace_period_in_the_environment_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(FakeReader(), env={**ENV, "TERMINATION_GRACE_PERIOD_SECONDS": value})
    captured = capsys.readouterr()
    assert code == EXIT_CODES[Outcome.USAGE_ERROR]
    assert captured.out == ""
    assert f"TERMINATION_GRACE_PERIOD_SECONDS={value!r} is not a whole number" in captured.err


def test_the_grace_period_comes_from_the_environment_unless_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Past event retention, the absence of an Evicted event proves nothing: which grace
    period the verdict used shows in its evidence."""
    reader = FakeReader(pod=forbidden())
    env = {**ENV, "TERMINATION_GRACE_PERIOD_SECONDS": "7200"}
    run(reader, "--json", env=env)
    from_env = json.loads(capsys.readouterr().out)
    run(reader, "--json", "--grace-period", "4", env=env)
    from_flag = json.loads(capsys.readouterr().out)

    def grace(document: dict[str, object]) -> str:
        items = document["evidence"]
        assert isinstance(items, list)
        [item] = [i for i in items if i["fact"] == "no_evicted_event"]
        return str(item["values"]["grace_period_seconds"])

    assert grace(from_env) == "7200"
    assert grace(from_flag) == "4"


def marker_only(stamp: str) -> FakeReader:
    """The pod object is gone; events read, none; the Deployment carries `stamp`."""
    return FakeReader(
        pod=not_found(),
        events=events_list(),
        deployments={"web": deployment_obj(restarted_at=stamp)},
    )


@pytest.mark.parametrize(
    ("argv", "outcome"),
    [
        ([], Outcome.DRAIN_GRACEFULLY),  # a 2-minute-old stamp, within the default 10m
        (["--rollout-timeout", "3m"], Outcome.DRAIN_GRACEFULLY),
        (["--rollout-timeout", "1m"], Outcome.INDETERMINATE),  # the controller gave up on it
    ],
)
def test_the_rollout_timeout_bounds_the_marker(argv: list[str], outcome: Outcome) -> None:
    reader = marker_only("2026-11-11T11:58:00Z")
    assert run(reader, "--grace-period", "30", *argv) == EXIT_CODES[outcome]


@pytest.mark.parametrize("stamp", ["not-a-time", "1970-01-01T00:00:00Z", "3000-01-01T00:00:00Z"])
def test_a_stamp_outside_the_window_is_no_marker(
    stamp: str, capsys: pytest.CaptureFixture[str]
) -> None:
    reader = marker_only(stamp)
    assert run(reader, "--grace-period", "30", "--json") == EXIT_CODES[Outcome.INDETERMINATE]
    facts = [item["fact"] for item in json.loads(capsys.readouterr().out)["evidence"]]
    assert "rollout_marker_rejected" in facts


def test_the_rollout_timeout_default_is_the_controllers() -> None:
    from graceful_drain.controller.settings import ControllerConfig

    assert parse().rollout_timeout == ControllerConfig().rollout_timeout


@pytest.mark.parametrize("body", [{}, {"items": None}, {"kind": "EventList"}])
def test_an_events_body_without_items_is_no_absence(
    body: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    reader = FakeReader(
        pod=not_found(), events=body,
        deployments={"web": deployment_obj(restarted_at="2026-11-11T11:58:00Z")},
    )  # fmt: skip
    assert run(reader, "--grace-period", "30", "--json") == EXIT_CODES[Outcome.INDETERMINATE]
    verdict = json.loads(capsys.readouterr().out)
    [decisive] = [item for item in verdict["evidence"] if item["decisive"]]
    assert decisive["fact"] == "evidence_malformed"
    assert decisive["values"]["field"] == "events.items"


DETECTOR_DOC = Path(__file__).parents[3] / "docs" / "termination-detector.md"


def test_the_command_line_reference_lists_every_flag() -> None:
    """docs/termination-detector.md's table and --help name the same flags (--context too)."""
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    flags = {o for action in parser._actions for o in action.option_strings} - {"-h", "--help"}
    text = DETECTOR_DOC.read_text()
    section = text.split("## Command-line reference", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(--[a-z-]+)[` ]", section, re.M))
    assert documented == flags
    assert "--context" in documented


def test_the_deletions_grace_period_bounds_the_cli_deadline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 30: --grace-period 30 as the docs show, a deletion with 2 s, the events read
    hanging: the reads get half the deletion's 2 s (less the reserve), not 5 s."""
    pod = pod_obj(deleted=True, disruption="EvictionByEvictionAPI", deletion_grace=2)
    pod["metadata"]["deletionTimestamp"] = "2026-11-11T12:00:02Z"  # NOW + 2 s
    reader = FakeReader(pod=pod, events=HANG)
    # v4: the Eviction API reads as voluntary, but with the events read cut an eviction
    # cannot be excluded: cannot determine, shed load.
    assert run(reader, "--grace-period", "30", "--json") == EXIT_CODES[Outcome.INDETERMINATE]
    [cut] = [
        item for item in json.loads(capsys.readouterr().out)["evidence"]
        if item["fact"] == "events_unavailable"
    ]  # fmt: skip
    within = re.search(r"within the ([0-9.]+)s detection deadline", cut["values"]["error"])
    assert within is not None and float(within.group(1)) <= 0.8


def test_the_process_ends_as_soon_as_the_verdict_is_out(tmp_path: Path) -> None:
    """Issue 42: nothing stands between the printed verdict and the exit status — here a
    non-daemon thread that never ends, which would hold a normal interpreter exit forever
    (threading's shutdown joins it).  The --output file is written before the exit."""
    output = tmp_path / "verdict.json"
    program = (
        "import sys, threading\n"
        "threading.Thread(target=threading.Event().wait, name='never-ends').start()\n"
        "from graceful_drain.cli import main\n"
        "sys.exit(main())\n"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(Path(__file__).parents[3] / "src"),
        "POD_NAME": "web-0", "POD_NAMESPACE": "shop", "POD_UID": "uid-1",
        "KUBECONFIG": str(tmp_path / "absent-kubeconfig"),
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", program, "termination-cause", "--json", "--grace-period", "4",
         "--output", str(output)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == EXIT_CODES[Outcome.INDETERMINATE], done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["action"] == "shed_load_and_exit_fast"
    assert json.loads(output.read_text()) == verdict
