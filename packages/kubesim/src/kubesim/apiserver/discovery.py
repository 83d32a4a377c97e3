"""Discovery documents: /version, /api, /apis and the per-group resource lists."""

from __future__ import annotations

from kubesim.types import Obj

from .resources import ResourceRegistry, ResourceType


def version_info(minor: int) -> Obj:
    return {
        "major": "1",
        "minor": str(minor),
        "gitVersion": f"v1.{minor}.0-kubesim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(resources: ResourceRegistry) -> Obj:
    groups = [_group(g, vs) for g, vs in resources.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(resources: ResourceRegistry, group: str) -> Obj | None:
    versions = resources.group_versions().get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _resource_entries(t: ResourceType) -> list[Obj]:
    main: Obj = {
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": list(t.verbs),
    }
    if t.short_names:
        main["shortNames"] = list(t.short_names)
    if t.categories:
        main["categories"] = list(t.categories)
    entries = [main]
    for sub in t.subresources:
        entry: Obj = {
            "name": f"{t.plural}/{sub.name}",
            "singularName": "",
            "namespaced": t.namespaced,
            "kind": sub.kind,
            "verbs": list(sub.verbs),
        }
        if sub.group is not None:
            entry["group"] = sub.group
            entry["version"] = sub.version
        entries.append(entry)
    return entries


def api_resource_list(resources: ResourceRegistry, group: str, version: str) -> Obj | None:
    types = resources.in_group_version(group, version)
    if not types:
        return None
    entries = [e for t in types for e in _resource_entries(t)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": entries,
    }
