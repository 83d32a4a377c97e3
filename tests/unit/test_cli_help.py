"""The command line as a user meets it: `--version`, and every flag of every subcommand
showing what its value is (its unit) and its default in `--help` — no bare VALUE."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from graceful_drain import __version__
from graceful_drain.cli import build_parser, main
from graceful_drain.config import parse_controller_config

# What a flag's value may be called: each names the value's kind or unit.
UNITS = frozenset({
    "DURATION", "SECONDS", "PORT", "PATH", "FILE", "DIR", "ADDRESS", "HOST:PORT", "NAME",
    "NAMESPACE", "NAMESPACES", "KEY", "HOSTS", "FORMAT", "LEVEL", "CLIENT", "MODE",
})  # fmt: skip
GO_DURATION_EXAMPLE = re.compile(r"\b\d+(ms|s|m|h)\b")
TAKES_NO_VALUE = (
    argparse._StoreTrueAction, argparse._StoreConstAction, argparse._HelpAction,
    argparse._VersionAction,
)  # fmt: skip


def options() -> Iterator[tuple[str, argparse.Action]]:
    """(subcommand, action) for every optional flag of every parser, recursively."""

    def walk(parser: argparse.ArgumentParser, where: str) -> Iterator[tuple[str, argparse.Action]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{where} {name}".strip())
            elif action.option_strings and not isinstance(
                action, (argparse._HelpAction, argparse._VersionAction)
            ):
                yield where, action

    return walk(build_parser(), "")


OPTIONS = list(options())
IDS = [f"{where} {action.option_strings[-1]}" for where, action in OPTIONS]


def test_the_walk_sees_every_subcommand() -> None:
    assert {where for where, _ in OPTIONS} == {
        "controller", "termination-cause", "demo", "plan", "status",
    }  # fmt: skip


@pytest.mark.parametrize(("where", "action"), OPTIONS, ids=IDS)
def test_every_flag_shows_its_unit_and_default(where: str, action: argparse.Action) -> None:
    text = (action.help or "") % {"default": action.default}
    assert "default" in text.lower(), f"{where} {action.option_strings}: no default in {text!r}"
    if isinstance(action, TAKES_NO_VALUE):
        return
    assert action.metavar in UNITS, f"{where} {action.option_strings}: metavar {action.metavar}"
    if action.metavar == "DURATION":
        assert GO_DURATION_EXAMPLE.search(text), f"{where} {action.option_strings}: {text!r}"


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"graceful-drain {__version__}\n"


def test_the_logged_configuration_has_every_field_in_the_flags_units() -> None:
    config = parse_controller_config(
        ["--self-signed", "--namespaces", "a,b", "--rollout-timeout", "90s"], {}
    )
    fields = config.log_fields()
    assert set(fields) == set(config.__dataclass_fields__)
    assert fields["rollout_timeout"] == "1m30s"
    assert fields["namespaces"] == ["a", "b"]
    assert fields["self_signed_mount"] == "/var/run/graceful-drain/webhook-tls"
    assert fields["self_signed"] is True


def test_the_light_version_is_the_distributions() -> None:
    """graceful_drain.__version__ reads the metadata file itself (no importlib.metadata at
    start-up); it must say what importlib.metadata says."""
    import importlib.metadata

    assert __version__ == importlib.metadata.version("graceful-drain")


def test_the_command_lines_config_error_status_is_configs() -> None:
    from graceful_drain import cli, config

    assert cli.EXIT_CONFIG_ERROR == config.EXIT_CONFIG_ERROR
