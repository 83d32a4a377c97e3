"""imagebuild.registry's pure parts: repository URLs, image references, the blob upload's
completing URL. (The client against a real registry: tests/e2e/real_control_plane/
test_registry_real.py.)"""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imagebuild.registry import Repository, parse_reference, upload_url

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("url", "base", "name"),
    [
        ("http://127.0.0.1:5000/graceful-drain", "http://127.0.0.1:5000", "graceful-drain"),
        ("https://registry.example/team/graceful-drain/", "https://registry.example",
         "team/graceful-drain"),
        ("http://localhost:5000/a.b_c__d--e/f", "http://localhost:5000", "a.b_c__d--e/f"),
    ],
)  # fmt: skip
def test_a_repository_url_is_its_registry_and_name(url: str, base: str, name: str) -> None:
    assert Repository.parse(url) == Repository(base, name)


@pytest.mark.parametrize(
    "url",
    [
        "127.0.0.1:5000/graceful-drain",  # no scheme
        "oci://127.0.0.1:5000/graceful-drain",
        "http://127.0.0.1:5000/",  # no name
        "http://127.0.0.1:5000/Graceful-Drain",  # upper case
        "http://127.0.0.1:5000/graceful-drain:0.1.0",  # a tag is not part of the name
        "http://127.0.0.1:5000/a//b",
        "http://127.0.0.1:5000/-a",
        "http://127.0.0.1:5000/graceful-drain?x=1",
    ],
)
def test_anything_else_is_refused_naming_it(url: str) -> None:
    with pytest.raises(ValueError, match=r"expected http|is not a repository name") as refused:
        Repository.parse(url)
    assert repr(url) in str(refused.value)


@pytest.mark.parametrize(
    ("reference", "base", "name"),
    [
        (f"127.0.0.1:5000/graceful-drain@{DIGEST}", "http://127.0.0.1:5000", "graceful-drain"),
        (f"registry.example/a/b@{DIGEST}", "http://registry.example", "a/b"),
    ],
)  # fmt: skip
def test_an_image_reference_by_digest_is_parsed(reference: str, base: str, name: str) -> None:
    repository, digest = parse_reference(reference)
    assert (repository, digest) == (Repository(base, name), DIGEST)
    assert repository.reference(digest) == reference


@pytest.mark.parametrize(
    "reference",
    [
        "127.0.0.1:5000/graceful-drain:0.1.0",  # by tag
        f"graceful-drain@{DIGEST}",  # no registry
        "127.0.0.1:5000/graceful-drain@sha256:abc",
        f"127.0.0.1:5000/graceful-drain@{DIGEST.upper()}",
    ],
)
def test_a_reference_not_by_digest_is_refused(reference: str) -> None:
    with pytest.raises(ValueError, match="expected HOST"):
        parse_reference(reference)


@pytest.mark.parametrize(
    ("location", "url"),
    [
        # distribution answers a relative Location with its own state in the query
        ("/v2/gd/blobs/uploads/u1?_state=s%3D", f"http://r:5/v2/gd/blobs/uploads/u1?_state=s%3D&digest={DIGEST}"),
        ("http://other:6/v2/gd/blobs/uploads/u1", f"http://other:6/v2/gd/blobs/uploads/u1?digest={DIGEST}"),
        ("/v2/gd/blobs/uploads/u1?a=&b=2", f"http://r:5/v2/gd/blobs/uploads/u1?a=&b=2&digest={DIGEST}"),
    ],
)  # fmt: skip
def test_the_upload_completes_at_its_location_with_the_digest(location: str, url: str) -> None:
    completed = upload_url("http://r:5", location, DIGEST)
    assert urllib.parse.parse_qsl(
        urllib.parse.urlsplit(completed).query, keep_blank_values=True
    ) == urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True)
    assert completed.split("?")[0] == url.split("?")[0]


COMPONENT = st.from_regex(r"[a-z0-9]{1,5}(?:[._-][a-z0-9]{1,5}){0,2}", fullmatch=True)


@given(
    host=st.from_regex(r"[a-z][a-z0-9-]{0,10}(?:\.[a-z]{2,5})?(?::[0-9]{1,5})?", fullmatch=True),
    components=st.lists(COMPONENT, min_size=1, max_size=3),
    hex_digest=st.from_regex(r"[a-f0-9]{64}", fullmatch=True),
)
def test_a_reference_made_from_a_repository_parses_back_to_it(
    host: str, components: list[str], hex_digest: str
) -> None:
    repository = Repository.parse(f"http://{host}/{'/'.join(components)}")
    digest = f"sha256:{hex_digest}"
    assert parse_reference(repository.reference(digest)) == (repository, digest)


@given(
    state=st.text(min_size=0, max_size=20),
    hex_digest=st.from_regex(r"[a-f0-9]{64}", fullmatch=True),
)
def test_the_upload_state_is_kept_whatever_it_holds(state: str, hex_digest: str) -> None:
    location = "/v2/gd/blobs/uploads/u?" + urllib.parse.urlencode({"_state": state})
    query = urllib.parse.urlsplit(upload_url("http://r:5", location, f"sha256:{hex_digest}")).query
    assert urllib.parse.parse_qsl(query, keep_blank_values=True) == [
        ("_state", state), ("digest", f"sha256:{hex_digest}")]  # fmt: skip
