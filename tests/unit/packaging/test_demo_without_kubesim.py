"""`graceful-drain demo` where kubesim is not installed: one line saying what to install."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _without_kubesim() -> dict[str, str]:
    """An environment whose Python finds the product and its dependencies but not kubesim.

    `-S` skips site-packages' .pth files, so the editable installs (kubesim's and the
    product's) are not on the path; the product comes from src/ and its dependencies from
    site-packages, which holds no kubesim of its own.
    """
    site_packages = sysconfig.get_paths()["purelib"]
    assert not (Path(site_packages) / "kubesim").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), site_packages])
    return env


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", *args], env=_without_kubesim(), capture_output=True, text=True,
        timeout=120, cwd=REPO / "tests",
    )  # fmt: skip


def test_kubesim_is_really_missing_there() -> None:
    probe = _run("-c", "import graceful_drain.cli, importlib.util as u; "
                       "print(u.find_spec('kubesim') is None)")  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "True"


def test_the_demo_says_in_one_line_what_to_install_and_fails() -> None:
    demo = _run("-m", "graceful_drain.cli", "demo")
    assert demo.returncode != 0
    assert demo.stdout == ""
    lines = demo.stderr.splitlines()
    assert len(lines) == 1, demo.stderr
    assert "kubesim" in lines[0]
    assert "pip install 'graceful-drain[demo]'" in lines[0]


def test_the_rest_of_the_cli_works_without_kubesim() -> None:
    help_ = _run("-m", "graceful_drain.cli", "--help")
    assert help_.returncode == 0, help_.stderr
    assert "demo" in help_.stdout
