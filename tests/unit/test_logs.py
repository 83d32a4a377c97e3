"""JSON logs: one object per line, tracebacks without frame locals."""

from __future__ import annotations

import io
import json

from graceful_drain.logs import configure_logging, get_logger


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
