"""Request bodies into the JSON form the API server works on; Kubernetes protobuf decoded.

From 1.32 on, kubectl's typed clients (create deployment/job/configmap/secret/
namespace/serviceaccount/token/pdb/role/rolebinding/service/priorityclass, auth can-i,
auth whoami, drain --disable-eviction's pod DELETEs with DeleteOptions) send
`Content-Type: application/vnd.kubernetes.protobuf`, as do client-go programs configured
for it: the 4-byte magic `k8s\\x00`, then a
`runtime.Unknown` envelope (k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go)
whose `raw` is the object, decoded here with the schemas of `protobuf.schema`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from kubesim import jsoncodec
from kubesim.apiserver.errors import ApiError, bad_request
from kubesim.apiserver.protobuf.schema import MESSAGES, Field, message_for
from kubesim.apiserver.protobuf.wire import (
    LENGTH_DELIMITED,
    VARINT,
    WireError,
    as_int32,
    as_int64,
    iter_fields,
    read_packed_varints,
)

JSON_MEDIA_TYPE = "application/json"
PROTOBUF_MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
ACCEPTED_MEDIA_TYPES = (JSON_MEDIA_TYPE, PROTOBUF_MEDIA_TYPE)
MAGIC = b"k8s\x00"


def decode_body(raw: bytes, content_type: str) -> Any:
    """The request body as parsed JSON, whichever of the accepted media types it was sent in.

    An empty body is None. Raises ApiError only: 415 for a media type (or a protobuf kind)
    kubesim cannot read, 400 for a body that does not parse.
    """
    if not raw:
        return None
    media_type = content_type.partition(";")[0].strip().lower()
    # No Content-Type means the first supported type, JSON
    # (negotiation.NegotiateInputSerializerForMediaType).
    if media_type in ("", JSON_MEDIA_TYPE):
        return _decode_json(raw)
    if media_type == PROTOBUF_MEDIA_TYPE:
        return decode_protobuf(raw)
    raise unsupported_media_type(ACCEPTED_MEDIA_TYPES)


def unsupported_media_type(accepted: tuple[str, ...], note: str = "") -> ApiError:
    """415, worded as k8s.io/apiserver/pkg/endpoints/handlers/negotiation/errors.go words it."""
    message = (
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted)
    )
    return ApiError(415, f"{message} ({note})" if note else message, "UnsupportedMediaType")


def _decode_json(raw: bytes) -> Any:
    try:
        return jsoncodec.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise bad_request(f"error decoding request body: {exc}") from None


def decode_protobuf(raw: bytes) -> dict[str, Any]:
    """A `k8s\\x00`-prefixed runtime.Unknown envelope into the JSON form of the object it holds."""
    if not raw.startswith(MAGIC):
        raise bad_request(
            "error decoding request body: provided data does not appear to be a protobuf "
            "message, expected prefix [107 56 115 0]"
        )
    if len(raw) == len(MAGIC):
        raise bad_request("error decoding request body: empty body")
    try:
        api_version, kind, payload = _unwrap(raw[len(MAGIC) :])
    except WireError as exc:
        raise bad_request(f"error decoding request body: {exc}") from None
    if not kind:
        raise bad_request("error decoding request body: Object 'Kind' is missing in protobuf")
    if not api_version:
        raise bad_request("error decoding request body: Object 'apiVersion' is missing in protobuf")
    name = message_for(api_version, kind)
    if name is None:
        raise unsupported_media_type(
            (JSON_MEDIA_TYPE,), f"kubesim has no protobuf schema for {api_version}, Kind={kind}"
        )
    try:
        fields = decode_message(payload, name)
    except (WireError, ValueError) as exc:
        version = api_version.rpartition("/")[2]
        # transformDecodeError, k8s.io/apiserver/pkg/endpoints/handlers/create.go
        raise bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: {exc}'
        ) from None
    return {"apiVersion": api_version, "kind": kind, **fields}


def _unwrap(envelope: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw) of a runtime.Unknown (apimachinery/pkg/runtime/generated.proto).

    Unknown{typeMeta=1 TypeMeta{apiVersion=1, kind=2}, raw=2, contentEncoding=3,
    contentType=4}; the last two are ignored, as the upstream decoder ignores them.
    """
    unknown = _length_delimited(envelope, (1, 2))
    type_meta = _length_delimited(unknown.get(1, b""), (1, 2))
    return _text(type_meta.get(1, b"")), _text(type_meta.get(2, b"")), unknown.get(2, b"")


def _length_delimited(data: bytes, numbers: tuple[int, ...]) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    for number, wire_type, value in iter_fields(data):
        if number in numbers:
            if wire_type != LENGTH_DELIMITED or not isinstance(value, bytes):
                raise WireError(f"proto: wrong wireType = {wire_type} for field {number}")
            found[number] = value
    return found


def decode_message(data: bytes, name: str) -> Any:
    """One message, by its MESSAGES key, into its JSON form. Raises WireError or ValueError."""
    schema = MESSAGES[name]
    scalars: dict[int, Any] = {}
    nested: dict[int, list[bytes]] = {}  # chunks of a singular message, merged below
    many: dict[int, list[Any]] = {}
    for number, wire_type, item in iter_fields(data):
        field = schema.field(number)
        if field is None:
            continue  # unknown fields are skipped, as gogo/protobuf does
        if field.label == "optional":
            if field.type == "message":
                nested.setdefault(number, []).append(_delimited(field, wire_type, item))
            else:
                scalars[number] = _value(field, wire_type, item)  # the last one wins
        elif field.label == "map":
            entry = _map_entry(field, _delimited(field, wire_type, item))
            many.setdefault(number, []).append(entry)
        elif wire_type == LENGTH_DELIMITED and field.type in ("bool", "int32", "int64"):
            packed = read_packed_varints(_delimited(field, wire_type, item))
            many.setdefault(number, []).extend(_varint(field, v) for v in packed)
        else:
            many.setdefault(number, []).append(_value(field, wire_type, item))
    out: dict[str, Any] = {}
    for field in schema.fields:
        if field.presence == "inline":
            # An embedded struct: its fields are the enclosing object's in JSON.
            out.update(decode_message(b"".join(nested.get(field.number, ())), field.message))
        elif field.label == "optional" and field.type == "message":
            chunks = nested.get(field.number)
            # Occurrences of a message merge, which for protobuf is concatenation.
            value = decode_message(b"".join(chunks), field.message) if chunks else None
            _emit(out, field, chunks is not None, value)
        elif field.label == "optional":
            _emit(out, field, field.number in scalars, scalars.get(field.number))
        else:
            items = many.get(field.number)
            if field.label == "map" and items:
                _emit(out, field, True, dict(items))
            else:
                _emit(out, field, bool(items), items)
    if schema.to_json is not None:
        return schema.to_json(out)
    return out


def _emit(out: dict[str, Any], field: Field, present: bool, value: Any) -> None:
    """Put a field in the JSON object the way encoding/json would, given its presence rule."""
    if present:
        omitted = (
            field.presence == "omitempty"
            and field.label == "optional"
            and field.type != "message"
            and value in ("", 0, False, None)
        )
        if not omitted:
            out[field.json_name] = value
    elif field.presence == "nullable":
        out[field.json_name] = None
    elif field.presence == "always":
        out[field.json_name] = _zero(field)


def _zero(field: Field) -> Any:
    """What encoding/json writes for a field the client did not send (a Go zero value)."""
    if field.label != "optional":
        return None  # a nil slice or map
    if field.type == "message":
        return decode_message(b"", field.message)
    return _SCALAR_ZERO.get(field.type)  # bytes and json: a nil slice, null


_SCALAR_ZERO: dict[str, Any] = {"string": "", "bool": False, "int32": 0, "int64": 0}
# A []byte map value is non-nil even when empty, so JSON has "" rather than null.
_MAP_VALUE_ZERO: dict[str, Any] = {**_SCALAR_ZERO, "bytes": ""}


def _map_entry(field: Field, entry: bytes) -> tuple[str, Any]:
    """A map<string, V> entry: a message with the key as field 1 and the value as field 2."""
    key = ""
    value: Any = _MAP_VALUE_ZERO.get(field.type)  # a Go map keeps the zero value
    chunks: list[bytes] = []
    for number, wire_type, item in iter_fields(entry):
        if number == 1:
            key = _text(_delimited(field, wire_type, item))
        elif number == 2 and field.type == "message":
            chunks.append(_delimited(field, wire_type, item))
        elif number == 2:
            value = _value(field, wire_type, item)
    if field.type == "message":
        return key, decode_message(b"".join(chunks), field.message)
    return key, value


def _value(field: Field, wire_type: int, value: int | bytes) -> Any:
    if field.type in ("bool", "int32", "int64"):
        if wire_type != VARINT or not isinstance(value, int):
            raise _wrong_wire_type(field, wire_type)
        return _varint(field, value)
    data = _delimited(field, wire_type, value)
    if field.type == "string":
        return _text(data)
    if field.type == "bytes":
        return base64.b64encode(data).decode("ascii")
    if field.type == "json":
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise WireError(f"invalid JSON in {field.json_name}: {exc}") from None
    return decode_message(data, field.message)


def _varint(field: Field, value: int) -> bool | int:
    if field.type == "bool":
        return value != 0
    if field.type == "int32":
        return as_int32(value)
    return as_int64(value)


def _delimited(field: Field, wire_type: int, value: int | bytes) -> bytes:
    if wire_type != LENGTH_DELIMITED or not isinstance(value, bytes):
        raise _wrong_wire_type(field, wire_type)
    return value


def _wrong_wire_type(field: Field, wire_type: int) -> WireError:
    return WireError(f"proto: wrong wireType = {wire_type} for field {field.json_name}")


def _text(data: bytes) -> str:
    # Go strings may hold any bytes; encoding/json writes invalid UTF-8 as U+FFFD.
    return data.decode("utf-8", errors="replace")
