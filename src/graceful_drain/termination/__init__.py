"""The termination-cause detector: why this pod is terminating (docs/termination-detector.md).

The command's name and help line live here, so that `graceful-drain --help` and
`--version` list it without loading the detector (graceful_drain.cli).
"""

COMMAND = "termination-cause"
COMMAND_HELP = "say why this pod is terminating: drain gracefully (exit 0) or shed load (10, 11)"
