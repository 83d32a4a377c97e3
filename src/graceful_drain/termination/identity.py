"""Who am I?  This pod's identity from the Downward API, with documented fallbacks.

Expected environment (Downward API ``fieldRef``)::

    POD_NAME       metadata.name
    POD_NAMESPACE  metadata.namespace
    POD_UID        metadata.uid
    NODE_NAME      spec.nodeName

Fallbacks:

* name: ``HOSTNAME``.  The kubelet sets the container hostname to the pod name,
  truncated to 63 characters, unless ``spec.hostname`` is set — so the fallback is
  right only for pods without ``spec.hostname`` and with names of 63 characters or
  fewer.  The UID check on the pod object catches a wrong name.
* namespace: the service-account namespace file
  (``/var/run/secrets/kubernetes.io/serviceaccount/namespace``), present when the
  token is automounted.
* uid, node: none.  Without ``POD_UID`` neither the pod object nor events can be
  attributed to this pod, so the classifier can only shed load (or trust the
  rollout marker, which needs events it cannot attribute either): set it.

Pure over an environment mapping and a file reader; values are stripped and an
empty value counts as missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

SERVICE_ACCOUNT_NAMESPACE_PATH = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

FileReader = Callable[[Path], str | None]


class PodIdentity(NamedTuple):
    """Who this container is: its pod, namespace, UID and node, and where the name came
    from."""

    name: str
    namespace: str
    uid: str | None
    node_name: str | None
    name_source: str  # "env:POD_NAME" or "env:HOSTNAME"
    namespace_source: str  # "env:POD_NAMESPACE" or "file:<path>"


class IdentityError(ValueError):
    """The pod's name or namespace could not be determined."""

    def __init__(self, missing: tuple[str, ...]) -> None:
        self.missing = missing
        super().__init__("cannot determine this pod's " + " and ".join(missing))


def read_text_or_none(path: Path) -> str | None:
    """The default reader: a file's text, or None if it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def resolve_identity(
    env: Mapping[str, str],
    *,
    read_file: FileReader = read_text_or_none,
    namespace_path: Path = SERVICE_ACCOUNT_NAMESPACE_PATH,
) -> PodIdentity:
    """Resolve this pod's identity; raises :class:`IdentityError` naming what is missing."""
    name, name_source = _first(env, "POD_NAME", "HOSTNAME")
    namespace, namespace_source = _first(env, "POD_NAMESPACE")
    if namespace is None:
        namespace = _clean(read_file(namespace_path))
        namespace_source = f"file:{namespace_path}"
    missing = tuple(
        what for what, value in (("name", name), ("namespace", namespace)) if value is None
    )
    if name is None or namespace is None:
        raise IdentityError(missing)
    return PodIdentity(
        name=name,
        namespace=namespace,
        uid=_clean(env.get("POD_UID")),
        node_name=_clean(env.get("NODE_NAME")),
        name_source=name_source,
        namespace_source=namespace_source,
    )


def _first(env: Mapping[str, str], *keys: str) -> tuple[str | None, str]:
    for key in keys:
        value = _clean(env.get(key))
        if value is not None:
            return value, f"env:{key}"
    return None, ""


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    stripped = value.strip()
    return stripped or None
