"""``graceful-drain termination-cause``: the detector for preStop hooks and other languages.

Identity comes from the Downward API environment (POD_NAME, POD_NAMESPACE, POD_UID,
NODE_NAME; see :mod:`graceful_drain.termination.identity`), credentials from the
in-cluster service account (or ``--kubeconfig``).  The verdict is printed as text, or
as the versioned JSON document of :mod:`graceful_drain.termination.verdict` with
``--json``; ``--output FILE`` also writes it (atomically) to FILE, e.g. an emptyDir the
application container reads.  The exit status is the contract
(:mod:`graceful_drain.termination.actions`): 0 drain gracefully, 10 shed load,
11 indeterminate (shed load), 2 usage error; ``--after-restart`` reports always exit 0.

The deadline is a whole-process one: it counts from the process start (read from
``/proc/self/stat``, so interpreter start-up and imports are included) and the answer is
printed before it, whatever the API server does.  It is capped at half the grace period,
the shortest one known (``--grace-period``, else ``$TERMINATION_GRACE_PERIOD_SECONDS``,
else an assumed 4 s; and once the pod is read, its deletion's grace period and the time
left until its deletionTimestamp).

The process exits as soon as the verdict is printed: a preStop hook waits for the exit,
not for the output.  Whatever must be recorded (``--record-event``, ``--output``) is done
before the verdict is printed; then stdout and stderr are flushed and the process ends
with ``os._exit`` from inside the event loop, so that neither the loop's shutdown (a
cancelled read, a DNS lookup still running in the default executor) nor the
interpreter's finalisation stands between the verdict and the exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from graceful_drain.annotations import DEFAULT_ROLLOUT_TIMEOUT
from graceful_drain.kube.meta import utc_now
from graceful_drain.kube.timefmt import format_go_duration, parse_go_duration
from graceful_drain.termination import COMMAND, COMMAND_HELP
from graceful_drain.termination.actions import EXIT_CODES, Outcome, exit_code_of
from graceful_drain.termination.budget import (
    DEFAULT_DEADLINE_SECONDS,
    GracePeriodError,
    grace_period_from_environment,
)
from graceful_drain.termination.classify import DEFAULT_EVENT_RETENTION_SECONDS
from graceful_drain.termination.evidence import Trigger
from graceful_drain.termination.identity import IdentityError, resolve_identity
from graceful_drain.termination.verdict import Verdict

if TYPE_CHECKING:  # the client stack loads when a detection runs, not for --help
    from graceful_drain.termination.detector import Detector, ReaderFactory

NAME = COMMAND
HELP = COMMAND_HELP
MAX_PROCESS_AGE_SECONDS = 30.0  # beyond this, /proc disagrees with the clock: ignore it
RECORD_MIN_SECONDS = 0.1


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _positive_duration(text: str) -> timedelta:
    try:
        value = parse_go_duration(text.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{error} (expected e.g. 10m, 90s)") from None
    if value <= timedelta(0):
        raise argparse.ArgumentTypeError(f"must be a positive duration, got {text}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print the verdict as JSON (default: a text summary)"
    )
    parser.add_argument(
        "--output", type=Path, metavar="FILE", help="also write the verdict to FILE (default: none)"
    )
    parser.add_argument(
        "--deadline",
        type=_positive_seconds,
        metavar="SECONDS",
        help=f"answer within this many seconds of starting (default {DEFAULT_DEADLINE_SECONDS:g}, "
        "never more than half the grace period)",
    )
    parser.add_argument(
        "--grace-period",
        type=_non_negative_int,
        metavar="SECONDS",
        help="this pod's terminationGracePeriodSeconds (default: "
        "$TERMINATION_GRACE_PERIOD_SECONDS, else an assumed 4); the pod's deletion, once "
        "read, can only shorten it",
    )
    parser.add_argument(
        "--after-restart",
        action="store_true",
        help="report why the previous container instance ended (e.g. OOM-killed); exit 0 "
        "(default: off, classify the termination under way)",
    )
    parser.add_argument(
        "--event-retention",
        type=_positive_int,
        default=DEFAULT_EVENT_RETENTION_SECONDS,
        metavar="SECONDS",
        help="the API server's --event-ttl (default %(default)s)",
    )
    parser.add_argument(
        "--rollout-timeout",
        type=_positive_duration,
        default=DEFAULT_ROLLOUT_TIMEOUT,
        metavar="DURATION",
        help="the graceful-drain controller's --rollout-timeout: a restarted-at marker "
        f"older (or further ahead) than this is not trusted (default "
        # "10m", as the controller's own --rollout-timeout says it, rather than "10m0s".
        f"{re.sub(r'(?<=[hm])0s$', '', format_go_duration(DEFAULT_ROLLOUT_TIMEOUT))})",
    )
    parser.add_argument(
        "--record-event",
        action="store_true",
        help="also record the verdict as a TerminationClassified Event on this pod (default: off)",
    )
    parser.add_argument(
        "--kubeconfig", type=Path, metavar="PATH",
        help="kubeconfig file (default: in-cluster, then $KUBECONFIG)",
    )  # fmt: skip
    parser.add_argument(
        "--context", metavar="NAME",
        help="kubeconfig context, with --kubeconfig or $KUBECONFIG (default: the current one)",
    )  # fmt: skip


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand on an ``add_subparsers()`` object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(NAME, help=HELP, description=HELP)
    configure(parser)
    return parser


def _seconds_since_boot() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def process_age_seconds(
    stat_path: Path = Path("/proc/self/stat"),
    *,
    since_boot: Callable[[], float] = _seconds_since_boot,
    ticks_per_second: int | None = None,
) -> float:
    """Seconds since this process started, from /proc; 0.0 where that cannot be read.

    ``starttime`` (field 22 of /proc/PID/stat) is in clock ticks since boot; the
    command name before it is parenthesised and may hold spaces and parentheses.
    """
    try:
        fields = stat_path.read_text().rpartition(")")[2].split()
        ticks = ticks_per_second or os.sysconf("SC_CLK_TCK")
        age = since_boot() - int(fields[19]) / ticks
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return age if 0.0 <= age <= MAX_PROCESS_AGE_SECONDS else 0.0


def render_text(verdict: Verdict) -> str:
    cause = verdict.cause.value
    if verdict.resource is not None:
        cause += f" ({verdict.resource.value})"
    deciding = verdict.deciding_item
    lines = [
        f"cause:      {cause}",
        f"action:     {verdict.action.value} (exit {exit_code_of(verdict)})",
        f"decided by: {deciding.source.value} ({deciding.fact.value})",
        f"trigger:    {verdict.trigger.value}",
        "evidence:",
    ]
    for item in verdict.evidence:
        mark = "*" if item.decisive else "-"
        detail = " ".join(item.detail.split())
        lines.append(f"  {mark} {item.source.value}/{item.fact.value}: {detail}")
    return "\n".join(lines) + "\n"


def render(verdict: Verdict, *, as_json: bool) -> str:
    return verdict.to_json() + "\n" if as_json else render_text(verdict)


def write_atomically(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    import tempfile  # only with --output

    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


ExitNow = Callable[[int], NoReturn]


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` at once: flush what was printed, skip the rest."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: the status counts
            stream.flush()
    os._exit(code)


async def _detect(
    detector: Detector,
    trigger: Trigger,
    started: float,
    args: argparse.Namespace,
    finish: ExitNow | None,
) -> Verdict:
    verdict = await detector.detect(trigger, started_at=started)
    if args.record_event:
        remaining = detector.budget_seconds() - (time.monotonic() - started)
        if remaining < RECORD_MIN_SECONDS:
            print(f"{NAME}: no time left to record the verdict as an Event", file=sys.stderr)
        else:
            failure = await detector.record(verdict, timeout_seconds=remaining)
            if failure is not None:
                print(f"{NAME}: verdict not recorded as an Event ({failure})", file=sys.stderr)
    text = render(verdict, as_json=args.json)
    if args.output is not None:
        try:
            write_atomically(args.output, text)
        except OSError as error:
            print(f"{NAME}: could not write {args.output}: {error}", file=sys.stderr)
    sys.stdout.write(text)
    sys.stdout.flush()
    if finish is not None:
        finish(exit_code_of(verdict))
    return verdict


def run(
    args: argparse.Namespace,
    *,
    env: Mapping[str, str] | None = None,
    reader_factory: ReaderFactory | None = None,
    now: Callable[[], datetime] = utc_now,
    started_at: float | None = None,
    finish: ExitNow | None = None,
) -> int:
    """Run the subcommand; returns the exit status.  ``finish`` ends the process with the
    status as soon as the verdict is out (:func:`run_process`); the other keyword
    arguments are for tests."""
    started = time.monotonic() - process_age_seconds() if started_at is None else started_at
    environment = os.environ if env is None else env
    try:
        identity = resolve_identity(environment)
    except IdentityError as error:
        print(
            f"graceful-drain {NAME}: error: {error} (set POD_NAME and POD_NAMESPACE "
            "from the Downward API)",
            file=sys.stderr,
        )
        return EXIT_CODES[Outcome.USAGE_ERROR]
    grace = args.grace_period
    if grace is None:
        try:
            grace = grace_period_from_environment(environment)
        except GracePeriodError as error:
            print(f"graceful-drain {NAME}: error: {error}", file=sys.stderr)
            return EXIT_CODES[Outcome.USAGE_ERROR]
    import asyncio

    from graceful_drain.termination.detector import Detector, DetectorConfig

    config = DetectorConfig(
        grace_period_seconds=grace,
        deadline_seconds=args.deadline,
        event_retention_seconds=args.event_retention,
        rollout_timeout=args.rollout_timeout,
        kubeconfig=args.kubeconfig,
        context=args.context,
    )
    detector = Detector(identity, config, reader_factory=reader_factory, now=now)
    trigger = Trigger.AFTER_RESTART if args.after_restart else Trigger.SIGTERM
    verdict = asyncio.run(_detect(detector, trigger, started, args, finish))
    return exit_code_of(verdict)


def run_process(args: argparse.Namespace) -> int:
    """The subcommand as ``graceful-drain termination-cause`` runs it: the process ends
    the moment the verdict is printed (a usage error returns its status as usual)."""
    return run(args, finish=exit_now)
