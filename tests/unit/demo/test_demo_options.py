"""`graceful-drain demo` flags: defaults, validation, exit code 2 with a clear message."""

from __future__ import annotations

from datetime import timedelta

import pytest

from graceful_drain.cli import build_parser, main
from graceful_drain.demo.options import DemoOptions, parse_ready_delay, resolve_demo_options
from graceful_drain.errors import ConfigError


def options(*argv: str) -> DemoOptions:
    return resolve_demo_options(build_parser().parse_args(["demo", *argv]))


def test_defaults() -> None:
    assert options() == DemoOptions(
        client="kubectl", compare=False, json=False, ready_delay=timedelta(seconds=3)
    )


def test_every_flag() -> None:
    assert options("--client", "cluster-autoscaler", "--compare", "--json",
                   "--ready-delay", "500ms") == DemoOptions(
        client="cluster-autoscaler", compare=True, json=True,
        ready_delay=timedelta(milliseconds=500),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("soon", "invalid value for --ready-delay: invalid duration 'soon'"),
        ("-1s", "must be between 0s and 20s"),
        ("1m", "must be between 0s and 20s"),
    ],
)
def test_bad_ready_delay(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_ready_delay(text)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--client", "kops"], "argument --client: invalid choice: 'kops'"),
        (["--ready-delay", "soon"], "graceful-drain demo: error: invalid value for --ready-delay"),
        (["--colour"], "unrecognized arguments: --colour"),
    ],
)
def test_bad_flags_exit_2_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["demo", *argv])
    except SystemExit as exit_:  # argparse's own usage errors
        code = int(exit_.code or 0)
    assert code == 2
    assert message in capsys.readouterr().err
