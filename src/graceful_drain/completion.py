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


# --- kubectl's plugin completion (kubectl >= 1.26) ------------------------------------------
#
# For `kubectl graceful-drain ARGS <TAB>` kubectl runs `kubectl_complete-graceful_drain` from
# PATH with the words typed after the plugin's name, the last one the word being completed
# ("" for a new word), and reads one completion per line, then Cobra's `:<directive>`.

KUBECTL_COMPLETE = "kubectl_complete-graceful_drain"
DIRECTIVE_DEFAULT = 0  # cobra.ShellCompDirectiveDefault: the shell may complete file names
DIRECTIVE_NO_FILES = 4  # cobra.ShellCompDirectiveNoFileComp
# Flags whose value is a file: the shell completes it.
FILE_FLAGS = frozenset({"--kubeconfig"})


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name and choice.help:
                    return str(choice.help)
    return ""


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def _value_candidates(flag: str, action: argparse.Action) -> tuple[list[str], int]:
    if action.choices is not None:
        return [str(choice) for choice in action.choices], DIRECTIVE_NO_FILES
    return [], DIRECTIVE_DEFAULT if flag in FILE_FLAGS else DIRECTIVE_NO_FILES


def kubectl_completions(parser: argparse.ArgumentParser, words: list[str]) -> str:
    """What `kubectl_complete-graceful_drain WORDS` prints: the completions of the last word
    (subcommands, flags, a flag's choices), each `value\\tdescription` where there is one,
    then the directive line."""
    *before, current = words or [""]
    command: argparse.ArgumentParser = parser
    subcommands = _subparsers(parser)
    chosen = next((word for word in before if word in subcommands), None)
    if chosen is not None:
        command = subcommands[chosen]
    options = _options(command)
    lines: list[str]
    directive = DIRECTIVE_NO_FILES
    if before and before[-1] in options and _takes_value(options[before[-1]]) and (
        not current.startswith("-")
    ):  # fmt: skip
        values, directive = _value_candidates(before[-1], options[before[-1]])
        lines = [value for value in values if value.startswith(current)]
    elif current.startswith("--") and "=" in current:
        flag, _, prefix = current.partition("=")
        action = options.get(flag)
        values, directive = ([], DIRECTIVE_NO_FILES) if action is None else (
            _value_candidates(flag, action))  # fmt: skip
        lines = [f"{flag}={value}" for value in values if value.startswith(prefix)]
    elif current.startswith("-"):
        lines = [
            f"{flag}\t{action.help}" if action.help else flag
            for flag, action in options.items()
            if flag.startswith(current) and action.help != argparse.SUPPRESS
        ]
    elif chosen is None:
        lines = [
            f"{name}\t{_help(parser, name)}" if _help(parser, name) else name
            for name in subcommands
            if name.startswith(current)
        ]
    else:
        lines = []  # a positional (plan's NODE): nothing to offer, and no file names
    return "".join(f"{line}\n" for line in lines) + f":{directive}\n"
