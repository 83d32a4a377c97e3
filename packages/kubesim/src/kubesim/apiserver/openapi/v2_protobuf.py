"""A Swagger 2.0 document in gnostic's protobuf form, the body of `/openapi/v2` for kubectl.

client-go unmarshals the body into `openapi_v2.Document`
(github.com/google/gnostic-models openapiv2/OpenAPIv2.proto); the field numbers below are
that file's. The real server gets there with gnostic's ParseDocument on its JSON; this covers
the subset `openapi_v2.swagger_document` writes and raises ValueError on anything else, so
that nothing is dropped silently from the protobuf form.

A vendor extension (`x-...`) becomes a NamedAny whose Any carries the value as YAML text
(kubectl parses it with yaml.Unmarshal); JSON is YAML, so the value is written as JSON.
Fields go on the wire in field-number order, as Go's proto.Marshal writes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from kubesim.apiserver.protobuf.encode import message_field, string_field, varint_field
from kubesim.types import Obj

Field = tuple[int, bytes]  # (field number, the encoded field)
Encode = Callable[[int, Any], bytes]


def _string(number: int, value: str) -> bytes:
    return string_field(number, value)


def _strings(number: int, values: Iterable[str]) -> bytes:
    return b"".join(string_field(number, v) for v in values)


def _bool(number: int, value: bool) -> bytes:
    return varint_field(number, 1) if value else b""  # proto3 leaves false off the wire


def _message(encode: Callable[[Any], bytes]) -> Encode:
    return lambda number, value: message_field(number, encode(value))


def _repeated(encode: Callable[[Any], bytes]) -> Encode:
    return lambda number, values: b"".join(message_field(number, encode(v)) for v in values)


def _named_any(name: str, value: Any) -> bytes:
    """NamedAny {name = 1; Any value = 2}, Any {string yaml = 2}."""
    yaml = json.dumps(value, separators=(", ", ": "))
    return string_field(1, name) + message_field(2, string_field(2, yaml))


def _encode(message: str, obj: Obj, fields: dict[str, tuple[int, Encode]],
            vendor_extension: int | None = None) -> bytes:  # fmt: skip
    """The fields of one message, `fields` naming each JSON key's number and encoding."""
    out: list[Field] = []
    for key, value in obj.items():
        if key.startswith("x-") and vendor_extension is not None:
            out.append((vendor_extension, message_field(vendor_extension, _named_any(key, value))))
        elif key in fields:
            number, encode = fields[key]
            out.append((number, encode(number, value)))
        else:
            raise ValueError(f"{message}: {key!r} is outside kubesim's OpenAPI v2 subset")
    out.sort(key=lambda f: f[0])  # stable: repeated fields keep their order
    return b"".join(encoded for _, encoded in out)


def _info(info: Obj) -> bytes:
    return _encode("Info", info, {"title": (1, _string), "version": (2, _string)}, 7)


def _query_parameter(param: Obj) -> bytes:
    """ParametersItem{parameter = 1} > Parameter{non_body_parameter = 2} >
    NonBodyParameter{query_parameter_sub_schema = 3} > QueryParameterSubSchema."""
    if param.get("in") != "query":
        raise ValueError(f"Parameter: only query parameters are encoded, not {param!r}")
    sub_schema = _encode("QueryParameterSubSchema", param, {
        "required": (1, _bool), "in": (2, _string), "description": (3, _string),
        "name": (4, _string), "type": (6, _string), "uniqueItems": (20, _bool),
    }, 23)  # fmt: skip
    return message_field(1, message_field(2, message_field(3, sub_schema)))


def _response(response: Obj) -> bytes:
    return _encode("Response", response, {"description": (1, _string)}, 5)


def _responses(responses: Obj) -> bytes:
    """Responses{repeated NamedResponseValue response_code = 1; vendor_extension = 2}; each
    value is a ResponseValue{Response response = 1}."""
    named = b"".join(
        message_field(1, string_field(1, code), message_field(2, message_field(1, _response(r))))
        for code, r in responses.items()
        if not code.startswith("x-")
    )
    extensions = {k: v for k, v in responses.items() if k.startswith("x-")}
    return named + _encode("Responses", extensions, {}, 2)


def _operation(op: Obj) -> bytes:
    return _encode("Operation", op, {
        "tags": (1, _strings), "summary": (2, _string), "description": (3, _string),
        "operationId": (5, _string), "produces": (6, _strings), "consumes": (7, _strings),
        "parameters": (8, _repeated(_query_parameter)), "responses": (9, _message(_responses)),
    }, 13)  # fmt: skip


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def _path_item(item: Obj) -> bytes:
    return _encode("PathItem", item,
                   {method: (n, _message(_operation)) for method, n in _METHODS.items()},
                   10)  # fmt: skip


def _paths(paths: Obj) -> bytes:
    """Paths{repeated NamedAny vendor_extension = 1; repeated NamedPathItem path = 2}."""
    extensions = {k: v for k, v in paths.items() if k.startswith("x-")}
    named = b"".join(
        message_field(2, string_field(1, path), message_field(2, _path_item(item)))
        for path, item in paths.items()
        if not path.startswith("x-")
    )
    return _encode("Paths", extensions, {}, 1) + named


def _definitions(definitions: Obj) -> bytes:
    if definitions:
        raise ValueError("Definitions: kubesim publishes no schemas")
    return b""


def encode_document(doc: Obj) -> bytes:
    """The `openapi_v2.Document` message for a Swagger 2.0 document in its JSON form."""
    return _encode("Document", doc, {
        "swagger": (1, _string), "info": (2, _message(_info)), "paths": (8, _message(_paths)),
        "definitions": (9, _message(_definitions)),
    }, 16)  # fmt: skip
