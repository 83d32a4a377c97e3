"""`graceful-drain <subcommand>`: every subcommand registers the same way.

Adding one: write `configure(parser)` and `run(args) -> exit code`, and append a
`Subcommand` to SUBCOMMANDS.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graceful_drain.termination import cli as termination_cli

PROG = "graceful-drain"


@dataclass(frozen=True, slots=True)
class Subcommand:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


SUBCOMMANDS: list[Subcommand] = [
    Subcommand(
        termination_cli.NAME,
        termination_cli.HELP,
        termination_cli.configure,
        termination_cli.run,
    ),
]


def build_parser(subcommands: Sequence[Subcommand] = SUBCOMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Keep single-replica Deployments available while nodes are drained.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for subcommand in subcommands:
        sub = commands.add_parser(subcommand.name, help=subcommand.help)
        subcommand.configure(sub)
        sub.set_defaults(_subcommand=subcommand)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    subcommand: Subcommand = args._subcommand
    try:
        return subcommand.run(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
