"""The chart (charts/graceful-drain) rendered by the real `helm` binary, as a user would.

helm is built from the Go module helm.sh/helm/v3 by realcluster/build with the control
plane's binaries; without it (no Go) these tests skip with one line, and with
REQUIRE_REAL_CLUSTER=1 (CI) they fail instead.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from realcluster.binaries import built_bin_dir, kubernetes_version
from tests.conftest import REQUIRE_REAL_CLUSTER

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "graceful-drain"
RELEASE = "graceful-drain"
NAMESPACE = "graceful-drain"
# The real control plane's version (realcluster/versions.env): what the chart is rendered for.
KUBE_VERSION = kubernetes_version().removeprefix("v")
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
# The APIs of a cluster with the Prometheus Operator: the ServiceMonitor and PrometheusRule are
# rendered only where their API is served (.Capabilities.APIVersions).
MONITORING_APIS = ("monitoring.coreos.com/v1/ServiceMonitor",
                   "monitoring.coreos.com/v1/PrometheusRule")  # fmt: skip
HELM_TIMEOUT = 60
TLS_MODES = ("self-signed", "cert-manager", "secret")
# tls.mode=secret needs a Secret name and its CA; any base64 stands in for a template.
SECRET_MODE_VALUES = {"tls": {"mode": "secret", "secret": {"name": "my-webhook-tls",
                                                           "caBundle": "Y2EK"}}}  # fmt: skip

Obj = dict[str, Any]


def helm_binary() -> str:
    bin_dir = built_bin_dir()
    if bin_dir is None:
        message = "helm is not built (realcluster/build needs Go)"
        if os.environ.get(REQUIRE_REAL_CLUSTER) == "1":
            pytest.fail(f"{REQUIRE_REAL_CLUSTER}=1: {message}")
        pytest.skip(message)
    return str(bin_dir / "helm")


def run_helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [helm_binary(), *args], capture_output=True, text=True, timeout=HELM_TIMEOUT
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def mode_values(mode: str) -> Obj:
    return SECRET_MODE_VALUES if mode == "secret" else {"tls": {"mode": mode}}


@functools.cache
def _template(values_json: str, release: str, namespace: str, api_versions: tuple[str, ...]) -> str:
    result = subprocess.run(
        [helm_binary(), "template", release, str(CHART), "--namespace", namespace,
         "--kube-version", KUBE_VERSION, "--values", "-",
         *[arg for api in api_versions for arg in ("--api-versions", api)]],
        input=values_json, capture_output=True, text=True, timeout=HELM_TIMEOUT,
    )  # fmt: skip
    if result.returncode != 0:
        raise TemplateError(result.stderr)
    return result.stdout


class TemplateError(AssertionError):
    """`helm template` refused the values; the message is helm's."""


def template(
    values: Mapping[str, Any] | None = None, *, release: str = RELEASE,
    namespace: str = NAMESPACE, api_versions: tuple[str, ...] = MONITORING_APIS,
) -> list[Obj]:  # fmt: skip
    """The chart's objects for `values` (helm's own defaults for the rest), on a cluster that
    serves `api_versions` besides the built-in ones; fresh copies."""
    text = _template(json.dumps(values or {}, sort_keys=True), release, namespace, api_versions)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for doc in yaml.load_all(text, Loader=loader) if doc]
