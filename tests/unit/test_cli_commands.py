"""The command line as a user meets it, each as its own process: shell completion, the kubectl
plugin's own face, `plan`/`status` reading the controller's GRACEFUL_DRAIN_* variables and
$KUBECONFIG, `kubesim --version`, and a subcommand's usage on a subcommand's error."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain import __version__
from graceful_drain.inspection.commands import SHARED_FLAGS, CommandError, apply_environment
from graceful_drain.inspection.settings import DEFAULT_CONTROLLER_NAMESPACE

BIN = Path(sys.executable).parent  # the console scripts pip installed beside this Python
TIMEOUT = 60
EXIT_ERROR = 3  # plan and status (docs/cli.md)


def command(
    *argv: str, env: Mapping[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`argv` run with this environment less every GRACEFUL_DRAIN_* and KUBECONFIG, plus `env`;
    the venv's console scripts first on PATH."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("GRACEFUL_DRAIN_") and k != "KUBECONFIG"}  # fmt: skip
    base["PATH"] = f"{BIN}{os.pathsep}{base.get('PATH', '')}"
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=TIMEOUT, check=False, input=stdin,
        env={**base, **(env or {})},
    )  # fmt: skip


@pytest.mark.parametrize("subcommand", ["plan node-a", "status"])
def test_graceful_drain_kubeconfig_names_the_file_in_the_error(subcommand: str) -> None:
    result = command("graceful-drain", *subcommand.split(),
                     env={"GRACEFUL_DRAIN_KUBECONFIG": "/nonexistent"})  # fmt: skip
    assert result.returncode == EXIT_ERROR
    assert result.stderr == (
        f"graceful-drain {subcommand.split()[0]}: error: cannot load the Kubernetes "
        "configuration: invalid value for --kubeconfig (GRACEFUL_DRAIN_KUBECONFIG): cannot read "
        "/nonexistent (No such file or directory)\n"
    )


def test_the_flag_wins_over_the_variable_and_kubeconfig_is_read_too() -> None:
    flag = command("graceful-drain", "plan", "node-a", "--kubeconfig", "/from-flag",
                   env={"GRACEFUL_DRAIN_KUBECONFIG": "/from-variable"})  # fmt: skip
    assert flag.returncode == EXIT_ERROR
    assert "/from-flag" in flag.stderr and "/from-variable" not in flag.stderr
    kubeconfig = command("graceful-drain", "status", env={"KUBECONFIG": "/from-kubeconfig"})
    assert kubeconfig.returncode == EXIT_ERROR
    assert "/from-kubeconfig" in kubeconfig.stderr


@pytest.mark.parametrize(
    ("argv", "code", "usage"),
    [
        ("graceful-drain status --bogus", 3, "usage: graceful-drain status"),
        ("graceful-drain plan node-a --bogus", 3, "usage: graceful-drain plan"),
        ("graceful-drain plan", 3, "usage: graceful-drain plan"),
        ("graceful-drain controller --bogus", 2, "usage: graceful-drain controller"),
        ("graceful-drain completion tcsh", 2, "usage: graceful-drain completion"),
        ("kubectl-graceful_drain plan node-a --bogus", 3, "usage: kubectl graceful-drain plan"),
    ],
)
def test_a_subcommand_error_prints_the_subcommands_usage(argv: str, code: int, usage: str) -> None:
    result = command(*argv.split())
    assert result.returncode == code
    assert result.stderr.startswith(usage), result.stderr
    assert result.stdout == ""


def test_bash_completion_is_a_valid_script_completing_the_subcommands() -> None:
    result = command("graceful-drain", "completion", "bash")
    assert result.returncode == 0, result.stderr
    checked = command("bash", "-n", stdin=result.stdout)
    assert checked.returncode == 0, checked.stderr
    for name in ("controller", "termination-cause", "demo", "plan", "status", "completion",
                 "--rollout-timeout", "--webhook-address"):  # fmt: skip
        assert name in result.stdout
    # Sourced, it completes `graceful-drain pl` to `plan`.
    completed = command("bash", "-c", result.stdout + "\nCOMP_WORDS=(graceful-drain pl); "
                        "COMP_CWORD=1; COMP_LINE='graceful-drain pl'; COMP_POINT=17; "
                        "_shtab_graceful_drain; printf '%s\\n' \"${COMPREPLY[@]}\"")  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["plan"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion(shell: str) -> None:
    result = command("graceful-drain", "completion", shell)
    assert result.returncode == 0, result.stderr
    assert "status" in result.stdout and "--webhook-address" in result.stdout
    if shutil.which(shell) is None:
        return  # the shell is not installed here: its syntax check cannot run
    checked = command(shell, "-n", stdin=result.stdout)
    assert checked.returncode == 0, checked.stderr


def test_kubectl_plugin_names_itself_and_offers_plan_status_and_version_only() -> None:
    helped = command("kubectl", "graceful-drain", "--help")  # kubectl finds it on PATH
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: kubectl graceful-drain ")
    assert "kubectl plugin" in helped.stdout
    offered = command("kubectl-graceful_drain", "x").stderr
    assert offered.endswith("(choose from 'plan', 'status', 'version')\n"), offered
    refused = command("kubectl-graceful_drain", "controller")
    assert refused.returncode == 2
    assert "invalid choice: 'controller'" in refused.stderr
    plan_help = command("kubectl-graceful_drain", "plan", "--help")
    assert plan_help.stdout.startswith("usage: kubectl graceful-drain plan ")
    version = command("kubectl-graceful_drain", "version")
    assert (version.returncode, version.stdout) == (0, f"kubectl graceful-drain {__version__}\n")


def test_kubesim_version_exits_zero() -> None:
    result = command("kubesim", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("kubesim ")


# apply_environment, the pure part: the controller's variables fill the flags not given.
DESTS = {flag: flag.removeprefix("--").replace("-", "_") for flag in SHARED_FLAGS}
VARIABLES = {flag: "GRACEFUL_DRAIN_" + dest.upper() for flag, dest in DESTS.items()}
TEXT = st.text(alphabet="abc-", min_size=1, max_size=5)


def namespace_of(given: Mapping[str, str | None]) -> argparse.Namespace:
    return argparse.Namespace(**{dest: given.get(flag) for flag, dest in DESTS.items()})


@given(
    flags=st.dictionaries(st.sampled_from([f for f in SHARED_FLAGS if f != "--kubeconfig"]), TEXT),
    env=st.dictionaries(st.sampled_from([f for f in SHARED_FLAGS if f != "--kubeconfig"]), TEXT),
)
def test_a_flag_wins_else_the_variable_else_the_default(
    flags: dict[str, str], env: dict[str, str]
) -> None:
    args = namespace_of(flags)
    apply_environment(args, {VARIABLES[flag]: value for flag, value in env.items()})
    for flag, dest in DESTS.items():
        expected = flags.get(flag, env.get(flag))
        if flag == "--controller-namespace" and expected is None:
            expected = DEFAULT_CONTROLLER_NAMESPACE
        assert getattr(args, dest) == expected, flag


@pytest.mark.parametrize(
    ("env", "kubeconfig", "context"),
    [
        ({}, None, None),
        ({"GRACEFUL_DRAIN_KUBECONFIG": "", "GRACEFUL_DRAIN_CONTEXT": "  "}, None, None),
        ({"GRACEFUL_DRAIN_CONTEXT": "prod"}, None, "prod"),
    ],
)
def test_empty_kubeconfig_and_context_variables_are_unset(
    env: dict[str, str], kubeconfig: Path | None, context: str | None
) -> None:
    args = namespace_of({})
    apply_environment(args, env)
    assert (args.kubeconfig, args.context) == (kubeconfig, context)


def test_a_readable_kubeconfig_variable_is_taken_an_unreadable_one_refused(
    tmp_path: Path,
) -> None:
    readable = tmp_path / "config"
    readable.write_text("apiVersion: v1\n")
    args = namespace_of({})
    apply_environment(args, {"GRACEFUL_DRAIN_KUBECONFIG": str(readable)})
    assert args.kubeconfig == readable
    with pytest.raises(CommandError, match=r"GRACEFUL_DRAIN_KUBECONFIG.*cannot read /nope"):
        apply_environment(namespace_of({}), {"GRACEFUL_DRAIN_KUBECONFIG": "/nope"})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ("plan node-a -o xml", "argument -o/--output: invalid choice: 'xml'"),
        ("status --json -o yaml", "--json and -o yaml ask for two formats: give one"),
    ],
)  # fmt: skip
def test_an_output_format_other_than_json_or_yaml_is_refused(argv: str, message: str) -> None:
    result = command("graceful-drain", *argv.split(), env={"KUBECONFIG": "/nonexistent"})
    assert result.returncode == EXIT_ERROR
    assert message in result.stderr
    assert result.stdout == ""


def kubectl_complete(*words: str) -> subprocess.CompletedProcess[str]:
    """`kubectl __complete graceful-drain WORDS`: what kubectl's shell completion asks, with
    kubectl-graceful_drain and kubectl_complete-graceful_drain on PATH (pip's scripts)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH")
    return command(kubectl, "__complete", "graceful-drain", *words)


@pytest.mark.parametrize(
    ("words", "completions", "directive"),
    [
        (["pl"], ["plan"], 4),
        ([""], ["plan", "status", "version"], 4),
        (["plan", "node-a", "-o", ""], ["json", "yaml"], 4),
        (["status", "-o", "y"], ["yaml"], 4),
        (["status", "--output=j"], ["--output=json"], 4),
        (["status", "--out"], ["--output"], 4),
        (["plan", "node-a", "--kubeconfig", ""], [], 0),  # the shell completes file names
        (["plan", ""], [], 4),  # NODE: nothing, and no file names
    ],
)  # fmt: skip
def test_kubectl_completes_the_plugin_through_its_completion_executable(
    words: list[str], completions: list[str], directive: int
) -> None:
    result = kubectl_complete(*words)
    assert result.returncode == 0, result.stderr
    *lines, last = result.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == completions
    assert last == f":{directive}"
    assert "About to call: " in result.stderr  # kubectl found and ran the executable


def test_the_plugin_answers_cobras_complete_command_as_the_executable_does() -> None:
    words = ["plan", "node-a", "-o", ""]
    direct = command("kubectl-graceful_drain", "__complete", *words)
    executable = command("kubectl_complete-graceful_drain", *words)
    assert direct.returncode == executable.returncode == 0
    assert direct.stdout == executable.stdout == "json\nyaml\n:4\n"
