"""`graceful-drain plan NODE` and `graceful-drain status`: read-only views of what a drain
will do and of what graceful-drain is holding (docs/cli.md)."""
