"""Signing a release with cosign and a key pair (docs/install.md, "Verify a release").

The key (`cosign generate-key-pair`: cosign.key, its password in $COSIGN_PASSWORD) is an
input of ./scripts/release; the tests make a throwaway one. What is signed:

- each platform image's SBOM becomes an OCI referrer of its platform manifest (artifactType
  application/vnd.cyclonedx+json: `oras discover` lists it, `oras pull` fetches it);
- the image index, each platform manifest and each SBOM referrer get a cosign signature, an
  OCI 1.1 referrer of what it signs (`cosign verify --experimental-oci11`). cosign signs what
  a registry serves, so the layout is pushed to a registry of its own on loopback (CNCF
  distribution, built by realcluster/build), signed there, and the signatures are copied back
  into the layout: image/index.json then lists, after the tagged image index, every referrer
  (untagged), so `oras cp -r --from-oci-layout image:VERSION` carries them to any registry;
- SHA256SUMS and the chart get a blob signature (`cosign verify-blob`), beside them;
- the public key is written into the folder as cosign.pub.

No signature goes to a transparency log (`--tlog-upload=false`): verify with
`--insecure-ignore-tlog=true` and a key obtained from the project, not from the folder alone.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from imagebuild import oci
from imagebuild.registry import Repository, fetch_referrers, push_layout
from imagebuild.rootfs import ImageUnavailable

SBOM_TYPE = "application/vnd.cyclonedx+json"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
TITLE = "org.opencontainers.image.title"
PUBLIC_KEY = "cosign.pub"
SIGNATURE_SUFFIX = ".sig"
# What cosign reads: the key's password, and the experimental switch oci-1-1 mode needs.
PASSWORD_VARIABLE = "COSIGN_PASSWORD"
# scripts/release's key when --signing-key is not given.
SIGNING_KEY_VARIABLE = "GRACEFUL_DRAIN_SIGNING_KEY"
COSIGN_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class Signer:
    cosign: Path
    key: Path
    password: str | None = None  # None: $COSIGN_PASSWORD, else empty

    def _run(self, *args: str) -> str:
        env = {**os.environ, "COSIGN_EXPERIMENTAL": "1", "COSIGN_YES": "true"}
        if self.password is not None:
            env[PASSWORD_VARIABLE] = self.password
        env.setdefault(PASSWORD_VARIABLE, "")
        try:
            result = subprocess.run(
                [str(self.cosign), *args], env=env, capture_output=True, text=True,
                stdin=subprocess.DEVNULL, check=False, timeout=COSIGN_TIMEOUT_SECONDS,
            )  # fmt: skip
        except subprocess.TimeoutExpired as error:
            raise ImageUnavailable(f"cosign {args[0]} made no progress") from error
        if result.returncode != 0:
            raise ImageUnavailable(
                f"cosign {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}"
            )
        return result.stdout

    def public_key(self) -> str:
        return self._run("public-key", "--key", str(self.key))

    def sign_blob(self, path: Path) -> Path:
        """`path`.sig beside it (base64, what `cosign verify-blob --signature` reads)."""
        signature = path.with_name(path.name + SIGNATURE_SUFFIX)
        self._run("sign-blob", "--key", str(self.key), "--tlog-upload=false", "--yes",
                  "--output-signature", str(signature), str(path))  # fmt: skip
        return signature

    def sign_manifest(self, reference: str) -> None:
        """A cosign signature of `reference` (HOST/NAME@DIGEST), pushed as its referrer."""
        self._run("sign", "--key", str(self.key), "--tlog-upload=false", "--yes",
                  "--registry-referrers-mode=oci-1-1", "--allow-http-registry",
                  "--allow-insecure-registry", reference)  # fmt: skip


def add_sbom_referrer(
    layout: oci.Layout, subject: oci.Descriptor, sbom: Path, created: str
) -> oci.Descriptor:
    """The SBOM file as an OCI 1.1 artifact whose subject is `subject` (a platform manifest)."""
    empty = layout.add_bytes(EMPTY_TYPE, b"{}")
    blob = layout.add_bytes(SBOM_TYPE, sbom.read_bytes())
    manifest = {
        "schemaVersion": 2, "mediaType": oci.MANIFEST_TYPE, "artifactType": SBOM_TYPE,
        "config": empty.json(),
        "layers": [{**blob.json(), "annotations": {TITLE: sbom.name}}],
        "subject": subject.json(),
        "annotations": {"org.opencontainers.image.created": created},
    }  # fmt: skip
    return layout.add_json(oci.MANIFEST_TYPE, manifest)


def sign_layout(
    signer: Signer, layout_path: Path, signed: list[str], subjects: list[str],
    registry_bin_dir: Path, name: str = "graceful-drain",
) -> list[oci.Json]:  # fmt: skip
    """Push the layout to a registry of its own, sign each digest of `signed`, and copy every
    referrer of `subjects` (and theirs) back into the layout's blobs; the referrers'
    descriptors, for index.json."""
    from realcluster.registry import Registry  # the loopback registry the tests use too

    with (
        tempfile.TemporaryDirectory(prefix="sign-") as tmp,
        Registry(registry_bin_dir, Path(tmp)) as registry,
    ):
        repository = Repository.parse(f"{registry.url}/{name}")
        push_layout(layout_path, repository)
        for digest in signed:
            signer.sign_manifest(f"{registry.host}/{name}@{digest}")
        referrers: dict[str, oci.Json] = {}
        for subject in subjects:
            for descriptor in fetch_referrers(repository, subject, layout_path):
                referrers.setdefault(descriptor["digest"], descriptor)
    return [referrers[digest] for digest in sorted(referrers)]


def throwaway_key(cosign: Path, directory: Path) -> Path:
    """A key pair for tests (cosign.key, cosign.pub in `directory`, empty password), made
    once and reused."""
    key = directory / "cosign.key"
    if not key.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [str(cosign), "generate-key-pair"], cwd=directory, capture_output=True, text=True,
            env={**os.environ, PASSWORD_VARIABLE: ""}, stdin=subprocess.DEVNULL, check=False,
            timeout=COSIGN_TIMEOUT_SECONDS,
        )  # fmt: skip
        if result.returncode != 0:
            raise ImageUnavailable(f"cosign generate-key-pair: {result.stderr[-2000:]}")
    return key
