"""A small OCI distribution client (https://github.com/opencontainers/distribution-spec),
standard library only: push an OCI image layout to a registry, pull one image back.

    repository = Repository.parse("http://127.0.0.1:5000/graceful-drain")
    [pushed] = push_layout(Path("dist/image"), repository)   # -> its tag and digest
    pull(repository, pushed.digest, Path("pulled"), "0.1.0")  # -> a layout of one image

    python -m imagebuild.registry push dist/image http://127.0.0.1:5000/graceful-drain
    # prints each pushed entry: TAG HOST:PORT/NAME@DIGEST

`push_layout` pushes what index.json lists (an image manifest, or an image index and the
platform manifests it lists, recursively), each manifest after its config and layers and
each index after its manifests, then every referrer found in the layout (a manifest whose
`subject` was pushed: an SBOM, a signature), and tags each index.json entry with its
`org.opencontainers.image.ref.name`. A blob the registry already has (HEAD) is not sent
again; a blob is sent in one POST + PUT. Every digest the registry answers is checked
against the layout's. No authentication: for a registry on loopback or behind a proxy.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import platform
import re
import shutil
import sys
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from imagebuild.oci import LAYOUT_VERSION, MANIFEST_TYPE, REF_NAME

Json = dict[str, Any]

INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST_TYPE = "application/vnd.docker.distribution.manifest.list.v2+json"
INDEX_TYPES = frozenset({INDEX_TYPE, DOCKER_LIST_TYPE})
MANIFEST_TYPES = frozenset({MANIFEST_TYPE, DOCKER_MANIFEST_TYPE}) | INDEX_TYPES
TIMEOUT = 120.0  # seconds per request: a layer of tens of MB on a loaded machine
# A blob read as a possible referrer manifest only below this size (layers are larger).
_MANIFEST_MAX = 4 * 1024 * 1024
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"  # the distribution spec's name grammar
_NAME = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class RegistryError(RuntimeError):
    """The registry refused or answered what the specification does not allow."""


@dataclass(frozen=True)
class Repository:
    """A repository of a registry: `http://127.0.0.1:5000` and `graceful-drain`."""

    base: str  # scheme://host[:port]
    name: str

    @classmethod
    def parse(cls, url: str) -> Repository:
        """From `http[s]://HOST[:PORT]/NAME`; a clear error for anything else."""
        parts = urllib.parse.urlsplit(url)
        name = parts.path.strip("/")
        if parts.scheme not in {"http", "https"} or not parts.netloc or parts.query:
            raise ValueError(f"{url!r}: expected http[s]://HOST[:PORT]/REPOSITORY")
        if not _NAME.fullmatch(name):
            raise ValueError(f"{url!r}: {name!r} is not a repository name (lowercase a-z0-9._-/)")
        return cls(f"{parts.scheme}://{parts.netloc}", name)

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.base).netloc

    def reference(self, digest: str) -> str:
        """The image reference a Pod spec names: HOST[:PORT]/NAME@DIGEST."""
        return f"{self.host}/{self.name}@{digest}"

    def url(self, kind: str, reference: str) -> str:
        return f"{self.base}/v2/{self.name}/{kind}/{reference}"


def parse_reference(reference: str, scheme: str = "http") -> tuple[Repository, str]:
    """`HOST[:PORT]/NAME@sha256:...` -> (its repository, its digest)."""
    location, at, digest = reference.rpartition("@")
    if not at or not _DIGEST.fullmatch(digest) or "/" not in location:
        raise ValueError(f"{reference!r}: expected HOST[:PORT]/REPOSITORY@sha256:<64 hex>")
    host, _, name = location.partition("/")
    return Repository.parse(f"{scheme}://{host}/{name}"), digest


def upload_url(base: str, location: str, digest: str) -> str:
    """The PUT that completes a blob upload: the POST's Location (absolute, or relative to
    the registry), its own query kept, with `digest` added."""
    absolute = urllib.parse.urljoin(base + "/", location)
    parts = urllib.parse.urlsplit(absolute)
    query = [*urllib.parse.parse_qsl(parts.query, keep_blank_values=True), ("digest", digest)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


@dataclass(frozen=True)
class Pushed:
    """An index.json entry as the registry stored it."""

    tag: str
    digest: str
    media_type: str


def _request(
    method: str,
    url: str,
    body: bytes | IO[bytes] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    parts = urllib.parse.urlsplit(url)
    connection_type = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_type(parts.netloc, timeout=TIMEOUT)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    except OSError as error:
        raise RegistryError(f"{method} {url}: {error}") from error
    finally:
        connection.close()


def _expect(status: int, wanted: int, method: str, url: str, data: bytes) -> None:
    if status != wanted:
        text = data.decode(errors="replace")[:2000]
        raise RegistryError(f"{method} {url} answered {status} (expected {wanted}): {text}")


class _Pusher:
    def __init__(self, layout: Path, repository: Repository) -> None:
        self.layout = layout
        self.repository = repository
        self.pushed: set[str] = set()

    def blob_path(self, digest: str) -> Path:
        if not _DIGEST.fullmatch(digest):
            raise RegistryError(f"{self.layout}: unsupported digest {digest!r}")
        path = self.layout / "blobs" / "sha256" / digest.removeprefix("sha256:")
        if not path.is_file():
            raise RegistryError(f"{self.layout}: blob {digest} is missing")
        return path

    def blob(self, descriptor: Json) -> None:
        digest = str(descriptor["digest"])
        if digest in self.pushed:
            return
        path = self.blob_path(digest)
        url = self.repository.url("blobs", digest)
        if _request("HEAD", url)[0] != 200:
            uploads = f"{self.repository.base}/v2/{self.repository.name}/blobs/uploads/"
            status, headers, data = _request("POST", uploads, b"", {"Content-Length": "0"})
            _expect(status, 202, "POST", uploads, data)
            location = headers.get("Location")
            if not location:
                raise RegistryError(f"POST {uploads} answered 202 without a Location")
            put = upload_url(self.repository.base, location, digest)
            size = path.stat().st_size
            with path.open("rb") as file:
                status, headers, data = _request("PUT", put, file, {
                    "Content-Type": "application/octet-stream", "Content-Length": str(size),
                })  # fmt: skip
            _expect(status, 201, "PUT", put, data)
            self.check_digest(headers, digest, "blob")
        self.pushed.add(digest)

    def check_digest(self, headers: http.client.HTTPMessage, digest: str, what: str) -> None:
        answered = headers.get("Docker-Content-Digest")
        if answered is not None and answered != digest:
            raise RegistryError(f"the registry stored {what} {digest} as {answered}")

    def document(self, digest: str) -> tuple[bytes, Json]:
        data = self.blob_path(digest).read_bytes()
        return data, json.loads(data)

    def manifest(self, descriptor: Json, tag: str | None = None) -> str:
        """Push the manifest or index `descriptor` names, what it refers to first; tag it."""
        digest = str(descriptor["digest"])
        data, document = self.document(digest)
        media_type = str(document.get("mediaType") or descriptor["mediaType"])
        if media_type in INDEX_TYPES:
            for child in document["manifests"]:
                self.manifest(child)
        elif media_type in MANIFEST_TYPES:
            for blob in [document["config"], *document.get("layers", [])]:
                self.blob(blob)
        else:
            raise RegistryError(f"{self.layout}: {digest} is a {media_type}, not a manifest")
        if tag is None and digest in self.pushed:
            return digest
        url = self.repository.url("manifests", tag or digest)
        status, headers, answer = _request("PUT", url, data, {"Content-Type": media_type})
        _expect(status, 201, "PUT", url, answer)
        self.check_digest(headers, digest, "manifest")
        self.pushed.add(digest)
        subject = document.get("subject")
        if isinstance(subject, dict) and headers.get("OCI-Subject") is None:
            # No referrers API here (the registry did not answer OCI-Subject): keep the
            # referrers tag schema's index, which clients read instead.
            add_to_fallback_tag(self.repository, str(subject["digest"]), _referrer(
                digest, len(data), media_type, document))  # fmt: skip
        return digest

    def manifests_in_blobs(self) -> Iterator[tuple[str, Json]]:
        """Every blob of the layout that is a manifest (by its JSON), with its digest."""
        for path in sorted((self.layout / "blobs" / "sha256").iterdir()):
            if path.stat().st_size > _MANIFEST_MAX:
                continue
            try:
                document = json.loads(path.read_bytes())
            except ValueError:
                continue
            if isinstance(document, dict) and document.get("mediaType") in MANIFEST_TYPES:
                yield f"sha256:{path.name}", document

    def referrers(self) -> None:
        """Push every manifest whose subject is pushed, until none is left."""
        waiting = {
            digest: document
            for digest, document in self.manifests_in_blobs()
            if isinstance(document.get("subject"), dict)
        }
        while ready := [
            digest for digest, document in waiting.items()
            if document["subject"].get("digest") in self.pushed
        ]:  # fmt: skip
            for digest in ready:
                self.manifest({"digest": digest, "mediaType": waiting.pop(digest)["mediaType"]})


def push_layout(layout: Path, repository: Repository) -> list[Pushed]:
    """Push the OCI image layout at `layout` to `repository` (see the module doc); what each
    index.json entry became. An entry without a ref.name annotation is pushed by digest,
    but a referrer's (a manifest with a subject) is pushed with the referrers, after its
    subject, and not listed."""
    index_path = layout / "index.json"
    if not index_path.is_file():
        raise RegistryError(f"{layout}: not an OCI image layout (no index.json)")
    pusher = _Pusher(layout, repository)
    pushed = []
    for entry in json.loads(index_path.read_text())["manifests"]:
        tag = (entry.get("annotations") or {}).get(REF_NAME)
        if tag is None and "subject" in pusher.document(str(entry["digest"]))[1]:
            continue  # a referrer listed for other tools (oras): pushed after its subject
        digest = pusher.manifest(entry, tag)
        pushed.append(Pushed(tag or "", digest, str(entry["mediaType"])))
    pusher.referrers()
    return pushed


def host_platform() -> tuple[str, str]:
    """(os, architecture) in OCI's words for this machine: ("linux", "amd64")."""
    machine = platform.machine()
    return "linux", _ARCHITECTURES.get(machine, machine)


def _get(url: str, accept: str = "") -> bytes:
    status, _, data = _request("GET", url, None, {"Accept": accept} if accept else {})
    _expect(status, 200, "GET", url, data)
    return data


def _verified(data: bytes, digest: str) -> bytes:
    actual = f"sha256:{hashlib.sha256(data).hexdigest()}"
    if actual != digest:
        raise RegistryError(f"the registry served {actual} for {digest}")
    return data


def pull(
    repository: Repository, digest: str, layout: Path, tag: str,
    os_arch: tuple[str, str] | None = None,
) -> Json:  # fmt: skip
    """The image `digest` names (an image index resolved to the manifest for `os_arch`, by
    default this machine's, as a container runtime resolves it) written as a new OCI layout
    at `layout` whose one index.json entry is named `tag`; that entry's descriptor. Every
    blob is checked against its digest."""
    os_name, architecture = os_arch or host_platform()
    accept = ",".join(sorted(MANIFEST_TYPES))
    data = _verified(_get(repository.url("manifests", digest), accept), digest)
    document = json.loads(data)
    media_type = str(document.get("mediaType"))
    if media_type in INDEX_TYPES:
        matching = [
            child for child in document["manifests"]
            if (child.get("platform") or {}).get("os") == os_name
            and child["platform"].get("architecture") == architecture
        ]  # fmt: skip
        if not matching:
            raise RegistryError(f"{repository.reference(digest)} has no {os_name}/{architecture}")
        digest, media_type = matching[0]["digest"], matching[0]["mediaType"]
        data = _verified(_get(repository.url("manifests", digest), accept), digest)
        document = json.loads(data)
    shutil.rmtree(layout, ignore_errors=True)
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    (blobs / digest.removeprefix("sha256:")).write_bytes(data)
    for blob in [document["config"], *document.get("layers", [])]:
        content = _verified(_get(repository.url("blobs", blob["digest"])), blob["digest"])
        (blobs / blob["digest"].removeprefix("sha256:")).write_bytes(content)
    entry = {"mediaType": media_type, "digest": digest, "size": len(data),
             "annotations": {REF_NAME: tag}}  # fmt: skip
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": LAYOUT_VERSION}))
    return entry


def _referrer(digest: str, size: int, media_type: str, document: Json) -> Json:
    """A referrer's descriptor as the referrers API lists it."""
    descriptor: Json = {"mediaType": media_type, "digest": digest, "size": size}
    artifact_type = document.get("artifactType") or document.get("config", {}).get("mediaType")
    if artifact_type:
        descriptor["artifactType"] = artifact_type
    if document.get("annotations"):
        descriptor["annotations"] = document["annotations"]
    return descriptor


def fallback_tag(digest: str) -> str:
    """The referrers tag schema's tag of `digest`'s referrers: sha256-<hex>."""
    return digest.replace(":", "-")


def add_to_fallback_tag(repository: Repository, subject: str, descriptor: Json) -> None:
    """Add `descriptor` to the image index tagged sha256-<subject hex> (made if absent)."""
    url = repository.url("manifests", fallback_tag(subject))
    status, _, data = _request("GET", url, None, {"Accept": INDEX_TYPE})
    if status == 404:
        index: Json = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": []}
    else:
        _expect(status, 200, "GET", url, data)
        index = json.loads(data)
    if any(m.get("digest") == descriptor["digest"] for m in index["manifests"]):
        return
    index["manifests"].append(descriptor)
    body = json.dumps(index).encode()
    status, _, answer = _request("PUT", url, body, {"Content-Type": INDEX_TYPE})
    _expect(status, 201, "PUT", url, answer)


def list_referrers(repository: Repository, digest: str) -> list[Json]:
    """The referrers of `digest`: the OCI 1.1 referrers API, or, where the registry has none
    (404), the referrers tag schema's index (none when that tag does not exist)."""
    status, _, data = _request("GET", repository.url("referrers", digest), None,
                               {"Accept": INDEX_TYPE})  # fmt: skip
    if status == 404:
        status, _, data = _request("GET", repository.url("manifests", fallback_tag(digest)),
                                   None, {"Accept": INDEX_TYPE})  # fmt: skip
        if status == 404:
            return []
    _expect(status, 200, "GET", repository.url("referrers", digest), data)
    manifests: list[Json] = json.loads(data).get("manifests", [])
    return manifests


def fetch_referrers(repository: Repository, digest: str, layout: Path) -> list[Json]:
    """Copy into `layout`'s blobs every referrer of `digest` the registry lists (the OCI 1.1
    referrers API), its config and layers, and theirs in turn (a signature of an SBOM);
    their descriptors, for index.json."""
    found: list[Json] = []
    pending = [digest]
    while pending:
        subject = pending.pop()
        for descriptor in list_referrers(repository, subject):
            manifest = _verified(
                _get(repository.url("manifests", descriptor["digest"]), descriptor["mediaType"]),
                descriptor["digest"],
            )  # fmt: skip
            document = json.loads(manifest)
            for blob in [document["config"], *document.get("layers", [])]:
                target = layout / "blobs" / "sha256" / blob["digest"].removeprefix("sha256:")
                if not target.exists():
                    target.write_bytes(
                        _verified(_get(repository.url("blobs", blob["digest"])), blob["digest"])
                    )
            (layout / "blobs" / "sha256" / descriptor["digest"].removeprefix("sha256:")
             ).write_bytes(manifest)  # fmt: skip
            found.append(
                {
                    key: descriptor[key]
                    for key in ("mediaType", "digest", "size", "artifactType")
                    if key in descriptor
                }
            )
            pending.append(descriptor["digest"])
    return found


def resolve(repository: Repository, tag: str) -> str:
    """The digest the registry answers for `tag` (HEAD of the manifest, as a client checks
    that a reference exists)."""
    url = repository.url("manifests", tag)
    accept = {"Accept": ",".join(sorted(MANIFEST_TYPES))}
    status, headers, data = _request("HEAD", url, None, accept)
    _expect(status, 200, "HEAD", url, data)
    digest = headers.get("Docker-Content-Digest")
    if digest is None or not _DIGEST.fullmatch(digest):
        raise RegistryError(f"HEAD {url} answered no Docker-Content-Digest")
    return digest


def exists(repository: Repository, reference: str) -> bool:
    """Whether the registry has the manifest `reference` (a tag or a digest) names (HEAD)."""
    accept = {"Accept": ",".join(sorted(MANIFEST_TYPES))}
    return _request("HEAD", repository.url("manifests", reference), None, accept)[0] == 200


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m imagebuild.registry",
        description="Push an OCI image layout to a registry (no authentication).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    push = commands.add_parser("push", help="push LAYOUT to REPOSITORY; print TAG REFERENCE")
    push.add_argument("layout", type=Path, help="an OCI image layout folder (dist/image)")
    push.add_argument("repository", help="http[s]://HOST[:PORT]/NAME")
    args = parser.parse_args(argv)
    try:
        repository = Repository.parse(args.repository)
        pushed = push_layout(args.layout, repository)
    except (ValueError, KeyError, OSError, RegistryError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1
    for entry in pushed:
        print(entry.tag or "-", repository.reference(entry.digest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
