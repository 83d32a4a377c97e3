"""`graceful-drain plan NODE` and `graceful-drain status`: flags, the run, exit codes.

Exit codes (docs/cli.md): plan 0 safe, 1 outage predicted, 2 blocked, 4 unprotected (the
webhook does not answer where the API server calls it); status 0 healthy, 1 degraded (the
webhook is unprotected, or no leader while leader election is on); both 3 on any error, bad
input included.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import NoReturn, TextIO

import httpx2
from lightkube import AsyncClient
from lightkube import ConfigError as KubeConfigError
from lightkube.core.exceptions import ApiError

from graceful_drain.config import check_readable, from_environment
from graceful_drain.errors import ConfigError
from graceful_drain.inspection import gather
from graceful_drain.inspection.plan import plan_node
from graceful_drain.inspection.render import (
    document_text,
    plan_document,
    plan_table,
    status_document,
    status_table,
)
from graceful_drain.inspection.settings import (
    DEFAULT_CONTROLLER_NAMESPACE,
    ControllerSettings,
    controller_settings,
)
from graceful_drain.inspection.status import build_status
from graceful_drain.kube.client import (
    RawApi,
    create_client,
    error_detail,
    http_status,
    load_config,
)
from graceful_drain.kube.meta import HTTP_FORBIDDEN, utc_now
from graceful_drain.kube.timefmt import parse_go_duration

EXIT_ERROR = 3
OUTPUTS = ("json", "yaml")
PLAN_HELP = "predict what draining NODE would do to each of its pods, without draining it"
STATUS_HELP = "show the Deployments graceful-drain holds, recent timeouts and its health"


class CommandError(Exception):
    """Bad input or an unusable cluster: printed, exit 3."""


def _exit_on_usage_error(parser: argparse.ArgumentParser) -> None:
    """argparse exits 2 on bad usage, which for `plan` means "blocked": make it 3."""

    def error(message: str) -> NoReturn:
        parser.print_usage(sys.stderr)
        parser.exit(EXIT_ERROR, f"{parser.prog}: error: {message}\n")

    parser.error = error  # type: ignore[method-assign]


def _common(parser: argparse.ArgumentParser) -> None:
    _exit_on_usage_error(parser)
    parser.add_argument(
        "-o", "--output", choices=OUTPUTS, metavar="FORMAT",
        help="print the document as json or yaml, as kubectl's -o (default: a table)",
    )  # fmt: skip
    parser.add_argument(
        "--json", action="store_true", help="the same as -o json (default: a table)"
    )
    parser.add_argument("--kubeconfig", type=Path, metavar="PATH",
                        help="kubeconfig file (default $KUBECONFIG, else ~/.kube/config) "
                        "[env GRACEFUL_DRAIN_KUBECONFIG]")  # fmt: skip
    parser.add_argument("--context", metavar="NAME",
                        help="kubeconfig context (default: the current one) "
                        "[env GRACEFUL_DRAIN_CONTEXT]")  # fmt: skip
    parser.add_argument(
        "--controller-namespace", metavar="NAMESPACE",
        help="namespace of the graceful-drain Deployment whose configuration applies "
        f"(default {DEFAULT_CONTROLLER_NAMESPACE}) [env GRACEFUL_DRAIN_CONTROLLER_NAMESPACE]",
    )  # fmt: skip
    parser.add_argument(
        "--rollout-timeout", metavar="DURATION",
        help="override the controller's rolloutTimeout, a Go duration such as 10m "
        "(default: the installed controller's) [env GRACEFUL_DRAIN_ROLLOUT_TIMEOUT]",
    )  # fmt: skip
    parser.add_argument(
        "--enabled-annotation", metavar="KEY",
        help="override the controller's --enabled-annotation, '' for none "
        "(default: the installed controller's) [env GRACEFUL_DRAIN_ENABLED_ANNOTATION]",
    )  # fmt: skip


def _webhook_address(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--webhook-address", metavar="HOST:PORT",
        help="where to reach the webhook to check its certificate against the caBundle and "
        "that it answers an AdmissionReview (e.g. a kubectl port-forward of its Service; "
        "default: the webhook's url, a Service is not reachable from outside the cluster)",
    )  # fmt: skip


def configure_plan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("node", metavar="NODE", help="the node a drain would empty")
    _common(parser)
    _webhook_address(parser)


def configure_status(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    _webhook_address(parser)


# Flags plan and status share with the controller: unset, they take its GRACEFUL_DRAIN_*
# variable, so one environment configures every command alike.
SHARED_FLAGS = (
    "--kubeconfig", "--context", "--controller-namespace", "--rollout-timeout",
    "--enabled-annotation",
)  # fmt: skip


def apply_environment(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """Fill the shared flags not given from `env`; check a named kubeconfig is readable."""
    kubeconfig_names = "--kubeconfig"
    for flag in SHARED_FLAGS:
        dest = flag.removeprefix("--").replace("-", "_")
        if getattr(args, dest) is not None or (value := from_environment(flag, env)) is None:
            continue
        text, names = value
        if flag in ("--kubeconfig", "--context") and not text.strip():
            continue  # empty: unset, as the controller reads it
        if flag == "--kubeconfig":
            kubeconfig_names = names
            setattr(args, dest, Path(text.strip()).expanduser())
        else:
            setattr(args, dest, text)
    if args.controller_namespace is None or not args.controller_namespace.strip():
        args.controller_namespace = DEFAULT_CONTROLLER_NAMESPACE
    if args.kubeconfig is not None:
        try:
            check_readable(args.kubeconfig, kubeconfig_names)
        except ConfigError as error:
            raise CommandError(f"cannot load the Kubernetes configuration: {error}") from None


def check_output(args: argparse.Namespace) -> None:
    """--json is -o json; beside another -o it is a contradiction."""
    if args.json and args.output not in (None, "json"):
        raise CommandError(f"--json and -o {args.output} ask for two formats: give one")


def _output(args: argparse.Namespace) -> str | None:
    """json, yaml, or None for the table."""
    return "json" if args.json else args.output


def _colour(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def _rollout_timeout(args: argparse.Namespace) -> timedelta | None:
    if args.rollout_timeout is None:
        return None
    try:
        value = parse_go_duration(args.rollout_timeout)
    except ValueError as error:
        raise CommandError(f"--rollout-timeout: {error}") from None
    if value <= timedelta(0):
        raise CommandError("--rollout-timeout must be positive")
    return value


def _client(args: argparse.Namespace) -> tuple[AsyncClient, str]:
    """The client, and the API server's address for error messages."""
    try:
        server = str(load_config(args.kubeconfig, args.context).cluster.server)
        return create_client(args.kubeconfig, args.context), server
    except (KubeConfigError, OSError, ValueError, KeyError) as error:
        raise CommandError(f"cannot load the Kubernetes configuration: {error}") from None


async def _settings(api: RawApi, args: argparse.Namespace) -> ControllerSettings:
    namespace = args.controller_namespace
    return controller_settings(
        await gather.controller_deployment(api, namespace),
        namespace,
        rollout_timeout=_rollout_timeout(args),
        enabled_annotation=args.enabled_annotation,
    )


async def _plan(api: RawApi, args: argparse.Namespace) -> int:
    settings = await _settings(api, args)
    state = await gather.node_state(
        api, args.node, settings.webhook_configuration, args.webhook_address
    )
    plan = plan_node(state, settings.decision, utc_now())
    if (output := _output(args)) is not None:
        print(document_text(plan_document(plan, settings.source), output))
    else:
        print(plan_table(plan, settings.source, colour=_colour(sys.stdout)))
    return plan.exit_code


async def _status(api: RawApi, args: argparse.Namespace) -> int:
    settings = await _settings(api, args)
    state = await gather.status_state(
        api,
        controller_namespace=settings.namespace,
        lease_name=settings.lease_name,
        leader_elect=settings.leader_elect,
        webhook_configuration=settings.webhook_configuration,
        webhook_address=args.webhook_address,
    )
    status = build_status(state, settings.decision, utc_now())
    if (output := _output(args)) is not None:
        print(document_text(status_document(status, settings.source), output))
    else:
        print(status_table(status, settings.source, colour=_colour(sys.stdout)))
    return status.exit_code


async def _with_client(
    args: argparse.Namespace, body: Callable[[RawApi, argparse.Namespace], Awaitable[int]]
) -> int:
    client, server = _client(args)
    try:
        return await body(RawApi(client), args)
    except ApiError as error:
        hint = ""
        if http_status(error) == HTTP_FORBIDDEN:
            hint = " (bind the read-only ClusterRole in deploy/cli/ to this user)"
        raise CommandError(f"the API server refused a read: {error_detail(error)}{hint}") from None
    except httpx2.HTTPError as error:
        raise CommandError(
            f"cannot reach the Kubernetes API server at {server}: {error_detail(error)}"
        ) from None
    finally:
        await client.close()


def _run(name: str, args: argparse.Namespace, body: Callable[..., Awaitable[int]]) -> int:
    try:
        check_output(args)
        apply_environment(args, os.environ)
        return asyncio.run(_with_client(args, body))
    except (CommandError, gather.UnknownNode) as error:
        print(f"graceful-drain {name}: error: {error}", file=sys.stderr)
        return EXIT_ERROR


def run_plan(args: argparse.Namespace) -> int:
    return _run("plan", args, _plan)


def run_status(args: argparse.Namespace) -> int:
    return _run("status", args, _status)
