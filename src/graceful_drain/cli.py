"""`graceful-drain <subcommand>`: controller, termination-cause, demo, plan, status and
completion.

Also installed as `kubectl-graceful_drain`, so `kubectl graceful-drain plan NODE` works: the
plugin offers only what an operator runs from a workstation (PLUGIN_SUBCOMMANDS).

Adding one: write `configure(parser)` and `run(args) -> exit code`, and append a `Subcommand`
to SUBCOMMANDS. A ConfigError raised by `run` is printed as `graceful-drain NAME: error: ...`
and exits 2, like argparse's own usage errors.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graceful_drain import __version__, completion
from graceful_drain.config import EXIT_CONFIG_ERROR, add_controller_arguments, check_files, resolve
from graceful_drain.errors import ConfigError
from graceful_drain.termination import cli as termination_cli

PROG = "graceful-drain"
PLUGIN_PROG = "kubectl graceful-drain"


@dataclass(frozen=True, slots=True)
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _run_controller(args: argparse.Namespace) -> int:
    config = resolve(args, os.environ)
    check_files(config)
    from graceful_drain.controller.app import preflight, run_controller  # loads the server stack

    preflight(config)
    return run_controller(config)


def _add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    from graceful_drain.demo.options import add_demo_arguments

    add_demo_arguments(parser)


DEMO_NEEDS_KUBESIM = (
    "the demo runs on kubesim, which is not installed: pip install 'graceful-drain[demo]'"
)


def _run_demo(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("kubesim") is None:
        raise ConfigError(DEMO_NEEDS_KUBESIM)
    from graceful_drain.demo.run import run  # loads kubesim and the controller

    return run(args)


def _configure_plan(parser: argparse.ArgumentParser) -> None:
    from graceful_drain.inspection.commands import configure_plan

    configure_plan(parser)


def _configure_status(parser: argparse.ArgumentParser) -> None:
    from graceful_drain.inspection.commands import configure_status

    configure_status(parser)


def _run_plan(args: argparse.Namespace) -> int:
    from graceful_drain.inspection.commands import run_plan

    return run_plan(args)


def _run_status(args: argparse.Namespace) -> int:
    from graceful_drain.inspection.commands import run_status

    return run_status(args)


def _run_completion(args: argparse.Namespace) -> int:
    print(completion.script(build_parser(), args.shell), end="")
    return 0


def _run_version(args: argparse.Namespace) -> int:
    print(f"{PLUGIN_PROG} {__version__}")
    return 0


PLAN = Subcommand(
    "plan", "predict what draining a node would do, pod by pod", _configure_plan, _run_plan
)
STATUS = Subcommand(
    "status", "what graceful-drain holds now, recent timeouts, its health",
    _configure_status, _run_status,
)  # fmt: skip

SUBCOMMANDS: list[Subcommand] = [
    Subcommand(
        "controller",
        "run the eviction webhook controller",
        add_controller_arguments,
        _run_controller,
    ),
    Subcommand(
        termination_cli.NAME,
        termination_cli.HELP,
        termination_cli.configure,
        termination_cli.run,
    ),
    Subcommand(
        "demo",
        "drain a node of an in-process cluster, with and without the controller",
        _add_demo_arguments,
        _run_demo,
    ),
    PLAN,
    STATUS,
    Subcommand("completion", completion.HELP, completion.configure, _run_completion),
]
# `kubectl graceful-drain`: the read-only commands an operator runs against a cluster.
PLUGIN_SUBCOMMANDS: list[Subcommand] = [
    PLAN,
    STATUS,
    Subcommand("version", "print the plugin's version", lambda _parser: None, _run_version),
]
PLUGIN_DESCRIPTION = (
    "kubectl plugin of graceful-drain: predict what draining a node would do (plan) and show "
    "what the controller holds now and its health (status), read-only, with kubectl's "
    "kubeconfig ($KUBECONFIG, --kubeconfig, --context)."
)


def build_parser(
    subcommands: Sequence[Subcommand] = SUBCOMMANDS,
    prog: str = PROG,
    description: str = "Node drains never take the last Ready pod of a Deployment.",
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for subcommand in subcommands:
        sub = commands.add_parser(subcommand.name, help=subcommand.help)
        subcommand.configure(sub)
        sub.set_defaults(_subcommand=subcommand, _parser=sub)
    return parser


def main(
    argv: Sequence[str] | None = None, *, parser: argparse.ArgumentParser | None = None
) -> int:
    parser = parser or build_parser()
    args, unknown = parser.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    subcommand: Subcommand = args._subcommand
    if unknown:  # the subcommand's usage, not the top-level one (which hides its flags)
        args._parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return subcommand.run(args)
    except ConfigError as error:
        print(f"{parser.prog} {subcommand.name}: error: {error}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except KeyboardInterrupt:
        return 130


def plugin_parser() -> argparse.ArgumentParser:
    return build_parser(PLUGIN_SUBCOMMANDS, PLUGIN_PROG, PLUGIN_DESCRIPTION)


# `kubectl-graceful_drain __complete WORDS`: what kubectl_complete-graceful_drain runs (Cobra's
# hidden command of the same name, so one file serves both).
COMPLETE_COMMAND = "__complete"


def kubectl_plugin_main() -> int:
    """`kubectl-graceful_drain`: kubectl runs it for `kubectl graceful-drain ARGS`."""
    argv = sys.argv[1:]
    if argv[:1] == [COMPLETE_COMMAND]:
        print(completion.kubectl_completions(plugin_parser(), argv[1:]), end="")
        return 0
    return main(argv, parser=plugin_parser())


def kubectl_complete_main() -> int:
    """`kubectl_complete-graceful_drain WORDS`: kubectl (1.26+) runs it for
    `kubectl graceful-drain WORDS<TAB>` (docs/cli.md)."""
    print(completion.kubectl_completions(plugin_parser(), sys.argv[1:]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
