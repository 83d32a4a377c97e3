"""Go's `time.ParseDuration`, the one parser of Go durations in kubesim (a CronJob's
`@every`, the `sim.kubesim.io/*` annotations, scenarios). Imports nothing of kubesim."""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` for unsigned durations ("1m30s", "250ms"), in seconds;
    raises ValueError on anything else (an empty string included)."""
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text!r}")
    return total
