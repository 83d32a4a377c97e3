"""What kubesim's OpenAPI documents (v2 and v3 alike) list: paths, methods, query parameters."""

from __future__ import annotations

from kubesim.apiserver.resources import ResourceType

QUERY_PARAMS = ("fieldValidation", "fieldManager", "dryRun", "force", "pretty")


def gv_path(group: str, version: str) -> str:
    """`api/v1`, `apis/apps/v1`: a group version's path, without the leading slash."""
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def operation_paths(t: ResourceType) -> dict[str, tuple[str, ...]]:
    """The paths documented for a resource type, each with its HTTP methods."""
    base = "/" + gv_path(t.group, t.version)
    collection = (
        f"{base}/namespaces/{{namespace}}/{t.plural}" if t.namespaced else f"{base}/{t.plural}"
    )
    if t.virtual:
        return {collection: ("post",)}
    return {collection: ("post",), f"{collection}/{{name}}": ("patch", "put")}
