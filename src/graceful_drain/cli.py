"""`graceful-drain <subcommand>`: controller, termination-cause, demo, plan, status and
completion.

Also installed as `kubectl-graceful_drain`, so `kubectl graceful-drain plan NODE` works: the
plugin offers only what an operator runs from a workstation (PLUGIN_SUBCOMMANDS).

Adding one: write `configure(parser)` and `run(args) -> exit code`, and append a `Subcommand`
to SUBCOMMANDS. A ConfigError raised by `run` is printed as `graceful-drain NAME: error: ...`
and exits 2, like argparse's own usage errors.

Start-up is kept light (the termination-cause detector runs inside a pod's grace period):
`main` configures only the subcommand it runs (none for `--help` and `--version`), and each
subcommand imports what it needs when it is configured or run, never at this module's
import (tests/unit/test_import_graph.py holds it).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from graceful_drain import completion, termination
from graceful_drain.errors import ConfigError

PROG = "graceful-drain"
PLUGIN_PROG = "kubectl graceful-drain"


class Subcommand(NamedTuple):
    """A sub-command: its name and help line, and the functions that add its arguments and
    run it (loaded only when it is the one asked for)."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


EXIT_CONFIG_ERROR = 2  # as graceful_drain.config's, which this module does not import


def _version() -> str:
    from graceful_drain import __version__  # read on first use

    return __version__


class _VersionAction(argparse._VersionAction):
    """argparse's "version" action, with the version read only when asked for."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser._print_message(f"{parser.prog} {_version()}\n", sys.stdout)
        parser.exit()


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's own, as wide as `shutil.get_terminal_size` says, without importing shutil:
    argparse sizes a formatter at every `add_argument`, and shutil loads bz2 and lzma,
    milliseconds at each start-up (the detector's, inside a grace period, too)."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = _terminal_columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


def _terminal_columns(fallback: int = 80) -> int:
    """shutil.get_terminal_size's columns: $COLUMNS, else stdout's terminal, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else fallback


def _add_controller_arguments(parser: argparse.ArgumentParser) -> None:
    from graceful_drain.config import add_controller_arguments  # the controller's settings

    add_controller_arguments(parser)


def _run_controller(args: argparse.Namespace) -> int:
    from graceful_drain.config import check_files, resolve

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
    import importlib.util  # only for the demo

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


def _configure_termination_cause(parser: argparse.ArgumentParser) -> None:
    from graceful_drain.termination import cli  # the detector, loaded only to run it

    cli.configure(parser)


def _run_termination_cause(args: argparse.Namespace) -> int:
    from graceful_drain.termination import cli

    return cli.run_process(args)


def _run_completion(args: argparse.Namespace) -> int:
    print(completion.script(build_parser(), args.shell), end="")
    return 0


def _run_version(args: argparse.Namespace) -> int:
    print(f"{PLUGIN_PROG} {_version()}")
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
        _add_controller_arguments,
        _run_controller,
    ),
    Subcommand(
        termination.COMMAND,
        termination.COMMAND_HELP,
        _configure_termination_cause,
        _run_termination_cause,
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


ALL = object()  # build_parser(only=ALL): configure every subcommand


def build_parser(
    subcommands: Sequence[Subcommand] = SUBCOMMANDS,
    prog: str = PROG,
    description: str = "Node drains never take the last Ready pod of a Deployment.",
    *,
    only: object = ALL,
) -> argparse.ArgumentParser:
    """The parser; ``only`` (a subcommand's name, or None for none) has just that subcommand,
    so that running one builds and imports nothing the others need (``None`` and ``ALL``:
    every subcommand listed, for ``--help``; ``ALL`` configures them all)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=_HelpFormatter
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for subcommand in subcommands:
        if only not in (ALL, None, subcommand.name):
            continue
        sub = commands.add_parser(
            subcommand.name, help=subcommand.help, formatter_class=_HelpFormatter
        )
        if only is ALL or only == subcommand.name:
            subcommand.configure(sub)
        sub.set_defaults(_subcommand=subcommand, _parser=sub)
    return parser


def _chosen(argv: Sequence[str], subcommands: Sequence[Subcommand]) -> str | None:
    """The subcommand `argv` runs (its first word), or None (``--help``, ``--version``)."""
    names = {subcommand.name for subcommand in subcommands}
    return argv[0] if argv and argv[0] in names else None


def main(
    argv: Sequence[str] | None = None, *, parser: argparse.ArgumentParser | None = None
) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    chosen = _chosen(arguments, SUBCOMMANDS)
    with _cyclic_gc_paused(parser is None and chosen == termination.COMMAND):
        parser = parser or build_parser(only=chosen)
        args, unknown = parser.parse_known_args(arguments)
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


@contextlib.contextmanager
def _cyclic_gc_paused(paused: bool) -> Iterator[None]:
    """The detector's command line is a short process inside a pod's grace period: its imports
    make tens of thousands of objects, which the cyclic garbage collector would walk several
    times before the verdict is out, while reference counting frees what a detection makes.
    It runs with the collector paused (restored after, for a caller in the same process; the
    command's own process ends with os._exit)."""
    if not paused or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def plugin_parser() -> argparse.ArgumentParser:
    return build_parser(PLUGIN_SUBCOMMANDS, PLUGIN_PROG, PLUGIN_DESCRIPTION)


# `kubectl-graceful_drain __complete WORDS`: what kubectl_complete-graceful_drain runs (Cobra's
# hidden command of the same name, so one file serves both).
COMPLETE_COMMAND = "__complete"


def kubectl_plugin_main() -> int:
    """`kubectl-graceful_drain`: kubectl runs it for `kubectl graceful-drain ARGS`."""
    arguments = sys.argv[1:]
    if arguments[:1] == [COMPLETE_COMMAND]:
        print(completion.kubectl_completions(plugin_parser(), arguments[1:]), end="")
        return 0
    parser = build_parser(
        PLUGIN_SUBCOMMANDS, PLUGIN_PROG, PLUGIN_DESCRIPTION,
        only=_chosen(arguments, PLUGIN_SUBCOMMANDS),
    )  # fmt: skip
    return main(arguments, parser=parser)


def kubectl_complete_main() -> int:
    """`kubectl_complete-graceful_drain WORDS`: kubectl (1.26+) runs it for
    `kubectl graceful-drain WORDS<TAB>` (docs/cli.md)."""
    print(completion.kubectl_completions(plugin_parser(), sys.argv[1:]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
