"""The controller image run as a container runtime would run it, without one: the OCI layout
unpacked by umoci into a runtime bundle (rootfs/ and config.json, the process umoci derives
from the image config), each process started with chroot as the bundle's user, in its own
mount namespace where the root filesystem is read-only, /tmp is a tmpfs (the Deployment's
emptyDir) and the kubeconfig is copied into a tmpfs at /run/secrets. The network namespace is
the host's, so the controller and the API server meet on loopback as everywhere in these tests.

An image of another architecture (the release's linux/arm64 on an amd64 host) runs the same
way under user-mode emulation: the emulator (Debian's qemu-user-static, a static binary) is
copied into the root filesystem and started by chroot with the program it runs; a script
names its interpreter, as the kernel would read the `#!` line (no binfmt_misc here).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagebuild.oci import read_index

KUBECONFIG_INSIDE = "/run/secrets/kubeconfig"
# $1 root filesystem, $2 kubeconfig on the host (or -), $3 uid:gid, then the command line.
_ENTER = """\
set -eu
root=$1 kubeconfig=$2 user=$3
shift 3
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t tmpfs -o mode=1777,size=16m tmpfs "$root/tmp"
mount -t tmpfs -o mode=0755,size=1m tmpfs "$root/run"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
if [ "$kubeconfig" != - ]; then
  mkdir "$root/run/secrets"
  install -m 0444 "$kubeconfig" "$root/run/secrets/kubeconfig"
fi
exec chroot --userspec="$user" "$root" "$@"
"""


def unpack(layout: Path, tag: str, bundle: Path) -> Path:
    """`umoci unpack` of the image `tag` of the OCI layout `layout` into `bundle` (which must
    not exist)."""
    result = subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"umoci unpack failed:\n{result.stderr}"
    return bundle


@dataclass(frozen=True)
class ImageRoot:
    """A runtime bundle of the image `tag` of the OCI layout `layout` (./scripts/build-image's,
    or one pulled from a registry); a `harness.Launcher` running `graceful-drain` in it."""

    layout: Path
    tag: str
    bundle: Path
    emulator: str = ""  # inside the root filesystem, for an image of another architecture

    @classmethod
    def unpacked(
        cls, layout: Path, tag: str, bundle: Path, emulator: Path | None = None
    ) -> ImageRoot:
        """`tag` unpacked into `bundle`; with `emulator` (a static qemu-user binary on the
        host), copied into its /usr/bin to run every program of the image."""
        image = cls(layout, tag, unpack(layout, tag, bundle))
        if emulator is None:
            return image
        inside = f"/usr/bin/{emulator.name}"
        target = image.rootfs / inside.lstrip("/")
        shutil.copyfile(emulator, target)
        target.chmod(0o755)
        return cls(layout, tag, bundle, inside)

    def runtime_config(self) -> dict[str, Any]:
        config: dict[str, Any] = json.loads((self.bundle / "config.json").read_text())
        return config

    def image_config(self) -> dict[str, Any]:
        """The OCI image config's `config` section, read from the layout."""
        _manifest, config = read_index(self.layout)
        section: dict[str, Any] = config["config"]
        return section

    @property
    def rootfs(self) -> Path:
        return self.bundle / str(self.runtime_config()["root"]["path"])

    @property
    def user(self) -> str:
        user = self.runtime_config()["process"]["user"]
        return f"{user['uid']}:{user['gid']}"

    def command(self, argv: Sequence[str], kubeconfig: Path | None = None) -> list[str]:
        """`argv` run inside the bundle as its user (see the module doc), with `kubeconfig`
        copied to KUBECONFIG_INSIDE."""
        unshare, sh = shutil.which("unshare"), shutil.which("sh")
        assert unshare is not None and sh is not None, "unshare (util-linux) and sh are needed"
        return [
            unshare, "--mount", "--propagation", "private", sh, "-c", _ENTER, "enter-image",
            str(self.rootfs), "-" if kubeconfig is None else str(kubeconfig), self.user, *argv,
        ]  # fmt: skip

    def argv(self, args: Sequence[str], kubeconfig: Path | None = None) -> list[str]:
        """The image's Entrypoint with `args` in place of its Cmd (as `docker run IMAGE ARGS`
        and a container's `args:` give it; the Deployment's `command: [graceful-drain,
        controller]` names the same console script)."""
        path = [] if kubeconfig is None else ["--kubeconfig", KUBECONFIG_INSIDE]
        program, *rest = self.image_config()["Entrypoint"]
        return self.command([*self.emulated(program), *rest, *args, *path], kubeconfig)

    def emulated(self, program: str) -> list[str]:
        """`program` (a name on the image's PATH, or a path) as the command line that runs it:
        itself, or under the emulator the program found and, for a script, its interpreter."""
        if not self.emulator:
            return [program]
        found = program
        if "/" not in program:
            found = next(
                f"{directory}/{program}"
                for directory in self.environment({})["PATH"].split(":")
                if (self.rootfs / directory.lstrip("/") / program).is_file()
            )
        with (self.rootfs / found.lstrip("/")).open("rb") as file:
            head = file.readline(256)
        interpreter = head[2:].split() if head.startswith(b"#!") else []
        return [self.emulator, *(part.decode() for part in interpreter), found]

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """The bundle's environment (the image's Env, as umoci sets it) and `env`; HOME is /
        as runtimes set it for a user without a passwd entry."""
        process_env = self.runtime_config()["process"]["env"]
        return {"HOME": "/", **dict(item.split("=", 1) for item in process_env), **env}

    def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """`argv` (from `argv()` or `command()`) run to completion."""
        return subprocess.run(
            list(argv), env=self.environment({}), capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
