"""The child of a `--baseline` run: the compared parts under another commit's code.

It reads the pickled (part, profile) pairs on stdin and prints the tables as JSON. It imports
only the parts it runs, so a commit whose code the other parts no longer fit (b67cf4e, the
state issue 14 measured, for the memory part) can still be measured.
"""

from __future__ import annotations

import json
import pickle
import sys
from typing import Any

from bench import machine
from bench.report import Table, json_document


def run_part(part: str, profile: Any) -> list[Table]:
    if part == "memory":
        from bench.memory import run as memory

        return [memory.run(profile)]
    if part == "drain":
        from bench.drain import run as drain

        return drain.run(profile)
    raise ValueError(f"no baseline runner for part {part!r}")


def main() -> int:
    requests: list[tuple[str, Any]] = pickle.load(sys.stdin.buffer)
    header = machine.describe()
    tables = [table for part, profile in requests for table in run_part(part, profile)]
    print(json.dumps(json_document(tables, header)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
