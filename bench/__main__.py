"""`python -m bench`: see bench/cli.py and bench/README.md."""

from __future__ import annotations

import sys

from bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
