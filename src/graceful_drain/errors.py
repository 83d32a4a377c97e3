"""The one user error of the command line: a value it cannot run with."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the flag and its variable."""
