"""docs/install.md's configuration reference names every flag the controller accepts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from graceful_drain.config import add_controller_arguments

INSTALL_DOC = Path(__file__).parents[3] / "docs" / "install.md"


def _controller_flags() -> set[str]:
    parser = argparse.ArgumentParser()
    add_controller_arguments(parser)
    return {opt for action in parser._actions for opt in action.option_strings} - {"-h", "--help"}


def test_configuration_reference_lists_every_flag_and_its_variable() -> None:
    text = INSTALL_DOC.read_text()
    documented = set(re.findall(r"^\| `(--[a-z-]+)` \| `(GRACEFUL_DRAIN_[A-Z_]+)`", text, re.M))
    assert {flag for flag, _ in documented} == _controller_flags()
    for flag, variable in documented:
        assert variable == "GRACEFUL_DRAIN_" + flag[2:].upper().replace("-", "_")
