"""`python -m imagebuild [--print]`: build (or reuse) the controller image, print its OCI
layout's path. ./scripts/build-image is the documented way in (it installs mmdebstrap)."""

from __future__ import annotations

import argparse
import sys
import time

from imagebuild.build import DIST, BuiltImage, ensure_built, project_version
from imagebuild.rootfs import ImageUnavailable


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/build-image", description=__doc__)
    parser.add_argument(
        "--print", action="store_true", help="print the layout's path without building"
    )
    args = parser.parse_args()
    if args.print:
        print(DIST / "image")
        return 0
    start = time.monotonic()
    try:
        image: BuiltImage = ensure_built()
    except ImageUnavailable as error:
        print(f"build-image: error: {error}", file=sys.stderr)
        return 2
    print(
        f"image: graceful-drain {project_version()} in {image.layout} and {image.archive} "
        f"({time.monotonic() - start:.0f} s)",
        file=sys.stderr,
    )
    print(image.layout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
