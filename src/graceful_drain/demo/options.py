"""`graceful-drain demo` flags, validated into `DemoOptions` (bad values: ConfigError, exit 2)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import timedelta

from graceful_drain.errors import ConfigError
from graceful_drain.kube.timefmt import format_go_duration, parse_go_duration

CLIENTS = ("kubectl", "karpenter", "cluster-autoscaler")
DEFAULT_READY_DELAY = timedelta(seconds=3)
MAX_READY_DELAY = timedelta(seconds=20)  # the demo must finish well under a minute


@dataclass(frozen=True, slots=True)
class DemoOptions:
    client: str = "kubectl"
    compare: bool = False
    json: bool = False
    ready_delay: timedelta = DEFAULT_READY_DELAY


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Drain a node of an in-process cluster (kubesim) running a single-replica Deployment, "
        "with the graceful-drain controller installed, and show what happened."
    )
    parser.add_argument(
        "--client",
        choices=CLIENTS,
        metavar="CLIENT",
        default="kubectl",
        help="the drain client: kubectl (kubectl drain), karpenter or cluster-autoscaler "
        "(their eviction styles; default kubectl)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run the same drain a second time without the controller, and compare (default: off)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object with the figures instead of the timeline (default: off)",
    )
    parser.add_argument(
        "--ready-delay",
        metavar="DURATION",
        default=format_go_duration(DEFAULT_READY_DELAY),
        help="how long a new pod takes to pass its readiness probe, as a Go duration "
        f"(default {format_go_duration(DEFAULT_READY_DELAY)}, at most "
        f"{format_go_duration(MAX_READY_DELAY)})",
    )


def parse_ready_delay(text: str) -> timedelta:
    try:
        value = parse_go_duration(text.strip())
    except ValueError as error:
        raise ConfigError(
            f"invalid value for --ready-delay: {error} (expected e.g. 3s, 500ms)"
        ) from None
    if value < timedelta(0) or value > MAX_READY_DELAY:
        raise ConfigError(
            f"invalid value for --ready-delay: {text!r} must be between 0s and "
            f"{format_go_duration(MAX_READY_DELAY)}"
        )
    return value


def resolve_demo_options(args: argparse.Namespace) -> DemoOptions:
    """What argparse read, validated. Raises ConfigError naming the flag."""
    return DemoOptions(
        client=str(args.client),
        compare=bool(args.compare),
        json=bool(args.json),
        ready_delay=parse_ready_delay(str(args.ready_delay)),
    )
