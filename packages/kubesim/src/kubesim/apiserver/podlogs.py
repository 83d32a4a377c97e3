"""`pods/log`: a simulated container's log, read off the pod itself.

kube-apiserver proxies `GET pods/NAME/log` to the node's kubelet, which reads the
container's log file. kubesim runs no process, so the log is what the pod says the
container was told to print and what happened to it: a line when it started, what an
`echo` in its command and args prints (`kubectl create job hello --image=busybox -- echo
hello` prints `hello`; so does `sh -c 'echo hello'`), and a line when it exited, each at
the time the container's status gives. Every line is a function of the stored pod, so
`--previous` (the last terminated instance, `lastState.terminated`), `--since`,
`--since-time`, `--tail`, `--limit-bytes` and `--timestamps` filter the same lines, and
`-f` streams until the instance it follows has terminated.

`exec`, `attach` and `port-forward` have nothing to reach: they are answered with a
Status naming kubesim and what it does not simulate (`unsimulated_stream`), which kubectl
prints after its upgrade attempt fails.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from kubesim.types import Obj

from .errors import ApiError, bad_request
from .meta import parse_time

STARTED = "kubesim: container {name} started; its image {image} is simulated, not run"
EXITED = "kubesim: container {name} exited with code {code} ({reason})"


@dataclass(frozen=True, slots=True)
class LogOptions:
    """PodLogOptions, from the query (pkg/apis/core/v1's conversion of its parameters)."""

    container: str = ""
    follow: bool = False
    previous: bool = False
    since_seconds: int | None = None
    since_time: dt.datetime | None = None
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None


def _bool(value: str) -> bool:
    return value.lower() in ("1", "t", "true")


def _int(query: Mapping[str, str], name: str) -> int | None:
    if name not in query:
        return None
    try:
        return int(query[name])
    except ValueError:
        raise bad_request(f'{name}: Invalid value: "{query[name]}"') from None


def log_options(query: Mapping[str, str]) -> LogOptions:
    since_time = None
    if query.get("sinceTime"):
        try:
            since_time = parse_time(query["sinceTime"])
        except ValueError:
            raise bad_request(f'sinceTime: Invalid value: "{query["sinceTime"]}"') from None
    options = LogOptions(
        container=query.get("container", ""),
        follow=_bool(query.get("follow", "")),
        previous=_bool(query.get("previous", "")),
        since_seconds=_int(query, "sinceSeconds"),
        since_time=since_time,
        timestamps=_bool(query.get("timestamps", "")),
        tail_lines=_int(query, "tailLines"),
        limit_bytes=_int(query, "limitBytes"),
    )
    causes = []
    if options.since_seconds is not None and options.since_time is not None:
        causes.append("at most one of `sinceTime` or `sinceSeconds` may be specified")
    if options.since_seconds is not None and options.since_seconds < 1:
        causes.append("sinceSeconds: Invalid value: must be greater than 0")
    if options.tail_lines is not None and options.tail_lines < 0:
        causes.append("tailLines: Invalid value: must be greater than or equal to 0")
    if options.limit_bytes is not None and options.limit_bytes < 1:
        causes.append("limitBytes: Invalid value: must be greater than 0")
    if causes:
        raise ApiError(422, f"PodLogOptions is invalid: {', '.join(causes)}", "Invalid")
    return options


def container_name(pod: Obj, requested: str) -> str:
    """The container a log request reads (the registry's LogLocation)."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    containers = [str(c.get("name", "")) for c in spec.get("containers") or []]
    others = [c.get("name", "") for key in ("initContainers", "ephemeralContainers")
              for c in spec.get(key) or []]  # fmt: skip
    if not requested:
        if len(containers) == 1:
            return str(containers[0])
        listed = " ".join(containers + others)
        raise bad_request(
            f"a container name must be specified for pod {name}, choose one of: [{listed}]"
        )
    if requested not in containers + others:
        raise bad_request(f"container {requested} is not valid for pod {name}")
    return requested


def printed(container: Obj) -> list[str]:
    """What the container's command and args print: each `echo`, alone or in `sh -c`."""
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in ("sh", "bash", "ash") and argv[1] == "-c":
        lines: list[str] = []
        for statement in argv[2].replace("&&", ";").replace("\n", ";").split(";"):
            try:
                words = shlex.split(statement)
            except ValueError:
                continue
            lines.extend(_echo(words))
        return lines
    return _echo(argv)


def _echo(argv: list[str]) -> list[str]:
    if not argv or argv[0].rsplit("/", 1)[-1] != "echo":
        return []
    words = argv[1:]
    newline = True
    while words and words[0] in ("-n", "-e", "-E", "-ne", "-en"):
        newline = newline and "n" not in words[0]
        words = words[1:]
    text = " ".join(words)
    return text.split("\n") if newline or text else []


@dataclass(frozen=True, slots=True)
class Instance:
    """One run of a container, as its status tells it."""

    container_id: str
    started: dt.datetime | None
    finished: dt.datetime | None
    exit_code: int
    reason: str


def _time(value: object) -> dt.datetime | None:
    try:
        return parse_time(str(value)) if value else None
    except ValueError:
        return None


def _instance(state: Obj, container_id: str) -> Instance | None:
    if "running" in state:
        return Instance(container_id, _time(state["running"].get("startedAt")), None, 0, "")
    if "terminated" in state:
        t = state["terminated"]
        finished = _time(t.get("finishedAt"))
        return Instance(
            str(t.get("containerID") or container_id),
            _time(t.get("startedAt")) or finished,
            finished,
            int(t.get("exitCode") or 0),
            str(t.get("reason") or ""),
        )
    return None


def _status_of(pod: Obj, name: str) -> Obj | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for c in status.get(key) or []:
            if c.get("name") == name:
                return dict(c)
    return None


def instance(pod: Obj, name: str, previous: bool) -> Instance | None:
    """The instance a log request reads: None when the pod is not on a node (an empty log);
    the kubelet's 400s when there is none to read."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    pod_name = pod["metadata"]["name"]
    status = _status_of(pod, name) or {}
    if previous:
        found = _instance(status.get("lastState") or {}, "")
        if found is None:
            raise bad_request(
                f'previous terminated container "{name}" in pod "{pod_name}" not found'
            )
        return found
    found = _instance(status.get("state") or {}, str(status.get("containerID") or ""))
    if found is None:
        waiting = (status.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason") or "ContainerCreating"
        raise bad_request(f'container "{name}" in pod "{pod_name}" is waiting to start: {reason}')
    return found


def spec_of(pod: Obj, name: str) -> Obj:
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if c.get("name") == name:
                return dict(c)
    return {}


Line = tuple[dt.datetime, str]


def started_lines(container: Obj, run: Instance) -> list[Line]:
    at = run.started or dt.datetime.now(dt.UTC)
    name, image = container.get("name", ""), container.get("image", "")
    return [(at, STARTED.format(name=name, image=image))] + [
        (at, text) for text in printed(container)
    ]


def exited_lines(container: Obj, run: Instance) -> list[Line]:
    if run.finished is None:
        return []
    text = EXITED.format(name=container.get("name", ""), code=run.exit_code, reason=run.reason)
    return [(run.finished, text)]


def select(lines: list[Line], options: LogOptions, now: dt.datetime) -> list[Line]:
    """--since / --since-time, then --tail."""
    since = options.since_time
    if options.since_seconds is not None:
        since = now - dt.timedelta(seconds=options.since_seconds)
    if since is not None:
        lines = [line for line in lines if line[0] >= since]
    if options.tail_lines is not None:
        lines = lines[max(len(lines) - options.tail_lines, 0) :] if options.tail_lines else []
    return lines


def render(lines: list[Line], options: LogOptions) -> bytes:
    out = []
    for at, text in lines:
        if options.timestamps:
            stamp = at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
            out.append(f"{stamp} {text}\n")
        else:
            out.append(text + "\n")
    return "".join(out).encode()


def unsimulated_stream(what: str, pod: str) -> ApiError:
    """exec, attach, portforward: the Status kubectl prints once its upgrade is refused."""
    return bad_request(
        f'kubesim does not run containers, so it cannot {what} pod "{pod}": exec, attach and '
        "port-forward are not simulated (kubectl logs prints what the container was told to "
        "print)"
    )
