"""The controller's OCI image, built without a container engine (docs/image.md).

A Debian root filesystem from Debian's packages (mmdebstrap), the controller's virtualenv
installed into it by deploy/image/install-venv from the hash-locked
deploy/image/requirements.lock, packed as an OCI image layout. deploy/Dockerfile builds the
same image with Docker; `spec` holds what both declare.
"""
