"""Where plan/status get the controller's configuration, and how they fail on bad input."""

from __future__ import annotations

import socket
from datetime import timedelta
from pathlib import Path

import pytest

from graceful_drain.cli import main
from graceful_drain.inspection.selectors import selector_matches
from graceful_drain.inspection.settings import controller_settings
from tests.unit.deploy.rendered import SELF_SIGNED, objects


def test_the_installed_controllers_configuration_is_read_from_its_deployment() -> None:
    [deployment] = [o for o in objects(SELF_SIGNED) if o["kind"] == "Deployment"]
    settings = controller_settings(deployment, "graceful-drain")
    assert settings.decision.rollout_timeout == timedelta(minutes=10)
    assert settings.leader_elect is True
    assert (settings.lease_name, settings.webhook_configuration) == (
        "graceful-drain", "graceful-drain",
    )  # fmt: skip
    assert settings.source == "Deployment graceful-drain/graceful-drain"
    override = controller_settings(deployment, "graceful-drain", rollout_timeout=timedelta(1))
    assert override.decision.rollout_timeout == timedelta(1)
    absent = controller_settings(None, "graceful-drain")
    assert absent.source.startswith("defaults (") and absent.leader_elect is False


def test_label_selectors() -> None:
    labels = {"app": "web", "tier": "front"}
    assert selector_matches({"matchLabels": {"app": "web"}}, labels, empty_matches_all=False)
    assert not selector_matches({"matchLabels": {"app": "db"}}, labels, empty_matches_all=True)
    expressions = [{"key": "tier", "operator": "In", "values": ["front"]},
                   {"key": "gone", "operator": "DoesNotExist"},
                   {"key": "app", "operator": "NotIn", "values": ["db"]},
                   {"key": "app", "operator": "Exists"}]  # fmt: skip
    assert selector_matches({"matchExpressions": expressions}, labels, empty_matches_all=False)
    assert selector_matches({}, labels, empty_matches_all=False)
    assert not selector_matches(None, labels, empty_matches_all=False)


def test_bad_usage_exits_3_not_2_which_means_blocked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["plan"])
    assert exited.value.code == 3
    assert "the following arguments are required: NODE" in capsys.readouterr().err


def test_an_unreachable_api_server_exits_3_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    for command in (["plan", "node-a"], ["status"]):
        assert main([*command, "--kubeconfig", str(kubeconfig)]) == 3
        error = capsys.readouterr().err
        assert f"cannot reach the Kubernetes API server at http://127.0.0.1:{port}" in error


def test_a_missing_kubeconfig_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--kubeconfig", str(tmp_path / "absent")]) == 3
    assert "cannot load the Kubernetes configuration" in capsys.readouterr().err
