"""The Deployment's flags and GRACEFUL_DRAIN_* variables are ones the controller accepts.

Runs against graceful_drain.config when it is importable (it lands with the webhook
branch); until then it is skipped, and the flags in use are listed in docs/install.md.
"""

from __future__ import annotations

import importlib
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

from graceful_drain.errors import ConfigError
from tests.unit.deploy.rendered import (
    CERT_MANAGER,
    SELF_SIGNED,
    Variant,
    by_variant,
    container_port,
    controller_container,
    literal_env,
    objects,
    one,
)

IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
NOT_A_VALUE = "not a valid value!"


def _config_module() -> ModuleType:
    return _module_or_skip("graceful_drain.config")


def _argv_and_env(variant: Variant) -> tuple[list[str], dict[str, str]]:
    container = controller_container(objects(variant))
    assert container["command"] == ["graceful-drain", "controller"]
    return list(container["args"]), {**IN_CLUSTER, **literal_env(container)}


@by_variant
def test_controller_parses_the_shipped_configuration(variant: Variant) -> None:
    config_module = _config_module()
    argv, env = _argv_and_env(variant)
    config = config_module.parse_controller_config(argv, env)
    container = controller_container(objects(variant))
    assert config.webhook_port == container_port(container, "webhook")
    assert config.metrics_port == container_port(container, "metrics")
    assert config.rollout_timeout == timedelta(minutes=10)
    assert config.leader_elect is True
    assert config.log_format == "json"
    assert config.self_signed is variant.self_signed
    if variant is CERT_MANAGER:
        mounts = {m["mountPath"] for m in container["volumeMounts"] if m.get("readOnly")}
        assert {Path(config.tls_cert_file).parent, Path(config.tls_key_file).parent} == {
            Path(mount) for mount in mounts
        }
    else:
        assert config.tls_cert_file is None


@pytest.mark.parametrize(
    "variable", sorted(literal_env(controller_container(objects(SELF_SIGNED))))
)
def test_every_variable_in_the_manifest_is_read(variable: str) -> None:
    # A variable the controller does not know would be ignored silently: a bad value in a
    # known one is a ConfigError naming it.
    config_module = _config_module()
    argv, env = _argv_and_env(SELF_SIGNED)
    with pytest.raises(ConfigError, match=variable):
        config_module.parse_controller_config(argv, {**env, variable: NOT_A_VALUE})


def _module_or_skip(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        pytest.skip(f"{name} is not on this branch yet")


def test_webhook_configuration_calls_the_handler_path() -> None:
    webhook_module = _module_or_skip("graceful_drain.controller.serving.webhook")
    configuration = one(objects(SELF_SIGNED), "ValidatingWebhookConfiguration")
    path = configuration["webhooks"][0]["clientConfig"]["service"]["path"]
    assert path == webhook_module.WEBHOOK_PATH


def test_grace_period_covers_pre_stop_and_in_flight_requests() -> None:
    app_module = _module_or_skip("graceful_drain.controller.app")
    pod = one(objects(SELF_SIGNED), "Deployment")["spec"]["template"]["spec"]
    pre_stop = int(pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod["terminationGracePeriodSeconds"] > pre_stop + app_module.SHUTDOWN_TIMEOUT_SECONDS
