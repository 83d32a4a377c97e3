"""`graceful-drain completion SHELL`: the shell completion script of a command line, by shtab.

shtab reads the argparse parser itself, so every subcommand and flag completes as `--help`
shows it, with nothing to keep in step by hand.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "fish")
HELP = "print a shell completion script (bash, zsh or fish)"
INSTALL = {
    "bash": 'eval "$(graceful-drain completion bash)"  # in ~/.bashrc',
    "zsh": 'graceful-drain completion zsh > "${fpath[1]}/_graceful-drain"',
    "fish": "graceful-drain completion fish > ~/.config/fish/completions/graceful-drain.fish",
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = "Print the completion script of SHELL on standard output:\n" + "\n".join(
        f"  {command}" for command in INSTALL.values()
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("shell", metavar="SHELL", choices=SHELLS, help="bash, zsh or fish")


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `parser` (the whole command line) for `shell`."""
    if shell not in SHELLS:
        raise ValueError(f"no completion for {shell!r}: one of {', '.join(SHELLS)}")
    import shtab  # only here: every other command starts without it

    text: str = shtab.complete(parser, shell=shell)
    return text
