"""kubesim: an in-process Kubernetes control plane for tests, demos and benchmarks.

Not a production API server.
"""
