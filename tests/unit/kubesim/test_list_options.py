"""ListOptions as kube-apiserver 1.34 reads them: the WatchList defaulting and the
validation of sendInitialEvents and resourceVersionMatch (each case from
ValidateListOptions; the messages are measured against kube-apiserver by the differential
suite's "watch: the streaming list (sendInitialEvents)")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.apiserver.errors import ApiError
from kubesim.apiserver.list_options import list_options, query_bool

FORBIDDEN_NO_MATCH = (
    "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch "
    "to NotOlderThan"
)
FORBIDDEN_NO_SEND = (
    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
    "sendInitialEvents is provided"
)


@pytest.mark.parametrize(
    ("query", "send", "match", "watch_list"),
    [
        ({}, True, "NotOlderThan", False),
        ({"allowWatchBookmarks": "true"}, True, "NotOlderThan", True),
        ({"resourceVersion": "0", "allowWatchBookmarks": "1"}, True, "NotOlderThan", True),
        ({"resourceVersion": "7", "allowWatchBookmarks": "true"}, None, "", False),
        ({"sendInitialEvents": "false", "resourceVersionMatch": "NotOlderThan",
          "allowWatchBookmarks": "true"}, False, "NotOlderThan", False),
        ({"sendInitialEvents": "", "resourceVersionMatch": "NotOlderThan",
          "allowWatchBookmarks": "yes"}, True, "NotOlderThan", True),
        ({"sendInitialEvents": "FALSE", "resourceVersionMatch": "NotOlderThan"},
         False, "NotOlderThan", False),
    ],
)  # fmt: skip
def test_watch_defaults(
    query: dict[str, str], send: bool | None, match: str, watch_list: bool
) -> None:
    options = list_options(query, watch=True)
    assert (options.send_initial_events, options.resource_version_match) == (send, match)
    assert options.watch_list is watch_list


@pytest.mark.parametrize(
    ("query", "watch", "message"),
    [
        ({"sendInitialEvents": "true"}, True, FORBIDDEN_NO_MATCH),
        ({"resourceVersionMatch": "NotOlderThan"}, True, FORBIDDEN_NO_SEND),
        ({"resourceVersionMatch": "Exact", "resourceVersion": "1"}, True,
         f'[{FORBIDDEN_NO_SEND}, resourceVersionMatch: Unsupported value: "Exact": supported '
         'values: "NotOlderThan"]'),
        ({"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
          "continue": "x"}, True,
         "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is "
         "provided"),
        ({"sendInitialEvents": "true"}, False,
         "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"),
        ({"resourceVersionMatch": "Exact"}, False,
         "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
         "resourceVersion is provided"),
        ({"resourceVersionMatch": "Exact", "resourceVersion": "0"}, False,
         'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
         'resourceVersion "0"'),
        ({"resourceVersionMatch": "Newest", "resourceVersion": "0"}, False,
         'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", '
         '"NotOlderThan", ""'),
    ],
)  # fmt: skip
def test_invalid_options_are_422_list_options(
    query: dict[str, str], watch: bool, message: str
) -> None:
    with pytest.raises(ApiError) as err:
        list_options(query, watch=watch)
    status = err.value.status()
    assert status["code"] == 422
    assert status["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}'
    assert status["details"]["group"] == "meta.k8s.io"
    assert status["details"]["kind"] == "ListOptions"


@pytest.mark.parametrize(
    "query",
    [{}, {"resourceVersion": "5"}, {"resourceVersion": "5", "resourceVersionMatch": "Exact"},
     {"resourceVersion": "0", "resourceVersionMatch": "NotOlderThan"}, {"limit": "2"}],
)  # fmt: skip
def test_valid_lists(query: dict[str, str]) -> None:
    assert list_options(query, watch=False).send_initial_events is None


@given(st.text(max_size=8))
def test_query_bool_is_false_only_for_0_and_false(raw: str) -> None:
    assert query_bool(raw) is not (raw == "0" or raw.lower() == "false")


@given(
    st.sampled_from(["", "0", "1", "42"]),
    st.sampled_from([None, "true", "false"]),
    st.sampled_from(["", "NotOlderThan", "Exact"]),
)
def test_a_watch_is_valid_exactly_when_both_or_neither_are_given(
    rv: str, send: str | None, match: str
) -> None:
    """After defaulting, a watch needs sendInitialEvents and resourceVersionMatch=NotOlderThan
    together, or neither (a watch from "" or "0" gets both by default)."""
    query = {"resourceVersion": rv, "resourceVersionMatch": match}
    if send is not None:
        query["sendInitialEvents"] = send
    defaulted = send is None and not match and rv in ("", "0")
    valid = (send is not None and match == "NotOlderThan") or (send is None and not match)
    try:
        options = list_options(query, watch=True)
    except ApiError:
        assert not valid
    else:
        assert valid
        assert (options.send_initial_events is not None) == (defaulted or send is not None)
