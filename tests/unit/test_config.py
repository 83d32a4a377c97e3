"""Controller configuration: flags, GRACEFUL_DRAIN_* variables, validation, exit code 2."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceful_drain.cli import main
from graceful_drain.config import check_files, parse_controller_config
from graceful_drain.controller.decision.table import Protect
from graceful_drain.controller.settings import ControllerConfig
from graceful_drain.errors import ConfigError
from graceful_drain.kube.timefmt import format_go_duration, parse_go_duration

TLS = ["--tls-cert-file", "/tls/tls.crt", "--tls-key-file", "/tls/tls.key"]


def parse(*argv: str, env: dict[str, str] | None = None) -> ControllerConfig:
    return parse_controller_config([*TLS, *argv], env or {})


def test_defaults_outside_a_cluster() -> None:
    config = parse()
    assert config == ControllerConfig(
        tls_cert_file=Path("/tls/tls.crt"), tls_key_file=Path("/tls/tls.key")
    )
    assert config.rollout_timeout == timedelta(minutes=10)
    assert (config.webhook_port, config.metrics_port) == (8443, 8080)
    assert config.log_format == "console"
    assert config.namespaces is None


def test_logs_are_json_by_default_in_a_cluster() -> None:
    assert parse(env={"KUBERNETES_SERVICE_HOST": "10.0.0.1"}).log_format == "json"


@pytest.mark.parametrize(
    ("argv", "env", "field", "expected"),
    [
        (["--rollout-timeout", "90s"], {}, "rollout_timeout", timedelta(seconds=90)),
        ([], {"GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": "1h30m"}, "rollout_timeout", timedelta(hours=1.5)),
        (  # the flag wins over the variable
            ["--rollout-timeout", "2m"],
            {"GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": "5m"},
            "rollout_timeout",
            timedelta(minutes=2),
        ),
        (
            ["--enabled-annotation", "graceful-drain.stonal.com/enabled"],
            {},
            "enabled_annotation",
            "graceful-drain.stonal.com/enabled",
        ),
        ([], {"GRACEFUL_DRAIN_ENABLED_ANNOTATION": ""}, "enabled_annotation", None),
        (["--namespaces", "a, b,a"], {}, "namespaces", ("a", "b")),
        ([], {"GRACEFUL_DRAIN_NAMESPACES": ""}, "namespaces", None),
        (["--webhook-port", "9443"], {}, "webhook_port", 9443),
        ([], {"GRACEFUL_DRAIN_METRICS_PORT": "9090"}, "metrics_port", 9090),
        (["--log-format", "JSON"], {}, "log_format", "json"),
        ([], {"GRACEFUL_DRAIN_LOG_LEVEL": "debug"}, "log_level", "debug"),
        (["--leader-elect"], {}, "leader_elect", True),
        ([], {"GRACEFUL_DRAIN_LEADER_ELECT": "yes"}, "leader_elect", True),
        ([], {"GRACEFUL_DRAIN_LEADER_ELECT": "false"}, "leader_elect", False),
        (["--kubeconfig", "/k/config"], {}, "kubeconfig", Path("/k/config")),
        (["--context", "kind"], {}, "kube_context", "kind"),
        (["--tls-reload-interval", "500ms"], {}, "tls_reload_interval", timedelta(seconds=0.5)),
        ([], {}, "protect", "last-ready"),
        (["--protect", "single-replica"], {}, "protect", "single-replica"),
        ([], {"GRACEFUL_DRAIN_PROTECT": "Single-Replica"}, "protect", "single-replica"),
        (
            ["--protect=last-ready"],
            {"GRACEFUL_DRAIN_PROTECT": "single-replica"},
            "protect",
            "last-ready",
        ),
    ],
)
def test_values_from_flags_and_variables(
    argv: list[str], env: dict[str, str], field: str, expected: object
) -> None:
    assert getattr(parse(*argv, env=env), field) == expected


@pytest.mark.parametrize(
    ("argv", "env", "names"),
    [
        (["--rollout-timeout", "10"], {}, "--rollout-timeout (GRACEFUL_DRAIN_ROLLOUT_TIMEOUT)"),
        ([], {"GRACEFUL_DRAIN_ROLLOUT_TIMEOUT": "ten minutes"}, "GRACEFUL_DRAIN_ROLLOUT_TIMEOUT"),
        (["--rollout-timeout", "0s"], {}, "--rollout-timeout"),
        (["--rollout-timeout=-5m"], {}, "--rollout-timeout"),
        (["--webhook-port", "http"], {}, "--webhook-port (GRACEFUL_DRAIN_WEBHOOK_PORT)"),
        ([], {"GRACEFUL_DRAIN_METRICS_PORT": "70000"}, "GRACEFUL_DRAIN_METRICS_PORT"),
        (["--webhook-port", "8080"], {}, "--metrics-port"),  # clashes with the metrics port
        (["--enabled-annotation", "not a key"], {}, "--enabled-annotation"),
        (["--enabled-annotation", "Bad_Prefix/x"], {}, "--enabled-annotation"),
        (["--namespaces", "ok,Not_OK"], {}, "--namespaces (GRACEFUL_DRAIN_NAMESPACES)"),
        (["--log-format", "xml"], {}, "--log-format (GRACEFUL_DRAIN_LOG_FORMAT)"),
        ([], {"GRACEFUL_DRAIN_LOG_LEVEL": "verbose"}, "GRACEFUL_DRAIN_LOG_LEVEL"),
        ([], {"GRACEFUL_DRAIN_LEADER_ELECT": "maybe"}, "GRACEFUL_DRAIN_LEADER_ELECT"),
        (["--self-signed"], {}, "--self-signed"),  # together with the TLS files
        (["--tls-reload-interval", "1ms"], {}, "--tls-reload-interval"),
        (["--protect", "replicas"], {}, "--protect (GRACEFUL_DRAIN_PROTECT)"),
        ([], {"GRACEFUL_DRAIN_PROTECT": "all"}, "GRACEFUL_DRAIN_PROTECT"),
    ],
)
def test_bad_values_name_the_flag_and_the_variable(
    argv: list[str], env: dict[str, str], names: str
) -> None:
    with pytest.raises(ConfigError, match=names.replace("(", r"\(").replace(")", r"\)")):
        parse(*argv, env=env)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "needs TLS"),
        (["--tls-cert-file", "/c"], r"missing --tls-key-file"),
        (["--tls-key-file", "/k"], r"missing --tls-cert-file"),
    ],
)
def test_tls_is_required_as_a_pair_or_self_signed(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_controller_config(argv, {})


def test_self_signed_alone_is_valid() -> None:
    config = parse_controller_config([], {"GRACEFUL_DRAIN_SELF_SIGNED": "true"})
    assert config.self_signed and config.tls_cert_file is None


def test_check_files_names_the_unreadable_file(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("cert")
    config = parse_controller_config(["--tls-cert-file", str(cert), "--tls-key-file", str(key)])
    with pytest.raises(ConfigError, match=r"--tls-key-file .*tls\.key"):
        check_files(config)
    key.write_text("key")
    check_files(config)


def test_cli_exits_2_with_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller", "--rollout-timeout", "soon", *TLS]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graceful-drain controller: error: invalid value for --rollout-timeout")
    assert "GRACEFUL_DRAIN_ROLLOUT_TIMEOUT" in err


def test_cli_unknown_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["controller", "--no-such-flag"])
    assert exit_info.value.code == 2


def test_cli_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.crt")
    assert main(["controller", "--tls-cert-file", missing, "--tls-key-file", missing]) == 2
    assert "cannot read" in capsys.readouterr().err


# --- Go durations (time.ParseDuration) --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", timedelta(0)),
        ("10m", timedelta(minutes=10)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5s", timedelta(seconds=1.5)),
        (".5s", timedelta(seconds=0.5)),
        ("1.s", timedelta(seconds=1)),
        ("500ms", timedelta(milliseconds=500)),
        ("3us", timedelta(microseconds=3)),
        ("3µs", timedelta(microseconds=3)),
        ("1500ns", timedelta(microseconds=1)),
        ("+2m", timedelta(minutes=2)),
        ("-2m", -timedelta(minutes=2)),
        ("1h1m1s1ms", timedelta(hours=1, minutes=1, seconds=1, milliseconds=1)),
        ("2562047h47m16.854775807s", timedelta(microseconds=(2**63 - 1) // 1000)),
    ],
)
def test_parse_go_duration(text: str, expected: timedelta) -> None:
    assert parse_go_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "10", "m", ".s", "1d", "1h 30m", "1..5s", "--1s", "2562047h47m16.854775808s"]
)
def test_parse_go_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


@given(st.integers(min_value=0, max_value=10**7))
def test_go_duration_round_trips_whole_seconds(seconds: int) -> None:
    duration = timedelta(seconds=seconds)
    assert parse_go_duration(format_go_duration(duration)) == duration


def test_cli_self_signed_needs_no_tls_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    assert main(["controller", "--self-signed", "--kubeconfig", str(kubeconfig)]) == 2
    error = capsys.readouterr().err
    assert "cannot load the Kubernetes client configuration" in error  # past the TLS checks
    assert "--tls-cert-file" not in error


def test_cli_refuses_an_unusable_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_text("pem")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    cert, key = str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")
    tls = ["--tls-cert-file", cert, "--tls-key-file", key]
    argv = ["controller", "--kubeconfig", str(kubeconfig), "--context", "nope", *tls]
    assert main(argv) == 2
    assert "cannot load the Kubernetes client configuration" in capsys.readouterr().err


# --- the controller's own objects: Lease, self-signed Secret, webhook configuration ----------


def _manifest_name(file: str, kind: str) -> str:
    import yaml

    path = Path(__file__).parents[2] / "deploy" / file
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == kind:
            return str(doc["metadata"]["name"])
    raise AssertionError(f"no {kind} in {path}")


def test_own_object_names_default_to_the_manifests() -> None:
    config = parse()
    assert config.controller_namespace is None  # resolved in the cluster at start
    assert config.lease_name == "graceful-drain"
    assert config.service_name == _manifest_name("base/service.yaml", "Service")
    assert config.webhook_configuration == _manifest_name(
        "base/webhook.yaml", "ValidatingWebhookConfiguration"
    )
    assert config.self_signed_secret == "graceful-drain-webhook-tls"


@pytest.mark.parametrize(
    ("argv", "env", "field", "expected"),
    [
        (["--controller-namespace", "ops"], {}, "controller_namespace", "ops"),
        ([], {"POD_NAMESPACE": "from-downward-api"}, "controller_namespace", "from-downward-api"),
        (
            ["--controller-namespace", "flag"],
            {"POD_NAMESPACE": "downward"},
            "controller_namespace",
            "flag",
        ),
        ([], {"GRACEFUL_DRAIN_LEASE_NAME": "gd-leader"}, "lease_name", "gd-leader"),
        (["--service-name", "gd-webhook"], {}, "service_name", "gd-webhook"),
        (["--self-signed-secret", "gd.certs"], {}, "self_signed_secret", "gd.certs"),
        (
            ["--webhook-configuration", "gd.example.com"],
            {},
            "webhook_configuration",
            "gd.example.com",
        ),
    ],
)
def test_own_object_names_from_flags_and_variables(
    argv: list[str], env: dict[str, str], field: str, expected: object
) -> None:
    assert getattr(parse(*argv, env=env), field) == expected


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--controller-namespace", "Ops"], "--controller-namespace"),
        (["--service-name", "gd.webhook"], "--service-name"),  # a Service name is a DNS label
        (["--lease-name", "bad_"], "--lease-name"),
        (["--webhook-configuration", "a_b"], "--webhook-configuration"),
    ],
)
def test_bad_object_names_are_refused(argv: list[str], names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        parse(*argv)


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, ()),
        (["--self-signed-hosts", "127.0.0.1, ::1,webhook.example"], {},
         ("127.0.0.1", "::1", "webhook.example")),
        ([], {"GRACEFUL_DRAIN_SELF_SIGNED_HOSTS": "10.1.2.3,10.1.2.3"}, ("10.1.2.3",)),
    ],
)  # fmt: skip
def test_self_signed_hosts(argv: list[str], env: dict[str, str], expected: object) -> None:
    config = parse_controller_config(["--self-signed", *argv], env)
    assert config.self_signed_hosts == expected


@pytest.mark.parametrize("value", ["", " , ", "bad_host", "127.0.0.1,-x"])
def test_bad_self_signed_hosts_are_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="--self-signed-hosts"):
        parse_controller_config(["--self-signed", "--self-signed-hosts", value], {})


def test_self_signed_hosts_need_self_signed() -> None:
    with pytest.raises(ConfigError, match=r"--self-signed-hosts .* only .* --self-signed"):
        parse("--self-signed-hosts", "127.0.0.1")


@pytest.mark.parametrize("value", [",,", ",", " , "])
def test_a_namespaces_value_naming_no_namespace_is_an_error(value: str) -> None:
    """v2: it used to mean "every namespace", the opposite of a scoped install."""
    with pytest.raises(ConfigError, match="names no namespace"):
        parse_controller_config(["--self-signed", "--namespaces", value], {})
    with pytest.raises(ConfigError, match=r"GRACEFUL_DRAIN_NAMESPACES\): ',' names"):
        parse_controller_config(["--self-signed"], {"GRACEFUL_DRAIN_NAMESPACES": ","})


def test_protect_reaches_the_decision_config() -> None:
    assert parse().decision_config().protect is Protect.LAST_READY
    single = parse("--protect", "single-replica").decision_config()
    assert single.protect is Protect.SINGLE_REPLICA
