"""A list or watch request's ListOptions as kube-apiserver 1.34 reads them: the query's
booleans, the WatchList defaulting and the validation of ``resourceVersionMatch`` and
``sendInitialEvents`` (k8s.io/apimachinery pkg/apis/meta/internalversion: defaults.go
``SetListOptionsDefaults``, validation/validation.go ``ValidateListOptions``; the WatchList
feature gate is on by default from 1.34).

The streaming list (KEP-3157) is a watch with ``sendInitialEvents=true`` and
``resourceVersionMatch=NotOlderThan``: the current state as ADDED events, then, when the
client allows bookmarks, one BOOKMARK annotated ``k8s.io/initial-events-end: "true"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import invalid

NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def query_bool(raw: str) -> bool:
    """``Convert_Slice_string_To_bool``: only "0" and "false" (any case) are false."""
    return not (raw == "0" or raw.lower() == "false")


@dataclass(frozen=True)
class ListOptions:
    resource_version: str
    resource_version_match: str
    send_initial_events: bool | None
    allow_watch_bookmarks: bool

    @property
    def watch_list(self) -> bool:
        """The cacher's ``isListWatchRequest``: initial events ending in the annotated
        bookmark."""
        return bool(self.send_initial_events) and self.allow_watch_bookmarks


def _unsupported(value: str, supported: tuple[str, ...]) -> str:
    shown = ", ".join(f'"{s}"' for s in supported)
    return f'Unsupported value: "{value}": supported values: {shown}'


def _validate_watch(options: ListOptions, continue_: str) -> list[tuple[str, str]]:
    errors: list[tuple[str, str]] = []
    match = options.resource_version_match
    if options.send_initial_events is not None and match != NOT_OLDER_THAN:
        errors.append(("resourceVersionMatch", "Forbidden: sendInitialEvents requires setting "
                       f"resourceVersionMatch to {NOT_OLDER_THAN}"))  # fmt: skip
    if match:
        if options.send_initial_events is None:
            errors.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is "
                           "forbidden for watch unless sendInitialEvents is provided"))  # fmt: skip
        if match != NOT_OLDER_THAN:
            errors.append(("resourceVersionMatch", _unsupported(match, (NOT_OLDER_THAN,))))
        if continue_:
            errors.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is "
                           "forbidden when continue is provided"))  # fmt: skip
    return errors


def _validate_list(options: ListOptions, continue_: str) -> list[tuple[str, str]]:
    errors: list[tuple[str, str]] = []
    match = options.resource_version_match
    if match:
        if not options.resource_version:
            errors.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is "
                           "forbidden unless resourceVersion is provided"))  # fmt: skip
        if continue_:
            errors.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is "
                           "forbidden when continue is provided"))  # fmt: skip
        if match not in (EXACT, NOT_OLDER_THAN):
            supported = (EXACT, NOT_OLDER_THAN, "")
            errors.append(("resourceVersionMatch", _unsupported(match, supported)))
        if match == EXACT and options.resource_version == "0":
            errors.append(("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is '
                           'forbidden for resourceVersion "0"'))  # fmt: skip
    if options.send_initial_events is not None:
        errors.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
    return errors


def list_options(query: Mapping[str, str], watch: bool) -> ListOptions:
    """The request's options, defaulted as the WatchList gate has it (a watch from "" or "0"
    that names neither sendInitialEvents nor resourceVersionMatch is a streaming list);
    raises 422 Invalid (kind ``ListOptions.meta.k8s.io``) for the combinations upstream
    rejects."""
    raw_send = query.get("sendInitialEvents")
    options = ListOptions(
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
        send_initial_events=None if raw_send is None else query_bool(raw_send),
        allow_watch_bookmarks=query_bool(query.get("allowWatchBookmarks", "false")),
    )
    if (
        watch
        and options.send_initial_events is None
        and not options.resource_version_match
        and options.resource_version in ("", "0")
    ):
        options = ListOptions(options.resource_version, NOT_OLDER_THAN, True,
                              options.allow_watch_bookmarks)  # fmt: skip
    continue_ = query.get("continue", "")
    errors = _validate_watch(options, continue_) if watch else _validate_list(options, continue_)
    if errors:
        raise invalid("meta.k8s.io", "ListOptions", "", errors)
    return options
