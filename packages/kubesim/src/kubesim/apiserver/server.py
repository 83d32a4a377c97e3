"""The HTTP front of kubesim: routing, authentication, authorization, verbs, watch.

One catch-all aiohttp handler parses the path the way the real API server's
RequestInfoFactory does, then dispatches on (verb, subresource). Object
lifecycle lives in `registry`, storage in `store`.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from kubesim.apiserver.event_versions import to_core_event, to_events_v1
from kubesim.apiserver.openapi.v3 import RawResponse
from kubesim.apiserver.patching.apply import APPLY_PATCH_CONTENT_TYPE
from kubesim.apiserver.protobuf.decode import decode_body
from kubesim.types import Obj

from .. import jsoncodec
from . import discovery, hpa_versions, managed_fields, podlogs, tables, validation
from .audit import AuditLog, AuditRecord, now_stamp
from .auth import TokenAuthenticator, UserInfo, service_account_user
from .errors import (
    ApiError,
    bad_request,
    invalid,
    method_not_allowed,
    path_not_found,
    unauthorized,
)
from .faults import FaultInjector
from .list_options import INITIAL_EVENTS_END, list_options
from .managed_fields import Manager
from .meta import rfc3339
from .query import match_everything
from .rbac import (
    AuthorizationDecision,
    RequestAttributes,
    RulesReview,
    forbidden_message,
    non_resource_request,
)
from .registry import Registry
from .requestinfo import RequestInfo, named_by_field_selector, parse_request
from .resources import ResourceRegistry, ResourceType
from .store import Ordered, Predicate, WatchEvent, storage_order_key

JSON = "application/json"
MAX_BODY_BYTES = 8 * 1024 * 1024
WATCH_BATCH_EVENTS = 500  # at most this many queued watch events per write
# responsewriters' deferredResponseWriter (APIResponseCompression, on by default): a response
# body over 128 KiB goes out gzip-compressed at level 1 when the request accepts gzip.
GZIP_THRESHOLD_BYTES = 128 * 1024
GZIP_LEVEL = 1
log = logging.getLogger(__name__)


Authorizer = Callable[[RequestAttributes], AuthorizationDecision]


@dataclass(frozen=True, slots=True)
class AdmissionAttributes:
    """What a validating admission webhook is asked about (one write)."""

    rt: ResourceType
    subresource: str
    operation: str  # CREATE UPDATE DELETE CONNECT
    namespace: str
    name: str
    object: Obj | None
    old_object: Obj | None
    options: Obj | None
    dry_run: bool
    user: UserInfo
    # The Kind of `object` when it differs from rt.kind (an Eviction for pods/eviction).
    kind_group: str | None = None
    kind_version: str | None = None
    kind: str | None = None
    # The resource the request addressed when it differs from rt, the stored type
    # (events.k8s.io/v1 events); object and old_object stay in rt's storage form.
    requested: ResourceType | None = None


Admitter = Callable[[AdmissionAttributes], Awaitable[None]]
_NO_EVENT: Any = object()  # a watch's wait for its next event timed out
SubresourceHandler = Callable[["RequestContext"], Awaitable[web.StreamResponse]]


@dataclass
class RequestContext:
    request: web.BaseRequest
    info: RequestInfo
    rt: ResourceType
    user: UserInfo
    namespace: str  # storage namespace ("" for cluster-scoped)
    dry_run: bool

    async def json_body(self) -> Any:
        """The request body as JSON, decoded from JSON or Kubernetes protobuf."""
        return decode_body(await self.request.read(), self.request.headers.get("Content-Type", ""))


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=jsoncodec.dumps(body), status=status, content_type=JSON)


def negotiated_json_response(
    request: web.BaseRequest, body: Any, status: int = 200
) -> web.Response:
    """An object or list as kube-apiserver writes it: gzip-compressed past the threshold when
    the request's Accept-Encoding names gzip."""
    data = jsoncodec.dumps(body)
    if len(data) <= GZIP_THRESHOLD_BYTES or not accepts_gzip(
        request.headers.get("Accept-Encoding")
    ):
        return web.Response(body=data, status=status, content_type=JSON)
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    response = web.Response(
        body=compressor.compress(data) + compressor.flush(), status=status, content_type=JSON
    )
    response.headers["Content-Encoding"] = "gzip"
    response.headers["Vary"] = "Accept-Encoding"
    return response


def accepts_gzip(accept_encoding: str | None) -> bool:
    """negotiateContentEncoding: a comma-separated token that is exactly "gzip" (a quality
    value, "gzip;q=1", does not count)."""
    return any(token.strip() == "gzip" for token in (accept_encoding or "").split(","))


def error_response(err: ApiError) -> web.Response:
    response = json_response(err.status(), err.code)
    # responsewriters.ErrorNegotiated: a Status asking for a delay becomes Retry-After.
    retry_after = (err.details or {}).get("retryAfterSeconds")
    if isinstance(retry_after, int) and retry_after > 0:
        response.headers["Retry-After"] = str(retry_after)
    return response


# Kinds whose registry strategy's AllowCreateOnUpdate is true (pkg/registry/*/strategy.go):
# a PUT to a missing object creates it.
CREATE_ON_UPDATE_KINDS = frozenset({
    "Lease", "Event", "Endpoints", "LimitRange", "Service", "Role", "RoleBinding", "ClusterRole",
    "ClusterRoleBinding", "RuntimeClass",
})  # fmt: skip
_OPTIONS_KIND = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions",
                 "delete": "DeleteOptions", "deletecollection": "DeleteOptions"}  # fmt: skip


def _dry_run(request: web.BaseRequest, verb: str) -> bool:
    """The dryRun query parameter, validated as apimachinery's ValidateDryRun does."""
    values = request.query.getall("dryRun", [])
    if any(value != "All" for value in values):
        shown = json.dumps(values, separators=(",", ":"))
        raise invalid(
            "meta.k8s.io",
            _OPTIONS_KIND.get(verb, "CreateOptions"),
            "",
            [("dryRun", f'Unsupported value: {shown}: supported values: "All"')],
        )
    return bool(values)


PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")


def _validate_delete_options(options: Obj) -> bool:
    """A DeleteOptions body as apimachinery's ValidateDeleteOptions checks it; whether it
    asks for a dry run."""
    causes = []
    policy = options.get("propagationPolicy")
    if options.get("orphanDependents") is not None and policy is not None:
        causes.append(("propagationPolicy", f"Invalid value: {json.dumps(policy)}: "
                       "orphanDependents and deletionPropagation cannot be both set"))  # fmt: skip
    if policy is not None and policy not in PROPAGATION_POLICIES:
        supported = 'supported values: "Foreground", "Background", "Orphan", "nil"'
        causes.append(("propagationPolicy",
                       f"Unsupported value: {json.dumps(policy)}: {supported}"))  # fmt: skip
    dry_run = options.get("dryRun") or []
    if not isinstance(dry_run, list) or any(value != "All" for value in dry_run):
        shown = json.dumps(dry_run, separators=(",", ":"))
        causes.append(("dryRun", f'Unsupported value: {shown}: supported values: "All"'))
    if causes:
        raise invalid("meta.k8s.io", "DeleteOptions", "", causes)
    return bool(dry_run)


class ApiServer:
    def __init__(
        self,
        registry: Registry,
        authenticator: TokenAuthenticator,
        audit: AuditLog,
        faults: FaultInjector,
        server_minor_version: int = 32,
        bookmark_interval: float = 5.0,
    ) -> None:
        self.registry = registry
        self.resources: ResourceRegistry = registry.resources
        self.store = registry.store
        self.authenticator = authenticator
        self.audit = audit
        self.faults = faults
        self.minor_version = server_minor_version
        self.bookmark_interval = bookmark_interval
        self.authorizer: Authorizer | None = None
        self.rules_resolver: Callable[[UserInfo, str], RulesReview] | None = None
        self.admitters: list[Admitter] = []
        self.subresource_handlers: dict[tuple[str, str, str], SubresourceHandler] = {}
        self.address = "127.0.0.1:0"
        self.openapi: Callable[[str, str], Obj | RawResponse | None] | None = None
        self.register_subresource("", "pods", "binding", self._pod_binding)
        self.register_subresource("", "serviceaccounts", "token", self._token_request)
        self.register_subresource("", "pods", "log", self._pod_log)
        for sub, what in (("exec", "exec into"), ("attach", "attach to"),
                          ("portforward", "forward a port of")):  # fmt: skip
            self.register_subresource("", "pods", sub, self._unsimulated(what))

    def register_subresource(
        self, group: str, plural: str, sub: str, handler: SubresourceHandler
    ) -> None:
        self.subresource_handlers[(group, plural, sub)] = handler

    def app(self) -> web.Application:
        """The application served on HTTPS to every client."""
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_response_prepare.append(_no_cache)
        return app

    def local_server(self) -> web.Server:
        """The same handler as aiohttp's low-level server, for kubesim's own components on
        its private socket: no router (`app` has one catch-all route), middlewares or
        signals (`_no_cache`'s header is set here and by the watch), no Expect: 100-continue
        (kubesim's socket client, socket_http, never sends it), and, as on HTTPS, no access log."""

        async def handle(request: web.BaseRequest) -> web.StreamResponse:
            response = await self.handle(request)
            if not response.prepared:  # a watch's stream has its header already
                _no_cache_header(response)
            return response

        def make_request(
            message: Any, payload: Any, protocol: Any, writer: Any, task: Any
        ) -> web.BaseRequest:
            return web.BaseRequest(message, payload, protocol, writer, task,
                                   asyncio.get_running_loop(),
                                   client_max_size=MAX_BODY_BYTES)  # fmt: skip

        return web.Server(handle, request_factory=make_request, access_log=None)

    # entry point

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        info = named_by_field_selector(
            parse_request(
                request.method, request.path, request.query.get("watch") in ("1", "true")
            ),
            request.query.get("fieldSelector", ""),
        )
        user = self.authenticator.authenticate(request.headers.get("Authorization"))
        code = 500
        try:
            if user is None:
                raise unauthorized()
            user = self._impersonate(user, request)
            fault = self.faults.action_for(info, user.username)
            if fault is not None:
                if fault.hang:
                    await asyncio.Event().wait()
                if fault.latency_seconds:
                    await asyncio.sleep(fault.latency_seconds)
                if fault.error_code is not None:
                    raise ApiError(fault.error_code, f"kubesim: injected fault {fault.error_code}")
            self._authorize(user, info)
            response = await self._dispatch(request, info, user)
            code = response.status
            return response
        except ApiError as err:
            code = err.code
            return error_response(err)
        except Exception as exc:  # a kubesim bug: answer like the real server's panic handler
            log.exception("kubesim: unhandled error on %s %s", request.method, request.path)
            return error_response(
                ApiError(500, f"Internal error occurred: {exc!r}", "InternalError")
            )
        finally:
            self.audit.record(
                AuditRecord(
                    now_stamp(),
                    user.username if user else "",
                    user.groups if user else (),
                    info.verb,
                    info.api_group,
                    info.resource,
                    info.subresource,
                    info.name,
                    info.namespace,
                    code,
                    str(request.rel_url),
                    request.headers.get("User-Agent", ""),
                )
            )

    def _impersonate(self, user: UserInfo, request: web.BaseRequest) -> UserInfo:
        """Impersonate-User / Impersonate-Group headers, authorized as upstream's filter does
        (verb `impersonate` on users, groups or serviceaccounts)."""
        target = request.headers.get("Impersonate-User")
        groups = request.headers.getall("Impersonate-Group", [])
        if not target:
            if groups:
                raise bad_request("requested impersonation of groups without a user")
            return user
        prefix = "system:serviceaccount:"
        if target.startswith(prefix) and target.count(":") == 3:
            namespace, name = target[len(prefix) :].split(":")
            checks = [("serviceaccounts", namespace, name)]
            if not groups:
                impersonated = service_account_user(namespace, name)
                groups = list(impersonated.groups)
        else:
            checks = [("users", "", target)]
        checks += [("groups", "", g) for g in groups if g != "system:authenticated"]
        for resource, namespace, name in checks:
            if self.authorizer is None:
                break
            attrs = RequestAttributes(user, "impersonate", True, namespace, "", "", resource, "",
                                      name)  # fmt: skip
            decision = self.authorizer(attrs)
            if not decision.allowed:
                raise ApiError(403, forbidden_message(attrs, decision.reason), "Forbidden")
        if "system:authenticated" not in groups:
            groups.append("system:authenticated")
        return UserInfo(target, tuple(groups))

    def _authorize(self, user: UserInfo, info: RequestInfo) -> None:
        if self.authorizer is None:
            return
        attrs = _attributes(user, info)
        decision = self.authorizer(attrs)
        if not decision.allowed:
            message = forbidden_message(attrs, decision.reason)
            details: Obj = {"name": info.name}
            if info.api_group:
                details["group"] = info.api_group
            details["kind"] = info.resource
            raise ApiError(403, message, "Forbidden", details)

    async def _dispatch(
        self, request: web.BaseRequest, info: RequestInfo, user: UserInfo
    ) -> web.StreamResponse:
        if not info.is_resource_request:
            return await self._non_resource(request, info)
        rt = self.resources.lookup(info.api_group, info.api_version, info.resource)
        if rt is None and not self.resources.in_group_version(info.api_group, info.api_version):
            # No handler for the group version at all: the mux's plain-text 404.
            return web.Response(status=404, text="404 page not found\n")
        if rt is None:
            raise path_not_found()
        namespace = info.namespace if rt.namespaced else ""
        if (
            rt.namespaced
            and info.verb in ("get", "update", "patch", "delete", "create")
            and (not namespace and (info.name or info.verb == "create"))
        ):
            raise path_not_found()
        sub = info.subresource
        subresource = rt.subresource(sub) if sub else None
        if sub and subresource is None:
            raise path_not_found()
        if subresource is not None and info.verb not in subresource.verbs:
            raise method_not_allowed()  # the router's answer, before the object is looked up
        ctx = RequestContext(request, info, rt, user, namespace, _dry_run(request, info.verb))
        if sub and sub not in ("status", "scale", "finalize"):
            handler = self.subresource_handlers.get((rt.group, rt.plural, sub))
            if handler is None:
                raise method_not_allowed()
            return await handler(ctx)
        if sub == "scale":
            return await self._scale(ctx)
        if rt.virtual:
            return await self._virtual(ctx)
        verb = info.verb
        if verb not in rt.verbs:  # e.g. deletecollection of namespaces or services
            raise method_not_allowed()
        if verb == "get":
            return self._get(ctx)
        if verb == "list":
            return self._list(ctx)
        if verb == "watch":
            return await self._watch(ctx)
        if verb == "create" and not sub:
            return await self._create(ctx)
        if verb == "update":
            return await self._update(ctx)
        if verb == "patch":
            return await self._patch(ctx)
        if verb == "delete" and not sub:
            return await self._delete(ctx)
        if verb == "deletecollection" and not sub:
            return await self._delete_collection(ctx)
        raise method_not_allowed()

    async def _non_resource(
        self, request: web.BaseRequest, info: RequestInfo
    ) -> web.StreamResponse:
        path = info.path.rstrip("/") or "/"
        if path == "/version":
            return json_response(discovery.version_info(self.minor_version))
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if path == "/api":
            return json_response(discovery.api_versions(self.address))
        if path == "/api/v1":
            doc = discovery.api_resource_list(self.resources, "", "v1")
            return json_response(doc)
        if path == "/apis":
            return json_response(discovery.api_group_list(self.resources))
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) == 2:
            group_doc = discovery.api_group(self.resources, parts[1])
            if group_doc is not None:
                return json_response(group_doc)
        if parts[0] == "apis" and len(parts) == 3:
            gv_doc = discovery.api_resource_list(self.resources, parts[1], parts[2])
            if gv_doc is not None:
                return json_response(gv_doc)
        if parts[0] == "openapi" and self.openapi is not None:
            spec = self.openapi(str(request.rel_url), request.headers.get("Accept", ""))
            if isinstance(spec, RawResponse):
                return web.Response(
                    status=spec.status, body=spec.body, content_type=spec.content_type
                )
            if spec is not None:
                return json_response(spec)
        raise path_not_found()

    # conversion between the stored form and the served version

    def _out(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt.storage_of is not None and rt.group == "events.k8s.io":
            return to_events_v1(obj)
        if rt.storage_of is not None and rt.group == "autoscaling":
            return hpa_versions.to_v1(obj)
        return obj

    def _in(self, rt: ResourceType, obj: Any) -> Any:
        if rt.storage_of is None or not isinstance(obj, dict):
            return obj
        if rt.group == "events.k8s.io":
            return to_core_event(obj)
        if rt.group == "autoscaling":
            return hpa_versions.to_v2(obj)
        return obj

    def _stored_type(self, rt: ResourceType) -> ResourceType:
        if rt.storage_of is None:
            return rt
        return self.resources.storage_type(rt)

    def _respond_object(self, ctx: RequestContext, obj: Obj, status: int = 200) -> web.Response:
        out = self._out(ctx.rt, obj)
        if tables.wants_table(ctx.request.headers.get("Accept", "")):
            out = tables.to_table(ctx.rt, [out], self._rv_str(), ctx.request)
        return negotiated_json_response(ctx.request, out, status)

    def _rv_str(self) -> str:
        return str(self.store.revision)

    # verbs

    def _get(self, ctx: RequestContext) -> web.Response:
        obj = self.registry.get(self._stored_type(ctx.rt), ctx.namespace, ctx.info.name)
        return self._respond_object(ctx, obj)

    def _predicate(self, ctx: RequestContext, *, scoped: bool = True) -> Predicate:
        """The request's selectors, and its namespace unless `scoped` is False (lists take
        the namespace as a range of storage keys instead)."""
        from .query import build_predicate

        namespace = ctx.info.namespace if ctx.rt.namespaced and scoped else None
        return build_predicate(
            ctx.rt,
            namespace or None,
            ctx.request.query.get("labelSelector", ""),
            ctx.request.query.get("fieldSelector", ""),
        )

    def _list(self, ctx: RequestContext) -> web.Response:
        list_options(ctx.request.query, watch=False)
        predicate = self._predicate(ctx, scoped=False)
        stored = self._stored_type(ctx.rt)
        namespace = ctx.info.namespace if ctx.rt.namespaced and ctx.info.namespace else None
        list_rv = self._rv_str()
        limit_raw = ctx.request.query.get("limit")
        cont = ctx.request.query.get("continue")
        meta: Obj = {}
        after: str | None = None
        if cont:
            after, list_rv = _decode_continue(cont)
        limit = 0
        if limit_raw:
            try:
                limit = int(limit_raw)
            except ValueError:
                raise bad_request(f"invalid limit: {limit_raw}") from None
        ordered = self.store.ordered(stored.storage_key)
        items, remaining = list_page(ordered, namespace, predicate, after, limit)
        if remaining:
            meta["continue"] = _encode_continue(storage_order_key(items[-1]), list_rv)
            # etcd3's store counts what is left only when no selector filters the list.
            query = ctx.request.query
            if not query.get("labelSelector") and not query.get("fieldSelector"):
                meta["remainingItemCount"] = remaining
        meta["resourceVersion"] = list_rv
        out_items = [self._out(ctx.rt, o) for o in items]
        if tables.wants_table(ctx.request.headers.get("Accept", "")):
            table = tables.to_table(ctx.rt, out_items, list_rv, ctx.request)
            table["metadata"].update(meta)
            return negotiated_json_response(ctx.request, table)
        # Items of a typed list carry no kind/apiVersion upstream.
        list_items = []
        for obj in out_items:  # a shallow copy and two pops: a third of a dict comprehension
            item = obj.copy()
            item.pop("kind", None)
            item.pop("apiVersion", None)
            list_items.append(item)
        body = {
            "kind": f"{ctx.rt.kind}List",
            "apiVersion": ctx.rt.api_version,
            "metadata": meta,
            "items": list_items,
        }
        return negotiated_json_response(ctx.request, body)

    async def _watch(self, ctx: RequestContext) -> web.StreamResponse:
        predicate = self._predicate(ctx)
        if ctx.info.name:
            name = ctx.info.name
            base = predicate

            def predicate(obj: Obj) -> bool:
                return bool(obj["metadata"]["name"] == name and base(obj))

        options = list_options(ctx.request.query, watch=True)
        rv_param = options.resource_version
        requested = 0
        if rv_param not in ("", "0"):
            try:
                requested = int(rv_param)
            except ValueError:
                # The watch cache's parse error, answered as an internal error upstream.
                raise ApiError(
                    500,
                    f"resourceVersion: Invalid value: {json.dumps(rv_param)}: "
                    f"strconv.ParseUint: parsing {json.dumps(rv_param)}: "
                    "invalid syntax",
                    reason="",
                ) from None
        since: int | None
        if options.send_initial_events:
            since = None  # the current state first, whatever revision it is not older than
        elif rv_param in ("", "0"):
            since = self.store.revision  # sendInitialEvents=false: from now on
        else:
            since = requested
        bookmarks = options.allow_watch_bookmarks
        timeout = _timeout_seconds(ctx.request)
        stored = self._stored_type(ctx.rt)
        response = web.StreamResponse(headers={"Content-Type": JSON})
        _no_cache_header(response)  # here, not by the app's signal: see local_server
        response.enable_chunked_encoding()
        try:
            watcher = self.store.watch(stored.storage_key, since, predicate)
        except ApiError as err:
            # The watch cache answers a too-old resourceVersion inside a 200 stream, as one
            # ERROR event carrying the 410 Status (cacher's newErrWatcher upstream).
            await response.prepare(ctx.request)
            await _write_event(response, "ERROR", err.status())
            return response
        if options.watch_list:
            # The initial events end in a bookmark at the revision they were read at, before
            # any change made after (nothing ran between the snapshot and this).
            watcher.queue.put_nowait(WatchEvent("BOOKMARK", self._bookmark(ctx.rt, initial=True)))
        as_table = tables.wants_table(ctx.request.headers.get("Accept", ""))
        await response.prepare(ctx.request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout is not None else None
        next_bookmark = loop.time() + self.bookmark_interval
        first = True
        try:
            while True:
                wait = max(next_bookmark - loop.time(), 0) if bookmarks else None
                if deadline is not None:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    wait = remaining if wait is None else min(wait, remaining)
                if not watcher.queue.empty():
                    # Not through wait_for: with no time left it would time out with an
                    # event queued, and the loop would never send it.
                    event = watcher.queue.get_nowait()
                else:
                    try:
                        event = await asyncio.wait_for(watcher.queue.get(), wait)
                    except TimeoutError:
                        event = _NO_EVENT
                if self.faults.watch_silenced(ctx.info, ctx.user.username):
                    await asyncio.Event().wait()  # half-open: nothing more, ever
                if event is _NO_EVENT:
                    # Only once the interval is over: a watch that times out first ends
                    # without one, as the watch cache's bookmark timer has it.
                    if bookmarks and watcher.queue.empty() and loop.time() >= next_bookmark:
                        await self._send_bookmark(response, ctx.rt)
                        next_bookmark = loop.time() + self.bookmark_interval
                    continue
                # With it, everything queued goes out in one write: one TLS record and one
                # send per batch, not per event, when a burst of changes meets many watchers.
                lines: list[bytes] = []
                closed = False
                while True:
                    if event is None:
                        closed = True
                        break
                    if event.type == "BOOKMARK":
                        lines.append(event.line())
                        if watcher.queue.empty() or len(lines) == WATCH_BATCH_EVENTS:
                            break
                        event = watcher.queue.get_nowait()
                        continue
                    obj = self._out(ctx.rt, event.object)
                    if as_table:
                        obj = tables.to_table(ctx.rt, [obj], self._rv_str(), ctx.request,
                                              include_columns=first)  # fmt: skip
                        first = False
                        lines.append(jsoncodec.watch_event(event.type, obj))
                    elif obj is event.object:  # the stored object: as the store encoded it
                        lines.append(event.line())
                    else:
                        lines.append(jsoncodec.watch_event(event.type, obj))
                    if watcher.queue.empty() or len(lines) == WATCH_BATCH_EVENTS:
                        break
                    event = watcher.queue.get_nowait()
                if lines:
                    await response.write(b"".join(lines))
                if closed:
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.stop_watch(stored.storage_key, watcher)
        return response

    def _bookmark(self, rt: ResourceType, *, initial: bool = False) -> Obj:
        """A bookmark's object: the kind and the current revision; the one ending a
        streaming list's initial events is annotated so."""
        meta: Obj = {"resourceVersion": self._rv_str()}
        if initial:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}

    async def _send_bookmark(self, response: web.StreamResponse, rt: ResourceType) -> None:
        await _write_event(response, "BOOKMARK", self._bookmark(rt))

    async def admit(self, attrs: AdmissionAttributes) -> None:
        for admitter in self.admitters:
            await admitter(attrs)

    async def _create(self, ctx: RequestContext) -> web.Response:
        body = await ctx.json_body()
        if ctx.rt.storage_of is not None and ctx.rt.group == "events.k8s.io":
            validation.validate_events_v1_create(body)
        body = self._in(ctx.rt, body)
        return await self._write_create(ctx, self._stored_type(ctx.rt), body, handed_over=True)

    def _manager(self, ctx: RequestContext, operation: str = "Update") -> Manager:
        """The request's field manager: fieldManager, else the User-Agent's product."""
        name = (
            ctx.request.query.get("fieldManager")
            or (ctx.request.headers.get("User-Agent", "").split("/", 1)[0][:128])
        )
        subresource = "status" if ctx.info.subresource == "status" else ""
        return Manager(name, operation, ctx.rt.api_version, subresource)

    def _now(self) -> str:
        return rfc3339(self.registry.clock())

    async def _write_create(
        self, ctx: RequestContext, stored: ResourceType, body: Any,
        applied: managed_fields.Applied | None = None, *, handed_over: bool = False,
    ) -> web.Response:  # fmt: skip
        """`handed_over`: `body` was decoded for this request and shares nothing."""
        obj = self.registry.prepare_create(stored, ctx.namespace, body, handed_over=handed_over)
        if applied is None:
            managed_fields.track_update(None, obj, self._manager(ctx), self._now())
        else:
            obj["metadata"]["managedFields"] = managed_fields.entries(applied.owned,
                                                                      applied.times)  # fmt: skip
        await self.admit(
            AdmissionAttributes(stored, "", "CREATE", ctx.namespace, obj["metadata"]["name"], obj,
                                None, _options(ctx, "CreateOptions"), ctx.dry_run, ctx.user,
                                requested=ctx.rt)
        )  # fmt: skip
        created = self.registry.commit_create(stored, obj, ctx.dry_run)
        return self._respond_object(ctx, created, 201)

    async def _update(self, ctx: RequestContext) -> web.Response:
        body = self._in(ctx.rt, await ctx.json_body())
        return await self._write_update(ctx, body, handed_over=True)

    async def _write_update(
        self, ctx: RequestContext, body: Any, applied: managed_fields.Applied | None = None,
        *, handed_over: bool = False,
    ) -> web.Response:  # fmt: skip
        """`handed_over` as for _write_create."""
        stored = self._stored_type(ctx.rt)
        sub = ctx.info.subresource
        if (not sub and stored.kind in CREATE_ON_UPDATE_KINDS
                and self.registry.find(stored, ctx.namespace, ctx.info.name) is None):  # fmt: skip
            return await self._create_by_update(ctx, stored, body, handed_over)
        if ctx.rt.kind == "Namespace" and sub == "finalize":
            sub = "finalize"
        current, new = self.registry.prepare_update(
            stored,
            ctx.namespace,
            ctx.info.name,
            body,
            "status" if sub == "status" else "",
            handed_over=handed_over,
        )
        if sub == "finalize":
            # Only spec.finalizers comes from the body; the copies keep the write (its
            # resourceVersion, managedFields) off the stored object's own metadata.
            finalizers = (body.get("spec") or {}).get("finalizers") or []
            new = {**current, "metadata": dict(current["metadata"]),
                   "spec": {**(current.get("spec") or {}), "finalizers": finalizers}}  # fmt: skip
        if applied is None:
            managed_fields.track_update(current, new, self._manager(ctx), self._now())
        else:
            new["metadata"]["managedFields"] = managed_fields.entries(applied.owned,
                                                                      applied.times)  # fmt: skip
        await self.admit(
            AdmissionAttributes(stored, sub, "UPDATE", ctx.namespace, ctx.info.name, new, current,
                                _options(ctx, "UpdateOptions"), ctx.dry_run, ctx.user,
                                requested=ctx.rt)
        )  # fmt: skip
        updated = self.registry.commit_update(stored, current, new, ctx.dry_run)
        return self._respond_object(ctx, updated)

    async def _create_by_update(
        self, ctx: RequestContext, stored: ResourceType, body: Any, handed_over: bool
    ) -> web.Response:
        """A PUT to a missing object of a kind whose strategy allows create on update."""
        if isinstance(body, dict):
            meta = body.setdefault("metadata", {})
            if meta.get("name") and meta["name"] != ctx.info.name:
                raise bad_request(
                    f"the name of the object ({meta['name']}) does not match the name on the "
                    f"URL ({ctx.info.name})"
                )
            meta["name"] = ctx.info.name
            meta.pop("resourceVersion", None)
        return await self._write_create(ctx, stored, body, handed_over=handed_over)

    async def _patch(self, ctx: RequestContext) -> web.Response:
        from kubesim.apiserver.patching.request import patched_object

        raw = await ctx.request.read()
        content_type = ctx.request.headers.get("Content-Type", "")
        if content_type.split(";", 1)[0].strip() == APPLY_PATCH_CONTENT_TYPE and (
            not ctx.info.subresource
        ):
            return await self._apply(ctx, raw)
        stored = self._stored_type(ctx.rt)
        # Retry on a conflicting concurrent write, as the real server does for patches that
        # do not themselves carry a resourceVersion.
        for attempt in range(5):
            current = self.registry.get(stored, ctx.namespace, ctx.info.name)
            # A patched object is a new document (the patch functions copy), so it is
            # handed over; what it asked for is read first, as the write changes it.
            body = patched_object(ctx.rt, self._out(ctx.rt, current), raw, content_type)
            requested = (body.get("metadata") or {}).get("resourceVersion")
            try:
                return await self._write_update(ctx, self._in(ctx.rt, body), handed_over=True)
            except ApiError as err:
                pinned = requested != current["metadata"]["resourceVersion"]
                if err.reason != "Conflict" or pinned or attempt == 4:
                    raise
        raise AssertionError("unreachable")

    async def _apply(self, ctx: RequestContext, raw: bytes) -> web.Response:
        """Server-side apply (managed_fields.py): create, or merge by field ownership."""
        name = ctx.request.query.get("fieldManager", "")
        if not name:
            cause = ("fieldManager", "Required value: is required for apply patch")
            raise invalid("meta.k8s.io", "PatchOptions", "", [cause])
        try:
            body = yaml.safe_load(raw)
        except yaml.YAMLError as error:
            raise bad_request(f"error decoding YAML: {error}") from None
        if not isinstance(body, dict):
            kind = {str: "string", list: "array", bool: "bool"}.get(type(body), "number")
            raise bad_request("error decoding YAML: error unmarshaling JSON: while decoding JSON: "
                              f"json: cannot unmarshal {kind} into Go value of type "
                              "map[string]interface {}")  # fmt: skip
        manager = Manager(name, "Apply", ctx.rt.api_version)
        force = ctx.request.query.get("force") == "true"
        stored = self._stored_type(ctx.rt)
        for attempt in range(5):
            current = self.registry.find(stored, ctx.namespace, ctx.info.name)
            if current is None:
                meta = body.setdefault("metadata", {})
                meta.setdefault("name", ctx.info.name)
                now = self._now()
                created = managed_fields.Applied(
                    body, {manager: set(managed_fields.fields(body))}, {manager: now}
                )
                return await self._write_create(ctx, stored, body, created)
            result = managed_fields.apply(current, body, manager, force, self._now())
            try:
                return await self._write_update(ctx, result.obj, result)
            except ApiError as err:
                field_conflict = "causes" in (err.details or {})
                if err.reason != "Conflict" or field_conflict or attempt == 4:
                    raise
        raise AssertionError("unreachable")

    async def _delete(self, ctx: RequestContext) -> web.Response:
        options = await ctx.json_body() or {}
        if not isinstance(options, dict):
            raise bad_request("DeleteOptions must be an object")
        for key in ("gracePeriodSeconds", "propagationPolicy"):
            if key in ctx.request.query:
                value: Any = ctx.request.query[key]
                options[key] = int(value) if key == "gracePeriodSeconds" else value
        dry_run = ctx.dry_run or _validate_delete_options(options)
        stored = self._stored_type(ctx.rt)
        self.registry.check_deletable(stored, ctx.info.name)
        current = self.registry.get(stored, ctx.namespace, ctx.info.name)
        await self.admit(
            AdmissionAttributes(stored, "", "DELETE", ctx.namespace, ctx.info.name, None, current,
                                options, dry_run, ctx.user, requested=ctx.rt)
        )  # fmt: skip
        result, _ = self.registry.delete(stored, ctx.namespace, ctx.info.name, options, dry_run)
        return json_response(
            self._out(ctx.rt, result) if result.get("kind") != "Status" else result
        )

    async def _delete_collection(self, ctx: RequestContext) -> web.Response:
        predicate = self._predicate(ctx)
        stored = self._stored_type(ctx.rt)
        namespace = ctx.info.namespace if ctx.rt.namespaced and ctx.info.namespace else None
        deleted = []
        for obj in self.store.list(stored.storage_key, namespace):
            if predicate(obj):
                meta = obj["metadata"]
                _result, _ = self.registry.delete(
                    stored, meta.get("namespace", ""), meta["name"], {}, ctx.dry_run
                )
                deleted.append(obj)
        return json_response(
            {"kind": f"{ctx.rt.kind}List", "apiVersion": ctx.rt.api_version,
             "metadata": {"resourceVersion": self._rv_str()}, "items": deleted}
        )  # fmt: skip

    # subresources

    async def _scale(self, ctx: RequestContext) -> web.Response:
        obj = self.registry.get(ctx.rt, ctx.namespace, ctx.info.name)
        if ctx.info.verb in ("update", "patch"):
            if ctx.info.verb == "patch":
                from kubesim.apiserver.patching.request import patched_object

                raw = await ctx.request.read()
                body = patched_object(
                    ctx.rt, _scale_of(obj), raw, ctx.request.headers.get("Content-Type", ""),
                    kind="Scale",
                )  # fmt: skip
            else:
                body = await ctx.json_body()
            replicas = ((body or {}).get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise bad_request("spec.replicas must be a non-negative integer")
            new = jsoncodec.copy(obj)
            new["spec"]["replicas"] = replicas
            current, prepared = self.registry.prepare_update(
                ctx.rt, ctx.namespace, ctx.info.name, new
            )
            obj = self.registry.commit_update(ctx.rt, current, prepared, ctx.dry_run)
        elif ctx.info.verb != "get":
            raise method_not_allowed()
        return json_response(_scale_of(obj))

    async def _pod_binding(self, ctx: RequestContext) -> web.Response:
        body = await ctx.json_body()
        target = ((body or {}).get("target") or {}).get("name")
        if not target:
            raise bad_request("a Binding needs target.name")
        pod = self.registry.get(ctx.rt, ctx.namespace, ctx.info.name)
        if (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on pods/binding "{ctx.info.name}": pod '
                f"{ctx.info.name} is already assigned to node "
                f'"{pod["spec"]["nodeName"]}"',
                "Conflict",
            )
        new = jsoncodec.copy(pod)
        new["spec"]["nodeName"] = target
        _set_pod_scheduled(new)
        if not ctx.dry_run:
            current, prepared = pod, new
            prepared["metadata"]["resourceVersion"] = pod["metadata"]["resourceVersion"]
            self.registry.commit_update(ctx.rt, current, prepared)
        return json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
             "code": 201},
            201,
        )  # fmt: skip

    async def _pod_log(self, ctx: RequestContext) -> web.StreamResponse:
        """pods/log: the simulated container's lines (`podlogs.py`)."""
        options = podlogs.log_options(ctx.request.query)
        pod = self.registry.get(ctx.rt, ctx.namespace, ctx.info.name)
        name = podlogs.container_name(pod, options.container)
        run = podlogs.instance(pod, name, options.previous)
        if run is None:
            return web.Response(body=b"", content_type="text/plain")
        container = podlogs.spec_of(pod, name)
        lines = podlogs.started_lines(container, run) + podlogs.exited_lines(container, run)
        chosen = podlogs.select(lines, options, dt.datetime.now(dt.UTC))
        body = podlogs.render(chosen, options)
        limit = options.limit_bytes
        if not options.follow or run.finished is not None:
            return web.Response(body=body[:limit], content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(ctx.request)
        written = len(body[:limit])
        await response.write(body[:limit])
        ended = await self._until_exited(pod, name, run.container_id)
        if ended is not None and (limit is None or written < limit):
            rest = podlogs.render(podlogs.exited_lines(container, ended), options)
            await response.write(rest if limit is None else rest[: limit - written])
        await response.write_eof()
        return response

    async def _until_exited(
        self, pod: Obj, name: str, container_id: str
    ) -> podlogs.Instance | None:
        """Wait for a followed container instance to terminate (None: the pod went first)."""
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        uid = meta.get("uid")

        def same_pod(obj: Obj) -> bool:
            return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"]) == key

        try:
            watcher = self.store.watch(("", "pods"), int(meta.get("resourceVersion") or 0),
                                       same_pod)  # fmt: skip
        except ApiError:  # history compacted since it was read: from its current state
            watcher = self.store.watch(("", "pods"), None, same_pod)
        try:
            while True:
                event = await watcher.queue.get()
                if event is None or event.type == "DELETED":
                    return None
                obj = event.object
                if obj["metadata"].get("uid") != uid:
                    return None
                for previous in (False, True):
                    try:
                        found = podlogs.instance(obj, name, previous)
                    except ApiError:
                        continue
                    if (
                        found is not None
                        and found.finished
                        and (found.container_id == container_id)
                    ):
                        return found
        finally:
            self.store.stop_watch(("", "pods"), watcher)

    def _unsimulated(self, what: str) -> SubresourceHandler:
        async def refuse(ctx: RequestContext) -> web.StreamResponse:
            self.registry.get(ctx.rt, ctx.namespace, ctx.info.name)  # a missing pod: 404
            raise podlogs.unsimulated_stream(what, ctx.info.name)

        return refuse

    async def _token_request(self, ctx: RequestContext) -> web.Response:
        sa = self.registry.get(ctx.rt, ctx.namespace, ctx.info.name)
        body = await ctx.json_body() or {}
        seconds = ((body.get("spec") or {}).get("expirationSeconds")) or 3600
        token = self.authenticator.add(
            service_account_user(ctx.namespace, ctx.info.name, sa["metadata"].get("uid", ""))
        )
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=int(seconds))
        return json_response(
            {
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": ctx.info.name, "namespace": ctx.namespace},
                "spec": {"audiences": (body.get("spec") or {}).get("audiences") or [],
                         "expirationSeconds": int(seconds)},
                "status": {"token": token,
                           "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")},
            },
            201,
        )  # fmt: skip

    async def _virtual(self, ctx: RequestContext) -> web.Response:
        if ctx.info.verb != "create":
            raise method_not_allowed()
        body = await ctx.json_body() or {}
        kind = ctx.rt.kind
        if kind == "SelfSubjectReview":
            return json_response(
                {"kind": kind, "apiVersion": ctx.rt.api_version, "metadata": {},
                 "status": {"userInfo": ctx.user.to_json()}},
                201,
            )  # fmt: skip
        spec = body.get("spec") or {}
        if kind == "SelfSubjectRulesReview":
            return self._rules_review(ctx, spec)
        if kind == "SelfSubjectAccessReview":
            subject = ctx.user
        else:
            subject = UserInfo(str(spec.get("user", "")), tuple(spec.get("groups") or []))
        allowed, reason = self._review(subject, spec)
        out = dict(body)
        out.setdefault("metadata", {})
        # Decoded into the typed review and encoded again: empty attributes are omitted.
        out["spec"] = {
            key: ({k: v for k, v in value.items() if v not in ("", None)}
                  if key.endswith("Attributes") and isinstance(value, dict) else value)
            for key, value in spec.items()
        }  # fmt: skip
        out["status"] = {"allowed": allowed}
        if reason:
            out["status"]["reason"] = reason
        return json_response(out, 201)

    def _rules_review(self, ctx: RequestContext, spec: Obj) -> web.Response:
        """pkg/registry/authorization/selfsubjectrulesreview: the status only, no spec."""
        namespace = str(spec.get("namespace") or "")
        if not namespace:
            raise bad_request("no namespace on request")
        if self.rules_resolver is None:  # no RBAC: AlwaysAllow's RulesFor
            review = RulesReview([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                                 [{"verbs": ["*"], "nonResourceURLs": ["*"]}], [])  # fmt: skip
        else:
            review = self.rules_resolver(ctx.user, namespace)
        return json_response(
            {"kind": ctx.rt.kind, "apiVersion": ctx.rt.api_version, "metadata": {}, "spec": {},
             "status": review.status()},
            201,
        )  # fmt: skip

    def _review(self, subject: UserInfo, spec: Obj) -> tuple[bool, str]:
        if self.authorizer is None:
            return True, ""
        ra = spec.get("resourceAttributes")
        if isinstance(ra, dict):
            attrs = RequestAttributes(
                subject, str(ra.get("verb", "")), True, str(ra.get("namespace", "")),
                str(ra.get("group", "")), str(ra.get("version", "")), str(ra.get("resource", "")),
                str(ra.get("subresource", "")), str(ra.get("name", "")),
            )  # fmt: skip
        else:
            nra = spec.get("nonResourceAttributes") or {}
            attrs = non_resource_request(
                subject, str(nra.get("verb", "")), str(nra.get("path", ""))
            )
        decision = self.authorizer(attrs)
        return decision.allowed, decision.reason


def _attributes(user: UserInfo, info: RequestInfo) -> RequestAttributes:
    if not info.is_resource_request:
        return non_resource_request(user, info.verb, info.path)
    return RequestAttributes(
        user, info.verb, True, info.namespace, info.api_group, info.api_version, info.resource,
        info.subresource, info.name, info.path,
    )  # fmt: skip


def _set_pod_scheduled(pod: Obj) -> None:
    """BindingREST.setPodNodeAndMetadata: PodScheduled=True in the same write as nodeName."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for i, cond in enumerate(conditions):
        if cond.get("type") == "PodScheduled":
            if cond.get("status") != "True":
                conditions[i] = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                 "lastTransitionTime": now}  # fmt: skip
            return
    conditions.append(
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
    )


async def _no_cache(request: web.Request, response: web.StreamResponse) -> None:
    _no_cache_header(response)


def _no_cache_header(response: web.StreamResponse) -> None:
    # As the real API server: clients (kubectl's discovery cache) must not reuse answers.
    response.headers.setdefault("Cache-Control", "no-cache, private")


def _options(ctx: RequestContext, kind: str) -> Obj:
    options: Obj = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    if ctx.dry_run:
        options["dryRun"] = ["All"]
    if "fieldManager" in ctx.request.query:
        options["fieldManager"] = ctx.request.query["fieldManager"]
    return options


def _scale_of(obj: Obj) -> Obj:
    meta = obj["metadata"]
    status = obj.get("status") or {}
    selector = (obj.get("spec") or {}).get("selector") or {}
    labels = selector.get("matchLabels") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
        "status": {
            "replicas": status.get("replicas", 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        },
    }


def list_page(ordered: Ordered, namespace: str | None, predicate: Predicate, after: str | None,
              limit: int) -> tuple[list[Obj], int]:  # fmt: skip
    """The matching objects in storage order past the continue key `after`, at most `limit`
    of them (none: all), and how many matching ones remain beyond the page.

    A namespace is one contiguous run of keys ("<namespace>/..."), found by bisection, as is
    the continue key, so a page costs its own size unless selectors must be checked."""
    keys = ordered.keys
    start, stop = 0, len(keys)
    if namespace:
        prefix = f"{namespace}/"
        start = bisect_left(keys, prefix)
        stop = bisect_left(keys, f"{namespace}0")  # "0" sorts right after "/"
    if after is not None:
        start = max(start, bisect_right(keys, after))
    if predicate is match_everything and limit > 0:  # no selectors: counting is arithmetic
        end = min(stop, start + limit)
        return ordered.objects[start:end], max(0, stop - end)
    items: list[Obj] = []
    remaining = 0
    for position in range(start, max(start, stop)):
        obj = ordered.objects[position]
        if not predicate(obj):
            continue
        if 0 < limit <= len(items):
            remaining += 1
        else:
            items.append(obj)
    return items, remaining


def _encode_continue(start: str, rv: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": int(rv), "start": start})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_continue(token: str) -> tuple[str, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(data["start"]), str(data["rv"])
    except (ValueError, KeyError, TypeError):
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion "
                          "(version meta.k8s.io/v1)") from None  # fmt: skip


def _timeout_seconds(request: web.BaseRequest) -> float | None:
    raw = request.query.get("timeoutSeconds")
    if raw is None:
        return None
    try:
        return max(float(int(raw)), 0.0)
    except ValueError:
        raise bad_request(f"invalid timeoutSeconds: {raw}") from None


async def _write_event(response: web.StreamResponse, type_: str, obj: Obj) -> None:
    await response.write(jsoncodec.watch_event(type_, obj))


__all__ = [
    "AdmissionAttributes",
    "ApiServer",
    "RequestContext",
    "WatchEvent",
    "error_response",
    "json_response",
]
