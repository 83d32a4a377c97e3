"""Parse a request path into what it addresses, as k8s.io/apiserver's RequestInfoFactory does."""

from __future__ import annotations

from dataclasses import dataclass, replace

_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True, slots=True)
class RequestInfo:
    is_resource_request: bool
    path: str
    verb: str
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def parse_request(method: str, path: str, is_watch: bool) -> RequestInfo:
    parts = [p for p in path.strip("/").split("/") if p]
    http_verb = method.lower()
    non_resource = RequestInfo(False, path, http_verb)
    if not parts or parts[0] not in ("api", "apis"):
        return non_resource
    if parts[0] == "api":
        if len(parts) < 2:
            return non_resource
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 3:
            return non_resource
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        return non_resource
    legacy_watch = False
    if rest[0] == "watch":
        legacy_watch, rest = True, rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = {
        "post": "create",
        "put": "update",
        "patch": "patch",
        "delete": "delete" if name else "deletecollection",
        "get": "get" if name else "list",
        "head": "get" if name else "list",
    }.get(http_verb, http_verb)
    if (is_watch or legacy_watch) and verb in ("get", "list"):
        verb = "watch"
    return RequestInfo(True, path, verb, group, version, namespace, resource, subresource, name)


def named_by_field_selector(info: RequestInfo, field_selector: str) -> RequestInfo:
    """A list or watch whose fieldSelector pins metadata.name carries that name, so RBAC
    resourceNames apply to it (upstream RequestInfoFactory, `metadata.name` exact match)."""
    if info.verb not in ("list", "watch") or info.name or not field_selector:
        return info
    names = set()
    for term in field_selector.split(","):
        key, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if sep and key.strip() == "metadata.name":
            names.add(value.strip())
    if len(names) != 1:
        return info
    return replace(info, name=names.pop())
