"""One compatibility truth: docs/install.md's matrix names the versions the tests run with
(realcluster/versions.env for the real control plane and helm, tests/compatibility.py for
kubectl), and the chart's kubeVersion agrees with the Kubernetes it says is supported."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from realcluster.binaries import versions
from tests.compatibility import KUBECTL_MINORS_ON_KUBESIM, KUBECTL_ON_REAL_CONTROL_PLANE

REPO = Path(__file__).resolve().parents[3]
INSTALL = REPO / "docs" / "install.md"
CHART = REPO / "charts" / "graceful-drain"
# The newest API the manifests need: ValidatingAdmissionPolicy admissionregistration.k8s.io/v1.
NEWEST_API_MINOR = 30
DASH = "\N{EN DASH}"  # of a version range, as the docs write it


def matrix(markdown: str) -> dict[str, dict[str, str]]:
    """The Compatibility section's table: component -> column -> cell."""
    section = markdown[markdown.index("### Compatibility") :]
    section = section[: section.index("\n#", 1)]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]
    header, *body = rows
    return {row[0]: dict(zip(header, row, strict=True)) for row in body}


def kube_version_floor(constraint: str) -> tuple[int, int]:
    """The lowest minor version a `>=X.Y.Z-0` constraint admits."""
    match = re.fullmatch(r">=\s*(\d+)\.(\d+)\.\d+(-0)?", constraint.strip())
    assert match, f"kubeVersion {constraint!r} is not a single lower bound"
    return int(match.group(1)), int(match.group(2))


def minor(version: str) -> tuple[int, int]:
    major, minor_, *_ = version.removeprefix("v").split(".")
    return int(major), int(minor_)


MATRIX = matrix(INSTALL.read_text())
KUBE_VERSION = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"])


def test_the_tested_kubernetes_is_the_real_control_planes_and_the_chart_admits_it() -> None:
    tested = versions()["KUBERNETES_VERSION"]
    assert MATRIX["Kubernetes (server)"]["tested"] == tested
    assert minor(tested) >= kube_version_floor(KUBE_VERSION)


def test_the_supported_kubernetes_is_the_charts_kube_version() -> None:
    major, floor = kube_version_floor(KUBE_VERSION)
    supported = MATRIX["Kubernetes (server)"]["supported"]
    assert supported.startswith(f"{major}.{floor} and newer")
    assert f"`{KUBE_VERSION}`" in supported
    # Nothing older than the newest API the manifests use can be admitted.
    assert (major, floor) >= (1, NEWEST_API_MINOR)


def test_kubernetes_the_chart_refuses_is_said_unsupported_not_offered_a_workaround() -> None:
    """The contradiction this replaced: 1.27-1.29 "work once the admission policy is
    dropped" while the chart refuses them and nothing tests them."""
    text = INSTALL.read_text()
    _, floor = kube_version_floor(KUBE_VERSION)
    assert f"1.{floor - 3}{DASH}1.{floor - 1} are not supported" in " ".join(text.split())
    assert "drop `admissionpolicy.yaml`" not in text


def test_the_kubectl_versions_are_those_the_tests_run() -> None:
    tested = MATRIX["kubectl"]["tested"]
    real = ", ".join(KUBECTL_ON_REAL_CONTROL_PLANE)
    lowest, highest = min(KUBECTL_MINORS_ON_KUBESIM), max(KUBECTL_MINORS_ON_KUBESIM)
    assert tuple(range(lowest, highest + 1)) == KUBECTL_MINORS_ON_KUBESIM
    assert tested == f"{real} on the real control plane; 1.{lowest}{DASH}1.{highest} on kubesim"


def test_helm_is_the_one_built() -> None:
    assert MATRIX["Helm"]["tested"] == versions()["HELM_VERSION"]


def test_karpenter_is_the_one_built() -> None:
    assert MATRIX["Karpenter"]["tested"] == versions()["KARPENTER_VERSION"]


def test_cluster_autoscaler_is_said_to_be_simulated() -> None:
    assert MATRIX["Cluster Autoscaler"]["tested"].startswith("simulated")


def test_matrix_reads_a_table() -> None:
    text = "### Compatibility\n\n| a | b |\n|---|---|\n| x | `1` |\n\n### Next\n"
    assert matrix(text) == {"x": {"a": "x", "b": "`1`"}}
