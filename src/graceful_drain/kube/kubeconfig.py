"""Where the Kubernetes configuration comes from, and what one context of it says.

`load_document` picks the source, in lightkube's `KubeConfig.from_env` order: an explicit
kubeconfig file wins; else the in-cluster service account; else `$KUBECONFIG`, else
`~/.kube/config`.  The in-cluster account becomes a kubeconfig document of one context
(`default`: the API server from `KUBERNETES_SERVICE_HOST`/`_PORT`, the account's `ca.crt`,
its token and `tokenFile`, its namespace), so every caller reads one shape.  `resolve`
picks a context of a document.  The lightkube client (kube/client.py) and the lean client
(kube/rest.py) both start here; this module imports no client, and PyYAML only to read a
file that is not JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = "~/.kube/config"
DEFAULT_NAMESPACE = "default"
IN_CLUSTER_CONTEXT = "default"

JsonMap = Mapping[str, Any]


class KubeconfigError(Exception):
    """No usable Kubernetes configuration."""


class Document(NamedTuple):
    """A kubeconfig document and the file it came from (None: the in-cluster account)."""

    content: JsonMap
    path: Path | None


class ClusterAccess(NamedTuple):
    """One context resolved: the server, and the kubeconfig's cluster and user entries as
    written (`certificate-authority[-data]`, `token`, `tokenFile`, `exec`...)."""

    context: str
    namespace: str
    server: str
    cluster: JsonMap
    user: JsonMap
    base: Path | None  # the kubeconfig's folder: relative file names are resolved there

    def file(self, name: str) -> Path:
        path = Path(name).expanduser()
        if path.is_absolute():
            return path
        if self.base is None:
            raise KubeconfigError(f"{name} is relative, but the kubeconfig's folder is unknown")
        return self.base / path


def in_cluster_document(
    account: Path | None = None, env: Mapping[str, str] | None = None
) -> Document:
    """The pod's service account as a one-context document; KubeconfigError outside a pod."""
    environment = os.environ if env is None else env
    account = SERVICE_ACCOUNT if account is None else account
    try:
        token = (account / "token").read_text()
        namespace = (account / "namespace").read_text()
        host, port = environment["KUBERNETES_SERVICE_HOST"], environment["KUBERNETES_SERVICE_PORT"]
    except (OSError, KeyError) as error:
        raise KubeconfigError(f"not in a cluster: {error}") from error
    if ":" in host:  # IPv6
        host = f"[{host}]"
    name = IN_CLUSTER_CONTEXT
    cluster = {"server": f"https://{host}:{port}", "certificate-authority": str(account / "ca.crt")}
    user = {"token": token, "tokenFile": str(account / "token")}
    return Document(
        {
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": user}],
            "contexts": [
                {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
            ],
            "current-context": name,
        },
        None,
    )


def file_document(path: Path) -> Document:
    """A kubeconfig file (YAML, of which JSON is a part)."""
    path = path.expanduser()
    if not path.is_file():
        raise KubeconfigError(f"Configuration file {path} not found")
    text = path.read_text()
    content = _json_document(text)
    if content is None:
        content = _yaml_document(text)
    if not isinstance(content, Mapping):
        raise KubeconfigError(f"{path} is not a kubeconfig (not a mapping)")
    return Document(content, path)


def _json_document(text: str) -> object | None:
    """A kubeconfig written as JSON (kubectl reads either), without PyYAML: importing it
    compiles its Unicode regular expressions, a large part of a detector's start-up
    (bench/README.md). None when the text is not JSON."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        content: object = json.loads(text)
    except ValueError:  # YAML's flow style also starts with "{"
        return None
    return content


def _yaml_document(text: str) -> object:
    import yaml  # only for a YAML file: in a pod the account needs none

    # libyaml's parser where PyYAML has it: the pure-Python scanner reads a kubeconfig's
    # base64 certificate and token a character at a time (milliseconds, at start-up).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    content: object = yaml.load(text, Loader=loader)
    return content


def load_document(kubeconfig: Path | None = None) -> Document:
    """An explicit kubeconfig wins; else in-cluster; else $KUBECONFIG or ~/.kube/config."""
    if kubeconfig is not None:
        return file_document(kubeconfig)
    try:
        return in_cluster_document()
    except KubeconfigError:
        return file_document(Path(os.environ.get("KUBECONFIG", DEFAULT_KUBECONFIG)))


def _named(document: JsonMap, section: str, key: str, name: str) -> JsonMap:
    for entry in document.get(section) or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(key)
            return value if isinstance(value, Mapping) else {}
    raise KubeconfigError(f"no {key} {name!r} in the kubeconfig's {section}")


def resolve(document: Document, context: str | None = None) -> ClusterAccess:
    """The context named (default: the current one) with its cluster and user."""
    name = context if context is not None else document.content.get("current-context")
    if not isinstance(name, str) or not name:
        raise KubeconfigError("no current context set and none given")
    chosen = _named(document.content, "contexts", "context", name)
    cluster_name, user_name = chosen.get("cluster"), chosen.get("user")
    if not isinstance(cluster_name, str):
        raise KubeconfigError(f"context {name!r} names no cluster")
    cluster = _named(document.content, "clusters", "cluster", cluster_name)
    user = _named(document.content, "users", "user", user_name) if user_name else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigError(f"cluster {cluster_name!r} has no server")
    namespace = chosen.get("namespace")
    return ClusterAccess(
        context=name,
        namespace=namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE,
        server=server,
        cluster=cluster,
        user=user,
        base=None if document.path is None else document.path.parent,
    )
