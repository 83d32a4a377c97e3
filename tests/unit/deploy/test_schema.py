"""Every rendered object uses only fields its API defines.

kubesim validates little (its OpenAPI carries no schemas), so unknown or misspelt fields
are caught here: built-in kinds round-trip through lightkube's models, generated from the
upstream OpenAPI (lightkube-models), which drop unknown keys and type-check the rest;
cert-manager kinds are checked against the fields of cert-manager.io/v1
(pkg/apis/certmanager/v1/types_certificate.go and types_issuer.go, cert-manager/cert-manager).
"""

from __future__ import annotations

import copy
from typing import Any

from lightkube import codecs

from tests.unit.deploy.rendered import VARIANTS, Variant, by_variant, is_cert_manager, objects, one

# The cert-manager.io/v1 fields these manifests may use; `None` means "any value".
Schema = dict[str, Any]
_OBJECT_REFERENCE: Schema = {"name": None, "kind": None, "group": None}
_METADATA: Schema = {"name": None, "namespace": None, "labels": None, "annotations": None}
CERT_MANAGER_SCHEMAS: dict[str, Schema] = {
    "Certificate": {
        "apiVersion": None,
        "kind": None,
        "metadata": _METADATA,
        "spec": {
            "secretName": None,
            "commonName": None,
            "dnsNames": None,
            "duration": None,
            "renewBefore": None,
            "isCA": None,
            "usages": None,
            "issuerRef": _OBJECT_REFERENCE,
            "privateKey": {"algorithm": None, "size": None, "encoding": None,
                           "rotationPolicy": None},
        },
    },
    "Issuer": {
        "apiVersion": None,
        "kind": None,
        "metadata": _METADATA,
        "spec": {"selfSigned": {"crlDistributionPoints": None}, "ca": {"secretName": None}},
    },
}  # fmt: skip


def unknown_fields(value: Any, schema: Schema | None, path: str = "") -> list[str]:
    if schema is None:
        return []
    if not isinstance(value, dict):
        return [f"{path}: expected an object"]
    problems: list[str] = []
    for key, child in value.items():
        if key not in schema:
            problems.append(f"{path}.{key}")
        else:
            problems.extend(unknown_fields(child, schema[key], f"{path}.{key}"))
    return problems


def round_trip(item: dict[str, Any]) -> Any:
    """The object as lightkube's typed model reads and writes it back."""
    return codecs.from_dict(copy.deepcopy(item)).to_dict()  # type: ignore[no-untyped-call]


def test_unknown_fields_sees_a_typo() -> None:
    schema = CERT_MANAGER_SCHEMAS["Certificate"]
    good = {"spec": {"secretName": "s", "issuerRef": {"name": "ca"}}}
    assert unknown_fields(good, schema) == []
    bad = {"spec": {"secretName": "s", "issuerRef": {"name": "ca", "knd": "Issuer"}}}
    assert unknown_fields(bad, schema) == [".spec.issuerRef.knd"]


@by_variant
def test_builtin_objects_round_trip_through_the_upstream_models(variant: Variant) -> None:
    for item in objects(variant):
        if is_cert_manager(item):
            continue
        assert round_trip(item) == item, item["kind"]


def test_round_trip_sees_a_misspelt_field() -> None:
    items = objects(VARIANTS[0])
    deployment = one(items, "Deployment")
    context = deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    context["readOnlyRootFilesytem"] = context.pop("readOnlyRootFilesystem")
    assert round_trip(deployment) != deployment


@by_variant
def test_cert_manager_objects_use_only_cert_manager_v1_fields(variant: Variant) -> None:
    for item in objects(variant):
        if not is_cert_manager(item):
            continue
        assert item["apiVersion"] == "cert-manager.io/v1"
        assert unknown_fields(item, CERT_MANAGER_SCHEMAS[item["kind"]]) == [], item


def test_only_the_cert_manager_overlay_needs_cert_manager() -> None:
    counts = {v.name: sum(map(is_cert_manager, objects(v))) for v in VARIANTS}
    assert counts == {"self-signed": 0, "cert-manager": 4}
