"""The real Kubernetes control plane for the test suite (see README.md in this folder)."""
