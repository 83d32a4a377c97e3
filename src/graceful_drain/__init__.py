"""graceful-drain: node drains never take the last Ready pod of a Deployment."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("graceful-drain")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.0.0+unknown"
