"""JSON logs: EventLine's direct line is the line structlog's JSON renderer writes, and
tracebacks carry no frame locals."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import msgspec
import pytest

from graceful_drain.logs import EventLine, configure_logging, get_logger
from tests.unit.logging_state import logging_restored

FIELDS: dict[str, Any] = {
    "uid": "705ab4f5",
    "pod": "team/web-1",
    "deployment": None,
    "decision": "deny",
    "reason": "rollout-in-progress",
    "latency_ms": 0.123,
    "user": "système:admin",
    "stamped": True,
}


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.parametrize("level", ["info", "warning"])
@pytest.mark.parametrize(
    "fields", [FIELDS, {**FIELDS, "user": "\ud800"}, {}, {**FIELDS, "message": "naïve"}]
)
def test_same_record_as_structlog(fields: dict[str, Any], level: str) -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream=stream)
    getattr(EventLine("webhook"), level)("admission", fields)
    getattr(get_logger("webhook"), level)("admission", **fields)
    direct, rendered = lines(stream)
    assert direct["level"] == level
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", direct["timestamp"])
    written = datetime.fromisoformat(direct.pop("timestamp").replace("Z", "+00:00"))
    stamped = datetime.fromisoformat(rendered.pop("timestamp").replace("Z", "+00:00"))
    assert timedelta(0) <= stamped - written < timedelta(seconds=5)
    assert direct == rendered
    assert stream.getvalue().isascii()  # non-ASCII escaped, as json.dumps does


@pytest.mark.parametrize(
    ("clock", "written"),
    [
        (1_765_000_000.0, "2025-12-06T05:46:40.000000Z"),
        (1_765_000_000.015625, "2025-12-06T05:46:40.015625Z"),
        (1_765_000_000.25, "2025-12-06T05:46:40.250000Z"),
        (1_765_000_000.984375, "2025-12-06T05:46:40.984375Z"),
        (1_765_000_059.5, "2025-12-06T05:47:39.500000Z"),
    ],
)
def test_the_direct_timestamp_has_six_digits_of_microseconds(
    clock: float, written: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream=stream)
    monkeypatch.setattr(time, "time", lambda: clock)
    EventLine("webhook").info("admission", FIELDS)
    monkeypatch.undo()
    (line,) = lines(stream)
    assert line["timestamp"] == written


class Fields(msgspec.Struct):
    uid: str
    reason: str
    node: str | msgspec.UnsetType = msgspec.UNSET
    stamped: bool | msgspec.UnsetType = msgspec.UNSET


@pytest.mark.parametrize("log_format", ["json", "console"])
@pytest.mark.parametrize(
    "fields",
    [Fields("705ab4f5", "dry-run", stamped=True), Fields("705ab4f5", "dry-run", node="nœud")],
    ids=["ascii", "non-ascii"],
)
def test_struct_fields_write_the_line_of_their_set_fields(log_format: str, fields: Fields) -> None:
    """A struct's UNSET fields are left out; the rest is written as the same dict would be."""
    stream = io.StringIO()
    configure_logging(log_format, "info", stream=stream)
    line = EventLine("webhook")
    line.info("admission", fields)
    line.info("admission", msgspec.to_builtins(fields))
    from_struct, from_dict = stream.getvalue().splitlines()
    if log_format == "json":
        records = [json.loads(text) for text in (from_struct, from_dict)]
        for record in records:
            del record["timestamp"]
        expected = {"component": "webhook", **msgspec.to_builtins(fields), "level": "info",
                    "msg": "admission"}  # fmt: skip
        assert records[0] == records[1] == expected
        assert list(records[0]) == list(records[1])  # the same order
    else:
        assert from_struct.split(" ", 1)[1] == from_dict.split(" ", 1)[1]  # but the time


@pytest.mark.parametrize(("configured", "written"), [("warning", 1), ("error", 0)])
def test_a_warning_line_follows_the_configured_level(configured: str, written: int) -> None:
    stream = io.StringIO()
    configure_logging("json", configured, stream=stream)
    EventLine("webhook").warning("admission", FIELDS)
    EventLine("webhook").info("admission", FIELDS)  # below both levels
    assert len(lines(stream)) == written


def test_level_above_info_writes_nothing() -> None:
    stream = io.StringIO()
    configure_logging("json", "warning", stream=stream)
    EventLine("webhook").info("admission", FIELDS)
    assert stream.getvalue() == ""


def test_console_format_goes_through_structlog() -> None:
    stream = io.StringIO()
    configure_logging("console", "info", stream=stream)
    EventLine("webhook").info("admission", {"reason": "dry-run"})
    assert "admission" in stream.getvalue()
    assert "reason=dry-run" in stream.getvalue()


def failing_review(body: bytes) -> None:
    secret_looking_request = body.decode()  # a frame local holding request bytes
    raise ValueError(f"cannot decide ({len(secret_looking_request)} bytes)")


def test_json_tracebacks_never_carry_frame_locals() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream=stream)
    try:
        failing_review(b"pod-bytes-from-some-tenant")
    except ValueError as error:
        get_logger("test").error("admission", exc_info=error)
    [line] = stream.getvalue().splitlines()
    record = json.loads(line)
    frames = record["exception"][0]["frames"]
    assert any(frame["name"] == "failing_review" for frame in frames)  # the traceback is there
    assert all("locals" not in frame for frame in frames)
    assert "pod-bytes-from-some-tenant" not in line


def test_direct_lines_are_written_by_the_end_of_the_loop_iteration_in_order() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    configure_logging("json", "info", stream=stream)
    line = EventLine("webhook")

    async def answer_three() -> bytes:
        line.info("admission", {**FIELDS, "seq": 1})
        line.info("admission", {**FIELDS, "seq": 2})
        get_logger("webhook").warning("admission", seq=3)  # writes the gathered lines first
        line.info("admission", {**FIELDS, "seq": 4})
        written_before_yielding = raw.getvalue()
        await asyncio.sleep(0)
        return written_before_yielding

    before = asyncio.run(answer_three())
    assert [json.loads(text)["seq"] for text in before.splitlines()] == [1, 2, 3]
    assert [json.loads(text)["seq"] for text in raw.getvalue().splitlines()] == [1, 2, 3, 4]


# The loop stops in the iteration that gathered the lines and is closed: the write it scheduled
# never runs, so the lines are written at exit.
EXIT_WITHOUT_YIELDING = """
import asyncio
from graceful_drain.logs import EventLine, configure_logging
configure_logging("json", "info")
loop = asyncio.new_event_loop()
def answer_then_stop():
    for seq in range(500):
        EventLine("webhook").info("admission", {"seq": seq})
    loop.stop()
loop.call_soon(answer_then_stop)
loop.run_forever()
loop.close()
"""


def test_lines_gathered_when_the_process_exits_are_written() -> None:
    done = subprocess.run(
        [sys.executable, "-c", EXIT_WITHOUT_YIELDING],
        capture_output=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    seqs = [json.loads(text)["seq"] for text in done.stderr.decode().splitlines()]
    assert seqs == list(range(500))
