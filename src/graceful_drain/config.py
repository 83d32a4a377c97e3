"""`graceful-drain controller` configuration: flags, `GRACEFUL_DRAIN_*` variables, validation.

A flag wins over its variable, which wins over the default. `parse_controller_config` is pure
(argv and environment in, `ControllerConfig` out) and raises `ConfigError` naming the flag and
the variable of the first bad value; the CLI prints it and exits 2. `check_files` is the one
step that touches the filesystem (TLS files and kubeconfig must be readable).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from graceful_drain.annotations import DEFAULT_ENABLED_ANNOTATION
from graceful_drain.controller.decision.table import Protect
from graceful_drain.controller.settings import ControllerConfig, LogFormat
from graceful_drain.errors import ConfigError
from graceful_drain.kube.names import is_dns_label, is_dns_subdomain
from graceful_drain.kube.timefmt import format_go_duration, parse_go_duration

ENV_PREFIX = "GRACEFUL_DRAIN_"
EXIT_CONFIG_ERROR = 2
IN_CLUSTER_VARIABLE = "KUBERNETES_SERVICE_HOST"
POD_NAMESPACE_VARIABLE = "POD_NAMESPACE"  # the Downward API's metadata.namespace

LOG_FORMATS: tuple[LogFormat, ...] = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")

# metav1 qualified name (apimachinery validation.IsQualifiedName): optional DNS-subdomain prefix.
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True, slots=True)
class _Option:
    flag: str  # "--rollout-timeout"
    help: str  # ends with the default, "(default ...)"
    metavar: str = ""  # what the value is (its unit): DURATION, PORT, PATH...; "" for a switch
    is_switch: bool = False

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def variable(self) -> str:
        return ENV_PREFIX + self.dest.upper()

    def names(self) -> str:
        return f"{self.flag} ({self.variable})"


_OPTIONS: tuple[_Option, ...] = (
    _Option(
        "--rollout-timeout",
        "Go duration after which a requested rollout stops holding evictions (default 10m). "
        "Keep it below Karpenter's terminationGracePeriod and Cluster Autoscaler's "
        "--max-pod-eviction-time (2m by default) so the controller gives up first.",
        metavar="DURATION",
    ),
    _Option(
        "--enabled-annotation",
        'opt-in mode: only protect Deployments whose annotation KEY is "true" (default: '
        f'every Deployment except those with {DEFAULT_ENABLED_ANNOTATION}: "false")',
        metavar="KEY",
    ),
    _Option(
        "--namespaces",
        "comma-separated namespaces to watch; evictions elsewhere are allowed (default: all)",
        metavar="NAMESPACES",
    ),
    _Option(
        "--protect",
        "last-ready: hold the eviction of a Deployment's last Ready pod outside the nodes "
        "being drained, whatever its replicas; single-replica: only Deployments with "
        "spec.replicas 1, as before v3 (default last-ready)",
        metavar="MODE",
    ),
    _Option(
        "--bind-address", "address both servers listen on (default 0.0.0.0)", metavar="ADDRESS"
    ),
    _Option("--webhook-port", "HTTPS admission webhook port (default 8443)", metavar="PORT"),
    _Option(
        "--metrics-port",
        "plain-HTTP /metrics, /healthz, /readyz port (default 8080)",
        metavar="PORT",
    ),
    _Option(
        "--tls-cert-file",
        "serving certificate (PEM), reloaded when it changes "
        "(default: none; required unless --self-signed)",
        metavar="PATH",
    ),
    _Option(
        "--tls-key-file",
        "serving key (PEM), reloaded when it changes "
        "(default: none; required unless --self-signed)",
        metavar="PATH",
    ),
    _Option(
        "--tls-reload-interval",
        "Go duration between TLS file checks (default 10s)",
        metavar="DURATION",
    ),
    _Option(
        "--self-signed",
        "keep a CA and serving certificate in a Secret and publish the caBundle (default: off)",
        is_switch=True,
    ),
    _Option(
        "--log-format",
        "json or console (default: json in a cluster, console elsewhere)",
        metavar="FORMAT",
    ),
    _Option("--log-level", "debug, info, warning or error (default info)", metavar="LEVEL"),
    _Option(
        "--leader-elect",
        "use a Lease so only one replica reconciles (default: off)",
        is_switch=True,
    ),
    _Option(
        "--controller-namespace",
        "namespace of the controller's Lease and certificate Secret (default: $POD_NAMESPACE, "
        "else the service account's namespace, else graceful-drain)",
        metavar="NAMESPACE",
    ),
    _Option(
        "--lease-name", "Lease used by --leader-elect (default graceful-drain)", metavar="NAME"
    ),
    _Option(
        "--service-name",
        "the webhook's Service, named in the --self-signed certificate "
        "(default graceful-drain-webhook)",
        metavar="NAME",
    ),
    _Option(
        "--self-signed-secret",
        "Secret keeping the --self-signed CA and certificate (default graceful-drain-webhook-tls)",
        metavar="NAME",
    ),
    _Option(
        "--self-signed-hosts",
        "comma-separated DNS names or IP addresses the --self-signed certificate also names, "
        "for a webhook registered by clientConfig.url (default: none, the Service only)",
        metavar="HOSTS",
    ),
    _Option(
        "--self-signed-mount",
        "directory where the --self-signed serving Secret is mounted (tls.crt, tls.key, "
        "ca.crt), served at start before the API server answers "
        "(default /var/run/graceful-drain/webhook-tls; absent: wait for the API server)",
        metavar="DIR",
    ),
    _Option(
        "--webhook-configuration",
        "ValidatingWebhookConfiguration that --self-signed writes its caBundle into "
        "(default graceful-drain)",
        metavar="NAME",
    ),
    _Option(
        "--kubeconfig", "kubeconfig file (default: in-cluster, then $KUBECONFIG)", metavar="PATH"
    ),
    _Option("--context", "kubeconfig context (default: the current context)", metavar="NAME"),
)


def add_controller_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare every flag. Defaults stay None so `resolve` can tell "not given" apart."""
    for option in _OPTIONS:
        text = f"{option.help} [env {option.variable}]"
        if option.is_switch:
            parser.add_argument(
                option.flag, dest=option.dest, action="store_const", const="true", help=text
            )
        else:
            parser.add_argument(option.flag, dest=option.dest, metavar=option.metavar, help=text)


def _raw_values(args: argparse.Namespace, env: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """dest -> (raw text, where it came from) for every option given by flag or variable."""
    values: dict[str, tuple[str, str]] = {}
    for option in _OPTIONS:
        flag_value = getattr(args, option.dest, None)
        if flag_value is not None:
            values[option.dest] = (flag_value, option.names())
        elif option.variable in env:
            values[option.dest] = (env[option.variable], option.names())
    return values


def _duration(text: str, names: str, *, minimum: timedelta) -> timedelta:
    try:
        value = parse_go_duration(text.strip())
    except ValueError as error:
        raise ConfigError(f"invalid value for {names}: {error} (expected e.g. 10m, 90s)") from None
    if value < minimum:
        raise ConfigError(
            f"invalid value for {names}: {text!r} must be at least {format_go_duration(minimum)}"
        )
    return value


def _port(text: str, names: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"invalid value for {names}: {text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise ConfigError(f"invalid value for {names}: {value} is not in 0-65535")
    return value


def _boolean(text: str, names: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"invalid value for {names}: {text!r} is not a boolean (true/false)")


def _qualified_name(text: str, names: str) -> str:
    """An annotation key: [prefix/]name, prefix a DNS subdomain (apimachinery IsQualifiedName)."""
    key = text.strip()
    prefix, slash, name = key.rpartition("/")
    valid = _QUALIFIED_NAME.fullmatch(name) is not None and (
        not slash or (prefix != "" and is_dns_subdomain(prefix))
    )
    if not valid:
        raise ConfigError(f"invalid value for {names}: {text!r} is not a valid annotation key")
    return key


def _namespaces(text: str, names: str) -> tuple[str, ...] | None:
    """Comma-separated namespace names; an unset or blank value means every namespace, but a
    value made only of commas names none, which is a mistake rather than "all"."""
    if not text.strip():
        return None
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ConfigError(
            f"invalid value for {names}: {text!r} names no namespace (leave it unset to watch "
            "every namespace)"
        )
    for item in items:
        if not is_dns_label(item):
            raise ConfigError(f"invalid value for {names}: {item!r} is not a namespace name")
    return tuple(dict.fromkeys(items))


def _hosts(text: str, names: str) -> tuple[str, ...]:
    """Comma-separated IP addresses and DNS subdomains; an empty list is an error."""
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise ConfigError(f"invalid value for {names}: names no host")
    for item in items:
        try:
            ipaddress.ip_address(item)
            continue
        except ValueError:
            pass
        if not is_dns_subdomain(item):
            raise ConfigError(
                f"invalid value for {names}: {item!r} is neither an IP address nor a DNS name"
            )
    return tuple(dict.fromkeys(items))


def _object_name(text: str, names: str, *, label: bool = False) -> str:
    """A DNS subdomain (most object names), or a DNS label (namespaces, Services)."""
    name = text.strip()
    if not (is_dns_label(name) if label else is_dns_subdomain(name)):
        kind = "DNS label" if label else "DNS subdomain"
        raise ConfigError(f"invalid value for {names}: {text!r} is not a valid {kind} name")
    return name


def _choice(text: str, names: str, choices: Sequence[str]) -> str:
    lowered = text.strip().lower()
    if lowered not in choices:
        raise ConfigError(f"invalid value for {names}: {text!r} is not one of {', '.join(choices)}")
    return lowered


def _path(text: str, names: str) -> Path:
    if not text.strip():
        raise ConfigError(f"invalid value for {names}: empty path")
    return Path(text.strip()).expanduser()


def _names(dest: str) -> str:
    """The flag and the variable of an option, as an error names them."""
    return next(option.names() for option in _OPTIONS if option.dest == dest)


def _listen(raw: Mapping[str, tuple[str, str]], default: ControllerConfig) -> tuple[str, int, int]:
    """The bind address, the webhook port and the metrics port (two different ports)."""
    bind_address = default.bind_address
    if (value := raw.get("bind_address")) is not None:
        if not value[0].strip():
            raise ConfigError(f"invalid value for {value[1]}: empty address")
        bind_address = value[0].strip()
    webhook_port = default.webhook_port
    if (value := raw.get("webhook_port")) is not None:
        webhook_port = _port(*value)
    metrics_port = default.metrics_port
    if (value := raw.get("metrics_port")) is not None:
        metrics_port = _port(*value)
    if webhook_port == metrics_port and webhook_port != 0:
        raise ConfigError(
            f"invalid value for {_names('metrics_port')}: port {metrics_port} is also the "
            f"webhook port ({_names('webhook_port')})"
        )
    return bind_address, webhook_port, metrics_port


def _tls(
    raw: Mapping[str, tuple[str, str]],
) -> tuple[Path | None, Path | None, bool, tuple[str, ...]]:
    """The serving certificate and key files, or --self-signed and its extra hosts: one of
    the two, never both."""
    cert = None if (value := raw.get("tls_cert_file")) is None else _path(*value)
    key = None if (value := raw.get("tls_key_file")) is None else _path(*value)
    self_signed = False if (value := raw.get("self_signed")) is None else _boolean(*value)
    if (cert is None) != (key is None):
        missing = "tls_key_file" if key is None else "tls_cert_file"
        raise ConfigError(
            f"missing {_names(missing)}: the TLS certificate and key files go together"
        )
    if self_signed and cert is not None:
        raise ConfigError(
            f"{_names('self_signed')} and {_names('tls_cert_file')} are mutually exclusive"
        )
    if not self_signed and cert is None:
        raise ConfigError(
            f"the webhook needs TLS: set {_names('tls_cert_file')} and "
            f"{_names('tls_key_file')}, or {_names('self_signed')}"
        )
    hosts = () if (value := raw.get("self_signed_hosts")) is None else _hosts(*value)
    if hosts and not self_signed:
        raise ConfigError(
            f"{_names('self_signed_hosts')} only applies with {_names('self_signed')}"
        )
    return cert, key, self_signed, hosts


def _logging(
    raw: Mapping[str, tuple[str, str]], env: Mapping[str, str], default: ControllerConfig
) -> tuple[LogFormat, str]:
    """The log format (JSON in a cluster, else for a console) and level."""
    log_format: LogFormat = "json" if IN_CLUSTER_VARIABLE in env else "console"
    if (value := raw.get("log_format")) is not None:
        log_format = "json" if _choice(*value, LOG_FORMATS) == "json" else "console"
    log_level = default.log_level
    if (value := raw.get("log_level")) is not None:
        log_level = _choice(*value, LOG_LEVELS)
    return log_format, log_level


def _cluster(
    raw: Mapping[str, tuple[str, str]], env: Mapping[str, str]
) -> tuple[bool, Path | None, str | None, str | None]:
    """Leader election, the kubeconfig and its context, and the controller's namespace (the
    flag, else the Downward API's)."""
    leader_elect = False if (value := raw.get("leader_elect")) is None else _boolean(*value)
    kubeconfig = None if (value := raw.get("kubeconfig")) is None else _path(*value)
    context = None
    if (value := raw.get("context")) is not None and value[0].strip():
        context = value[0].strip()
    controller_namespace = None
    if (value := raw.get("controller_namespace")) is not None and value[0].strip():
        controller_namespace = _object_name(*value, label=True)
    elif env.get(POD_NAMESPACE_VARIABLE, "").strip():
        controller_namespace = _object_name(
            env[POD_NAMESPACE_VARIABLE], f"${POD_NAMESPACE_VARIABLE}", label=True
        )
    return leader_elect, kubeconfig, context, controller_namespace


def resolve(args: argparse.Namespace, env: Mapping[str, str]) -> ControllerConfig:
    """Validate what argparse read (flags) together with the environment."""
    raw = _raw_values(args, env)
    default = ControllerConfig()

    rollout_timeout = default.rollout_timeout
    if (value := raw.get("rollout_timeout")) is not None:
        rollout_timeout = _duration(*value, minimum=timedelta(seconds=1))
    reload_interval = default.tls_reload_interval
    if (value := raw.get("tls_reload_interval")) is not None:
        reload_interval = _duration(*value, minimum=timedelta(milliseconds=100))
    enabled_annotation = None
    if (value := raw.get("enabled_annotation")) is not None and value[0].strip():
        enabled_annotation = _qualified_name(*value)
    namespaces = None if (value := raw.get("namespaces")) is None else _namespaces(*value)
    protect = default.protect
    if (value := raw.get("protect")) is not None:
        protect = Protect(_choice(*value, tuple(mode.value for mode in Protect)))
    bind_address, webhook_port, metrics_port = _listen(raw, default)
    cert, key, self_signed, self_signed_hosts = _tls(raw)
    log_format, log_level = _logging(raw, env, default)
    leader_elect, kubeconfig, context, controller_namespace = _cluster(raw, env)

    def object_name(dest: str, default_name: str, *, label: bool = False) -> str:
        value = raw.get(dest)
        return default_name if value is None else _object_name(*value, label=label)

    return ControllerConfig(
        rollout_timeout=rollout_timeout,
        enabled_annotation=enabled_annotation,
        namespaces=namespaces,
        protect=protect,
        bind_address=bind_address,
        webhook_port=webhook_port,
        metrics_port=metrics_port,
        tls_cert_file=cert,
        tls_key_file=key,
        tls_reload_interval=reload_interval,
        self_signed=self_signed,
        log_format=log_format,
        log_level=log_level,
        leader_elect=leader_elect,
        kubeconfig=kubeconfig,
        kube_context=context,
        controller_namespace=controller_namespace,
        lease_name=object_name("lease_name", default.lease_name),
        service_name=object_name("service_name", default.service_name, label=True),
        self_signed_secret=object_name("self_signed_secret", default.self_signed_secret),
        self_signed_mount=(
            default.self_signed_mount
            if (value := raw.get("self_signed_mount")) is None
            else _path(*value)
        ),
        webhook_configuration=object_name("webhook_configuration", default.webhook_configuration),
        self_signed_hosts=self_signed_hosts,
    )


def controller_parser(prog: str = "graceful-drain controller") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Run the eviction webhook controller.")
    add_controller_arguments(parser)
    return parser


def parse_controller_config(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> ControllerConfig:
    """Pure: flags (without the subcommand) and an environment to a validated config.

    Unknown flags make argparse exit 2 with its usage message; bad values raise ConfigError.
    """
    args = controller_parser().parse_args(list(argv))
    return resolve(args, os.environ if env is None else env)


def check_files(config: ControllerConfig) -> None:
    """The files the configuration names exist and are readable. Raises ConfigError."""
    checks = (
        (config.tls_cert_file, "--tls-cert-file (GRACEFUL_DRAIN_TLS_CERT_FILE)"),
        (config.tls_key_file, "--tls-key-file (GRACEFUL_DRAIN_TLS_KEY_FILE)"),
        (config.kubeconfig, "--kubeconfig (GRACEFUL_DRAIN_KUBECONFIG)"),
    )
    for path, names in checks:
        if path is not None:
            check_readable(path, names)


def check_readable(path: Path, names: str) -> None:
    """`path`, named by `names` (the flag and variable), can be read. Raises ConfigError."""
    try:
        with path.open("rb") as handle:
            handle.read(1)
    except OSError as error:
        raise ConfigError(
            f"invalid value for {names}: cannot read {path} ({error.strerror})"
        ) from None


def from_environment(flag: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The controller's variable for `flag` (GRACEFUL_DRAIN_ and the flag's name) when set:
    (its value, "FLAG (VARIABLE)"), for the other commands that share the flag."""
    option = next(option for option in _OPTIONS if option.flag == flag)
    if option.variable not in env:
        return None
    return env[option.variable], option.names()
