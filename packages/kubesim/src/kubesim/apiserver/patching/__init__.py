"""The three PATCH content types of the Kubernetes API server, on plain JSON values.

Import the public API from :mod:`kubesim.apiserver.patching.apply`; the modules here are its parts.
"""
