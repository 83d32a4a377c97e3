"""Label and field selectors against upstream behaviour.

Tables are ported from k8s.io/apimachinery/pkg/labels/selector_test.go and
k8s.io/apimachinery/pkg/fields/selector_test.go; error texts are the ones
kube-apiserver returns with 400 BadRequest.
"""

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.selectors import (
    EVERYTHING,
    NOTHING,
    FieldRequirement,
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    compile_field_selector,
    convert_field_label,
    escape_field_value,
    field_value,
    label_selector_from_object,
    label_selector_from_set,
    new_requirement,
    parse_field_selector,
    parse_label_selector,
    selectable_fields,
    supported_field_labels,
    unescape_field_value,
)

NAME_PART_ERROR = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_ERROR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
PREFIX_PART_ERROR = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
    "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
    "'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


# --- label selector strings: labels/selector_test.go ---


@pytest.mark.parametrize(
    "text",
    ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"],
)
def test_label_selector_parse_restrings_upstream_good_strings(text: str) -> None:
    # TestSelectorParse: String() is the input without blanks.
    assert str(parse_label_selector(text)) == text.replace(" ", "")


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "!x=a", "x<a"])
def test_label_selector_parse_rejects_upstream_bad_strings(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_label_selector_parse_is_deterministic() -> None:
    assert str(parse_label_selector("x=a,a=x")) == str(parse_label_selector("a=x,x=a"))


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        # TestSelectorMatches
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x", {"x": "z"}, True),
        ("!x", {"y": "z"}, True),
        ("x>1", {"x": "2"}, True),
        ("x<1", {"x": "0"}, True),
        ("x=z", {}, False),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("x", {"y": "z"}, False),
        ("!x", {"x": "z"}, False),
        ("x>1", {"x": "0"}, False),
        ("x<1", {"x": "2"}, False),
        ("foo=bar", {"foo": "bar", "baz": "blah"}, True),
        ("baz=blah", {"foo": "bar", "baz": "blah"}, True),
        ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
        ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
        ("baz=bar", {"foo": "bar", "baz": "blah"}, False),
        ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
        # TestRequirementSelectorMatching
        ("x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
        ("x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
        ("x notin (),y", {"y": ""}, True),
        ("!x,y", {"y": ""}, True),
        ("x notin (),!y", {"y": ""}, False),
        ("x in ()", {"y": "baz"}, False),
        ("z>1", {"z": "2"}, True),
        ("z>1", {"z": "v2"}, False),
        # Go's strconv.ParseInt: a sign is allowed, blanks and underscores are not.
        ("z<5", {"z": "-3"}, True),
        ("z<5", {"z": "1_0"}, False),
        ("z>1", {"z": "99999999999999999999"}, False),
    ],
)
def test_label_selector_matches_like_upstream(
    text: str, labels: dict[str, str], expected: bool
) -> None:
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "restring"),
    [
        # TestSetSelectorParser (valid inputs), as String() shows the parse
        ("\rx", "x"),
        ("this-is-a-dns.domain.com/key-with-dash", "this-is-a-dns.domain.com/key-with-dash"),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
        ),
        ("foo  in\t (abc)", "foo in (abc)"),
        ("x notin\n (abc)", "x notin (abc)"),
        ("x  notin\t\t\t(abc,def)", "x notin (abc,def)"),
        ("x in (abc,def)", "x in (abc,def)"),
        ("x in (abc,)", "x in (,abc)"),
        ("x in ()", "x in ()"),
        ("x notin (abc,def),bar,z in (),w", "bar,w,x notin (abc,def),z in ()"),
        ("x,y in (a)", "x,y in (a)"),
        ("x=a", "x=a"),
        ("x>1", "x>1"),
        ("x<7", "x<7"),
        ("x=a,y!=b", "x=a,y!=b"),
        ("x=a,y!=b,z in (h,i,j)", "x=a,y!=b,z in (h,i,j)"),
        ("x notin ( )", "x notin ()"),
        ("x notin (, a)", "x notin (,a)"),
        ("a ", "a"),
        ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
        ("x in (b,a,b)", "x in (a,b)"),
        ("x==a", "x==a"),
        ("in in (in)", "in in (in)"),
    ],
)
def test_label_selector_parses_upstream_set_syntax(text: str, restring: str) -> None:
    assert str(parse_label_selector(text)) == restring


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # TestSetSelectorParser invalid inputs, with the text the parser gives.
        ("x,y,", "found '', expected: identifier after ','"),
        (",x,y", "found ',', expected: !, identifier, or 'end of string'"),
        (
            "x nott in (y)",
            "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("a in (xyz),", "found '', expected: identifier after ','"),
        ("a in (xyz)b notin ()", "found 'b', expected: ',' or 'end of string'"),
        ("a in (xyz abc)", "unable to parse requirement: found 'abc', expected: ',' or ')'"),
        ("a notin(", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("a (", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
        ("(", "found '(', expected: !, identifier, or 'end of string'"),
        ("x in a", "unable to parse requirement: found 'a' expected: '('"),
        ("x=(a)", "unable to parse requirement: found '(', expected: identifier"),
        ("x in (a,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("x==a==b", "found '==', expected: ',' or 'end of string'"),
        # Messages kube-apiserver sent to kubectl users, verbatim.
        (
            "app:monolith",
            f'unable to parse requirement: <nil>: Invalid value: "app:monolith": {NAME_PART_ERROR}',
        ),
        ("*bar", f'unable to parse requirement: <nil>: Invalid value: "*bar": {NAME_PART_ERROR}'),
        (
            "app.kubernetes_io/name=vault",
            "unable to parse requirement: <nil>: Invalid value: "
            f'"app.kubernetes_io/name": {PREFIX_PART_ERROR}',
        ),
        (
            "/x",
            'unable to parse requirement: <nil>: Invalid value: "/x": '
            "prefix part must be non-empty",
        ),
        (
            "a" * 64,
            f'unable to parse requirement: <nil>: Invalid value: "{"a" * 64}": '
            "name part must be no more than 63 bytes",
        ),
        (
            "x=a||y",
            "unable to parse requirement: "
            f'values[0][x]: Invalid value: "a||y": {LABEL_VALUE_ERROR}',
        ),
        (
            "x<a",
            'unable to parse requirement: values[0]: Invalid value: "a": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "x>-1",
            f'unable to parse requirement: values[0][x]: Invalid value: "-1": {LABEL_VALUE_ERROR}',
        ),
        (
            "k in (-a,b_)",
            "unable to parse requirement: "
            f'[values[0][k]: Invalid value: "-a": {LABEL_VALUE_ERROR}, '
            f'values[1][k]: Invalid value: "b_": {LABEL_VALUE_ERROR}]',
        ),
        (
            'k"\u00e9=v',
            f'unable to parse requirement: <nil>: Invalid value: "k\\"\u00e9": {NAME_PART_ERROR}',
        ),
    ],
)
def test_label_selector_errors_carry_upstream_text(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as raised:
        parse_label_selector(text)
    assert str(raised.value) == message


def test_label_selector_three_part_key_error_names_the_prefix_rule() -> None:
    with pytest.raises(SelectorError, match=r"a valid label key must consist of .* "):
        parse_label_selector("a/b/c ?=? def")


def test_label_selector_stops_at_a_nul_byte_like_the_go_lexer() -> None:
    # Go's lexer reads a 0 byte as end of input: "a\x00" is just "a".
    assert str(parse_label_selector("a\x00")) == "a"


@pytest.mark.parametrize(
    ("requirements", "restring"),
    [
        # TestToString
        (
            [
                ("x", Operator.IN, ["abc", "def"]),
                ("y", Operator.NOT_IN, ["jkl"]),
                ("z", Operator.EXISTS, []),
            ],
            "x in (abc,def),y notin (jkl),z",
        ),
        (
            [
                ("x", Operator.NOT_IN, ["abc", "def"]),
                ("y", Operator.NOT_EQUALS, ["jkl"]),
                ("z", Operator.DOES_NOT_EXIST, []),
            ],
            "x notin (abc,def),y!=jkl,!z",
        ),
        (
            [
                ("x", Operator.NOT_IN, ["abc"]),
                ("y", Operator.IN, ["mno", "jkl"]),
                ("z", Operator.NOT_IN, [""]),
            ],
            "x notin (abc),y in (jkl,mno),z notin ()",
        ),
        (
            [
                ("x", Operator.EQUALS, ["abc"]),
                ("y", Operator.DOUBLE_EQUALS, ["jkl"]),
                ("z", Operator.NOT_EQUALS, ["a"]),
                ("z", Operator.EXISTS, []),
            ],
            "x=abc,y==jkl,z!=a,z",
        ),
        (
            [
                ("x", Operator.GREATER_THAN, ["2"]),
                ("y", Operator.LESS_THAN, ["8"]),
                ("z", Operator.EXISTS, []),
            ],
            "x>2,y<8,z",
        ),
    ],
)
def test_requirements_print_like_upstream(
    requirements: list[tuple[str, Operator, list[str]]], restring: str
) -> None:
    selector = LabelSelector(tuple(new_requirement(k, op, v) for k, op, v in requirements))
    assert str(selector) == restring


@pytest.mark.parametrize(
    ("key", "operator", "values", "valid"),
    [
        # TestRequirementConstructor
        ("x", Operator.IN, None, False),
        ("x", Operator.NOT_IN, [], False),
        ("x", Operator.IN, ["foo"], True),
        ("x", Operator.NOT_IN, ["foo"], True),
        ("x", Operator.EXISTS, None, True),
        ("x", Operator.DOES_NOT_EXIST, None, True),
        ("1foo", Operator.IN, ["bar"], True),
        ("1234", Operator.IN, ["bar"], True),
        ("y", Operator.GREATER_THAN, ["1"], True),
        ("z", Operator.LESS_THAN, ["6"], True),
        ("foo", Operator.GREATER_THAN, ["bar"], False),
        ("barz", Operator.LESS_THAN, ["blah"], False),
        ("a" * 254, Operator.EXISTS, None, False),
        ("x", Operator.EQUALS, ["a", "b"], False),
        ("x", Operator.EXISTS, ["a"], False),
    ],
)
def test_new_requirement_validates_like_upstream(
    key: str, operator: Operator, values: list[str] | None, valid: bool
) -> None:
    if valid:
        assert new_requirement(key, operator, values).key == key
    else:
        with pytest.raises(SelectorError):
            new_requirement(key, operator, values)


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("x=a", "x", "a"),
        ("x==a", "x", "a"),
        ("x in (a)", "x", "a"),
        ("x in (a,b)", "x", None),
        ("x!=a", "x", None),
        ("y=a", "x", None),
        ("", "x", None),
    ],
)
def test_label_selector_requires_exact_match(text: str, key: str, value: str | None) -> None:
    assert parse_label_selector(text).requires_exact_match(key) == value


# --- metav1.LabelSelector objects ---


def test_null_label_selector_object_matches_nothing() -> None:
    selector = label_selector_from_object(None)
    assert selector is NOTHING
    assert not selector.matches({})
    assert not selector.empty
    assert str(selector) == ""


@pytest.mark.parametrize(
    "obj", [{}, {"matchLabels": {}}, {"matchLabels": None, "matchExpressions": []}]
)
def test_empty_label_selector_object_matches_everything(obj: dict[str, Any]) -> None:
    selector = label_selector_from_object(obj)
    assert selector is EVERYTHING
    assert selector.empty
    assert selector.matches({"any": "thing"})


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"app": "web", "tier": "front", "env": "prod"}, True),
        ({"app": "web", "tier": "back", "env": "prod"}, True),
        ({"app": "web", "tier": "front"}, False),
        ({"app": "web", "tier": "front", "env": "prod", "canary": ""}, False),
        ({"app": "api", "tier": "front", "env": "prod"}, False),
        ({"app": "web", "tier": "db", "env": "prod"}, False),
        ({"app": "web", "env": "prod"}, True),
    ],
)
def test_label_selector_object_ands_labels_and_expressions(
    labels: dict[str, str], expected: bool
) -> None:
    selector = label_selector_from_object(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["db", "cache"]},
                {"key": "env", "operator": "In", "values": ["prod", "staging"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "app", "operator": "Exists"},
            ],
        }
    )
    assert selector.matches(labels) is expected
    assert str(selector) == "app=web,app,!canary,env in (prod,staging),tier notin (cache,db)"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: []string(nil): "
            "for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x", "y"]}]},
            'values: Invalid value: []string{"x", "y"}: '
            "values set must be empty for exists and does not exist",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
            '"Equals" is not a valid pod selector operator',
        ),
        ({"matchLabels": {"bad key": "v"}}, f'key: Invalid value: "bad key": {NAME_PART_ERROR}'),
        (
            {"matchLabels": {"k": "bad value"}},
            f'values[0][k]: Invalid value: "bad value": {LABEL_VALUE_ERROR}',
        ),
    ],
)
def test_label_selector_object_errors_carry_upstream_text(
    obj: dict[str, Any], message: str
) -> None:
    with pytest.raises(SelectorError) as raised:
        label_selector_from_object(obj)
    assert str(raised.value) == message


def test_label_selector_from_set_matches_every_pair() -> None:
    selector = label_selector_from_set({"b": "2", "a": "1"})
    assert str(selector) == "a=1,b=2"
    assert selector.matches({"a": "1", "b": "2", "c": "3"})
    assert not selector.matches({"a": "1"})
    assert label_selector_from_set({}) is EVERYTHING
    assert label_selector_from_set(None) is EVERYTHING


# --- field selectors: fields/selector_test.go ---


@pytest.mark.parametrize("text", ["x=a,y=b,z=c", "", "x!=a,y=b", "x=a\\,b", "x=a\\=b\\\\"])
def test_field_selector_restrings_upstream_good_strings(text: str) -> None:
    assert str(parse_field_selector(text)) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x=a||y=b", "invalid field selector: unescaped character in value: 61"),
        ("x==a==b", "invalid field selector: unescaped character in value: 61"),
        ("x", "invalid selector: 'x'; can't understand 'x'"),
        ("a=1,b", "invalid selector: 'a=1,b'; can't understand 'b'"),
        ("x=a\\b", "invalid field selector: invalid escape sequence: \\b"),
        ("x=a\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_field_selector_errors_carry_upstream_text(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as raised:
        parse_field_selector(text)
    assert str(raised.value) == message


def test_field_selector_parse_is_deterministic() -> None:
    assert str(parse_field_selector("x=a,a=x")) == str(parse_field_selector("a=x,x=a"))


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        # TestSelectorMatches
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
        # an absent field reads as ""
        ("x=", {}, True),
        ("x!=", {}, False),
        # blanks are part of names and values
        ("x = y", {"x": "y"}, False),
        ("x = y", {"x ": " y"}, True),
        ("x==y", {"x": "y"}, True),
        ("x=a\\,b", {"x": "a,b"}, True),
    ],
)
def test_field_selector_matches_like_upstream(
    text: str, fields: dict[str, str], expected: bool
) -> None:
    assert parse_field_selector(text).matches_fields(fields) is expected


def test_field_selector_requires_exact_match() -> None:
    selector = parse_field_selector("spec.nodeName=n1,status.phase!=Running")
    assert selector.requires_exact_match("spec.nodeName") == "n1"
    assert selector.requires_exact_match("status.phase") is None
    assert parse_field_selector("").empty


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("", ""),
        ("plain", "plain"),
        ("a,b", "a\\,b"),
        ("a=b", "a\\=b"),
        ("a\\b", "a\\\\b"),
        ("\\,=", "\\\\\\,\\="),
    ],
)
def test_field_values_escape_and_unescape(value: str, escaped: str) -> None:
    assert escape_field_value(value) == escaped
    assert unescape_field_value(escaped) == value


# --- field label conversion per kind ---

POD_FIELDS = {
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
}
EVENT_FIELDS = {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.name",
    "metadata.namespace",
}


@pytest.mark.parametrize(
    ("group", "kind", "fields"),
    [
        ("", "Pod", POD_FIELDS),
        ("", "Event", EVENT_FIELDS),
        ("", "Node", {"metadata.name", "spec.unschedulable"}),
        ("", "Namespace", {"metadata.name", "status.phase"}),
        ("", "Secret", {"metadata.name", "metadata.namespace", "type"}),
        ("", "Service", {"metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type"}),
        ("", "ReplicationController", {"metadata.name", "metadata.namespace", "status.replicas"}),
        ("apps", "ReplicaSet", {"metadata.name", "metadata.namespace"}),
        ("apps", "Deployment", {"metadata.name", "metadata.namespace"}),
        ("", "ConfigMap", {"metadata.name", "metadata.namespace"}),
    ],
)
def test_supported_field_labels_per_kind(group: str, kind: str, fields: set[str]) -> None:
    assert supported_field_labels(kind, group=group) == fields
    for label in fields:
        assert convert_field_label(kind, label, "v", group=group) == (label, "v")


@pytest.mark.parametrize(
    ("group", "kind", "label", "message"),
    [
        ("", "Pod", "spec.containers", "field label not supported: spec.containers"),
        ("", "Node", "metadata.namespace", "field label not supported: metadata.namespace"),
        ("", "Event", "message", "field label not supported: message"),
        # kubernetes/kubernetes#135136: apps/v1 registers no conversion for ReplicaSet.
        (
            "apps",
            "ReplicaSet",
            "status.replicas",
            '"status.replicas" is not a known field selector: '
            'only "metadata.name", "metadata.namespace"',
        ),
        (
            "networking.k8s.io",
            "Ingress",
            "foo.bar",
            '"foo.bar" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
    ],
)
def test_unsupported_field_labels_are_rejected_with_upstream_text(
    group: str, kind: str, label: str, message: str
) -> None:
    with pytest.raises(SelectorError) as raised:
        compile_field_selector(f"{label}=x", kind, group=group)
    assert str(raised.value) == message


def test_pod_spec_host_is_renamed_to_spec_node_name() -> None:
    assert str(compile_field_selector("spec.host=n1", "Pod")) == "spec.nodeName=n1"


def test_compile_field_selector_reports_the_first_bad_term_in_sorted_order() -> None:
    with pytest.raises(SelectorError, match=r"^field label not supported: a\.first$"):
        compile_field_selector("z.last=1,a.first=2,status.phase=Running", "Pod")
    # syntax errors win over unsupported labels
    with pytest.raises(SelectorError, match="can't understand"):
        compile_field_selector("a.first=1,zz", "Pod")


# --- field values of objects (ToSelectableFields) ---

POD: dict[str, Any] = {
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "default"},
    "spec": {
        "nodeName": "node-a",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "web",
        "hostNetwork": True,
    },
    "status": {
        "phase": "Running",
        "podIP": "10.0.0.9",
        "podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}],
    },
}
EVENT: dict[str, Any] = {
    "kind": "Event",
    "metadata": {"name": "web-1.1", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default", "uid": "u1"},
    "reason": "Evicted",
    "type": "Warning",
    "source": {"component": "kubelet", "host": "node-a"},
    "reportingComponent": "kubelet-ctl",
}


@pytest.mark.parametrize(
    ("obj", "field_name", "value"),
    [
        (POD, "metadata.name", "web-1"),
        (POD, "metadata.namespace", "default"),
        (POD, "spec.nodeName", "node-a"),
        (POD, "spec.restartPolicy", "Always"),
        (POD, "spec.schedulerName", "default-scheduler"),
        (POD, "spec.serviceAccountName", "web"),
        (POD, "spec.hostNetwork", "true"),
        (POD, "status.phase", "Running"),
        (POD, "status.podIP", "10.0.0.7"),
        (POD, "status.podIPs", ""),
        (POD, "status.nominatedNodeName", ""),
        (POD, "spec.containers", ""),
        ({"kind": "Pod", "status": {"podIP": "10.0.0.9"}}, "status.podIP", "10.0.0.9"),
        ({"kind": "Pod"}, "spec.hostNetwork", "false"),
        ({"kind": "Pod", "spec": {"hostNetwork": False}}, "spec.hostNetwork", "false"),
        (EVENT, "involvedObject.name", "web-1"),
        (EVENT, "involvedObject.uid", "u1"),
        (EVENT, "involvedObject.fieldPath", ""),
        (EVENT, "reason", "Evicted"),
        (EVENT, "type", "Warning"),
        (EVENT, "source", "kubelet"),
        (EVENT, "reportingComponent", "kubelet-ctl"),
        ({"kind": "Event", "reportingComponent": "karpenter"}, "source", "karpenter"),
        (
            {"kind": "Node", "metadata": {"name": "n"}, "spec": {"unschedulable": True}},
            "spec.unschedulable",
            "true",
        ),
        ({"kind": "Node", "metadata": {"name": "n"}}, "spec.unschedulable", "false"),
        ({"kind": "Node", "metadata": {"name": "n"}}, "metadata.namespace", ""),
        (
            {"kind": "Namespace", "metadata": {"name": "ns"}, "status": {"phase": "Active"}},
            "status.phase",
            "Active",
        ),
        ({"kind": "Namespace", "metadata": {"name": "ns"}}, "name", "ns"),
        ({"kind": "Secret", "type": "kubernetes.io/tls"}, "type", "kubernetes.io/tls"),
        (
            {"kind": "Service", "spec": {"type": "ClusterIP", "clusterIP": "None"}},
            "spec.clusterIP",
            "None",
        ),
        ({"kind": "ReplicationController", "status": {"replicas": 3}}, "status.replicas", "3"),
        ({"kind": "ReplicaSet", "status": {}}, "status.replicas", "0"),
        ({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}, "data.a", ""),
        ({"metadata": {"name": "kindless"}}, "metadata.name", "kindless"),
    ],
)
def test_field_value_reads_like_to_selectable_fields(
    obj: Mapping[str, Any], field_name: str, value: str
) -> None:
    assert field_value(obj, field_name) == value


def test_field_value_kind_can_be_given_for_kindless_objects() -> None:
    assert field_value({"spec": {}}, "spec.hostNetwork", kind="Pod") == "false"


def test_selectable_fields_lists_the_whole_set() -> None:
    fields = selectable_fields(POD)
    assert set(fields) == POD_FIELDS - {"status.podIPs"}
    assert fields["spec.hostNetwork"] == "true"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("spec.nodeName=node-a", True),
        ("spec.nodeName=node-b", False),
        ("spec.nodeName!=node-b,status.phase=Running", True),
        ("status.phase!=Running", False),
        ("spec.hostNetwork=true", True),
        ("status.podIPs=", True),
        ("metadata.namespace=default,metadata.name=web-1", True),
    ],
)
def test_compiled_field_selector_matches_pods(text: str, expected: bool) -> None:
    selector = compile_field_selector(text, "Pod")
    assert selector.matches(POD) is expected
    assert selector.matches_fields(selectable_fields(POD)) is expected


# --- properties ---

_NAME_ALNUM = "abcXYZ019"
_alnum = st.sampled_from(_NAME_ALNUM)
_label_names = st.one_of(
    _alnum,
    st.builds(
        lambda first, middle, last: first + middle + last,
        _alnum,
        st.text(alphabet=_NAME_ALNUM + "-_.", max_size=4),
        _alnum,
    ),
)
_prefixes = st.sampled_from(["", "example.com/", "k8s.io/", "a-b.c/"])
label_keys = st.builds(lambda prefix, name: prefix + name, _prefixes, _label_names)
label_values = st.one_of(st.just(""), _label_names, st.sampled_from(["in", "notin"]))
label_sets = st.dictionaries(
    st.sampled_from(["a", "b", "example.com/c", "in"]),
    st.sampled_from(["", "x", "y", "1", "7"]),
    max_size=4,
)


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(st.one_of(label_keys, st.sampled_from(["a", "b", "example.com/c", "in"])))
    operator = draw(st.sampled_from(list(Operator)))
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        values: list[str] = []
    elif operator in (Operator.IN, Operator.NOT_IN):
        values = sorted(set(draw(st.lists(label_values, min_size=1, max_size=3))))
    elif operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
        values = [str(draw(st.integers(min_value=0, max_value=99)))]
    else:
        values = [draw(st.one_of(label_values, st.sampled_from(["x", "y", "1"])))]
    return new_requirement(key, operator, values)


label_selectors = st.lists(requirements(), max_size=4).map(
    lambda reqs: LabelSelector(tuple(sorted(reqs, key=lambda r: r.key)))
)


@given(label_selectors, label_sets)
def test_label_selector_string_round_trips(selector: LabelSelector, labels: dict[str, str]) -> None:
    reparsed = parse_label_selector(str(selector))
    assert str(reparsed) == str(selector)
    assert reparsed.matches(labels) == selector.matches(labels)


@given(st.text(max_size=30))
def test_label_selector_parser_only_fails_with_selector_errors(text: str) -> None:
    try:
        selector = parse_label_selector(text)
    except SelectorError:
        return
    assert parse_label_selector(str(selector)) == selector


@given(st.sampled_from(["a", "example.com/c"]), label_values, label_sets)
def test_equality_and_notin_are_complementary(key: str, value: str, labels: dict[str, str]) -> None:
    equal = parse_label_selector(f"{key}={value}").matches(labels)
    assert parse_label_selector(f"{key} notin ({value})").matches(labels) is not equal
    assert parse_label_selector(f"{key}!={value}").matches(labels) is not equal
    assert parse_label_selector(f"{key} in ({value})").matches(labels) is equal
    exists = parse_label_selector(key).matches(labels)
    assert parse_label_selector("!" + key).matches(labels) is not exists
    assert exists is (key in labels)


@st.composite
def label_selector_objects(draw: st.DrawFn) -> dict[str, Any]:
    operators = {"In": True, "NotIn": True, "Exists": False, "DoesNotExist": False}
    expressions = []
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        operator = draw(st.sampled_from(sorted(operators)))
        expression: dict[str, Any] = {
            "key": draw(st.sampled_from(["a", "b", "in"])),
            "operator": operator,
        }
        if operators[operator]:
            expression["values"] = draw(st.lists(label_values, min_size=1, max_size=3))
        expressions.append(expression)
    match_labels = draw(st.dictionaries(st.sampled_from(["a", "b"]), label_values, max_size=2))
    return {"matchLabels": match_labels, "matchExpressions": expressions}


@given(label_selector_objects(), label_sets)
def test_label_selector_object_and_its_string_select_alike(
    obj: dict[str, Any], labels: dict[str, str]
) -> None:
    selector = label_selector_from_object(obj)
    assert parse_label_selector(str(selector)).matches(labels) == selector.matches(labels)


@given(st.text(max_size=20))
def test_field_value_escaping_round_trips(value: str) -> None:
    assert unescape_field_value(escape_field_value(value)) == value


field_terms = st.builds(
    FieldRequirement,
    st.sampled_from(["metadata.name", "spec.nodeName", "status.phase", "x"]),
    st.sampled_from([Operator.EQUALS, Operator.NOT_EQUALS]),
    st.text(max_size=8),
)


@given(
    st.lists(field_terms, max_size=4),
    st.dictionaries(st.sampled_from(["metadata.name", "x"]), st.text(max_size=8)),
)
def test_field_selector_string_round_trips(
    terms: list[FieldRequirement], fields: dict[str, str]
) -> None:
    text = ",".join(str(term) for term in terms)
    selector = parse_field_selector(text)
    assert sorted(selector.requirements, key=str) == sorted(terms, key=str)
    assert str(selector) == ",".join(sorted(str(term) for term in terms))
    assert selector.matches_fields(fields) == all(term.matches_fields(fields) for term in terms)


def test_compiled_selectors_are_kept_by_content_not_by_identity() -> None:
    labels, expression = {"app": "a"}, {"key": "tier", "operator": "In", "values": ["x"]}
    selector: dict[str, Any] = {"matchLabels": labels, "matchExpressions": [expression]}
    assert label_selector_from_object(selector).matches({"app": "a", "tier": "x"})
    labels["app"] = "b"  # the same dicts, changed: compiled afresh
    expression["values"] = ["y"]
    compiled = label_selector_from_object(selector)
    assert compiled.matches({"app": "b", "tier": "y"})
    assert not compiled.matches({"app": "a", "tier": "x"})


def test_a_refused_selector_is_refused_every_time_with_upstreams_text() -> None:
    bad = {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}
    messages = []
    for _ in range(2):
        with pytest.raises(SelectorError) as refused:
            label_selector_from_object(bad)
        messages.append(str(refused.value))
    assert messages[0] == messages[1] and "Bogus" in messages[0]
