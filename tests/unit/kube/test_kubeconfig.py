"""kube/kubeconfig.py: the sources in order (explicit file, in-cluster, $KUBECONFIG), the
in-cluster account as a one-context document, a context resolved with its entries."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from graceful_drain.kube import kubeconfig
from graceful_drain.kube.kubeconfig import (
    Document,
    KubeconfigError,
    file_document,
    in_cluster_document,
    load_document,
    resolve,
)

CONFIG = {
    "clusters": [
        {"name": "c1", "cluster": {"server": "https://a:6443", "certificate-authority": "ca.pem"}},
        {"name": "c2", "cluster": {"server": "https://b"}},
    ],
    "users": [{"name": "u1", "user": {"token": "t1"}}],
    "contexts": [
        {"name": "one", "context": {"cluster": "c1", "user": "u1", "namespace": "shop"}},
        {"name": "two", "context": {"cluster": "c2"}},
    ],
    "current-context": "one",
}


def account(tmp_path: Path) -> Path:
    folder = tmp_path / "sa"
    folder.mkdir()
    (folder / "token").write_text("tok")
    (folder / "namespace").write_text("my-app")
    return folder


def test_the_current_context_with_its_cluster_and_user(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(CONFIG))
    access = resolve(file_document(path))
    assert (access.context, access.namespace, access.server) == ("one", "shop", "https://a:6443")
    assert access.user == {"token": "t1"}
    assert access.file("ca.pem") == tmp_path / "ca.pem"  # relative to the kubeconfig


def test_another_context_without_user_or_namespace(tmp_path: Path) -> None:
    access = resolve(Document(CONFIG, None), "two")
    assert (access.namespace, access.server, access.user) == ("default", "https://b", {})
    with pytest.raises(KubeconfigError):
        access.file("relative.pem")  # no folder to resolve it in


@pytest.mark.parametrize(
    ("content", "context"),
    [(CONFIG, "three"), ({**CONFIG, "current-context": None}, None),
     ({**CONFIG, "clusters": []}, None)],
)  # fmt: skip
def test_an_unusable_context_is_a_kubeconfig_error(
    content: dict[str, object], context: str | None
) -> None:
    with pytest.raises(KubeconfigError):
        resolve(Document(content, None), context)


def test_the_in_cluster_account_is_one_context(tmp_path: Path) -> None:
    folder = account(tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    access = resolve(in_cluster_document(folder, env))
    assert (access.context, access.namespace, access.server) == (
        "default", "my-app", "https://[fd00::1]:443")  # fmt: skip
    assert access.cluster["certificate-authority"] == str(folder / "ca.crt")
    assert access.user == {"token": "tok", "tokenFile": str(folder / "token")}


def test_outside_a_pod_there_is_no_in_cluster_document(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError):
        in_cluster_document(account(tmp_path), {})  # no KUBERNETES_SERVICE_HOST
    with pytest.raises(KubeconfigError):
        in_cluster_document(tmp_path / "missing", {"KUBERNETES_SERVICE_HOST": "h",
                                                   "KUBERNETES_SERVICE_PORT": "1"})  # fmt: skip


def test_the_sources_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, from_env = tmp_path / "explicit", tmp_path / "env"
    explicit.write_text(yaml.safe_dump({**CONFIG, "current-context": "two"}))
    from_env.write_text(yaml.safe_dump(CONFIG))
    monkeypatch.setenv("KUBECONFIG", str(from_env))
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", tmp_path / "no-account")
    assert load_document(explicit).path == explicit
    assert load_document().path == from_env  # not in a pod: $KUBECONFIG
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", account(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert load_document().path is None  # in a pod: the account
    assert load_document(explicit).path == explicit  # an explicit file still wins


def test_a_missing_or_odd_file_is_a_kubeconfig_error(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError):
        file_document(tmp_path / "missing")
    (tmp_path / "list").write_text("- 1\n")
    with pytest.raises(KubeconfigError):
        file_document(tmp_path / "list")


@pytest.mark.parametrize(
    "text",
    [
        yaml.safe_dump(CONFIG),  # as kubectl writes it
        json.dumps(CONFIG),  # JSON: read without PyYAML
        json.dumps(CONFIG, indent=2),
        # YAML's flow style starts like JSON but is not JSON: PyYAML reads it
        yaml.safe_dump(CONFIG, default_flow_style=True).replace('"', ""),
    ],
    ids=["yaml", "json", "json-indented", "yaml-flow"],
)
def test_a_kubeconfig_reads_the_same_in_yaml_and_json(tmp_path: Path, text: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    assert file_document(path).content == CONFIG


def test_a_json_kubeconfig_is_read_without_pyyaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control is the YAML file: the same loader, with PyYAML unimportable, fails."""
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` raises ImportError
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(CONFIG))
    assert file_document(path).content == CONFIG
    path.write_text(yaml.safe_dump(CONFIG))
    with pytest.raises(ImportError):
        file_document(path)
