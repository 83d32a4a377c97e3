"""deploy/Dockerfile, read as text (no Docker engine on these machines to build it), and kept
equivalent to the image ./scripts/build-image makes: both declare what imagebuild/spec.py
holds (tests/e2e/real_control_plane/test_image_real.py reads the built image back against it)
and both install with deploy/image/install-venv from deploy/image/requirements.lock."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field

from imagebuild import spec
from tests.unit.deploy.rendered import DEPLOY, REPO, SELF_SIGNED, objects, one

DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
BUILD_TOOLS = re.compile(r"\b(apt-get|apt|apk|gcc|g\+\+|make|build-essential|pip|curl|wget)\b")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)


def parse_stages(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) from a Dockerfile without heredocs."""
    joined = re.sub(r"\\\n", " ", text)
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif stages:
            stages[-1].instructions.append((keyword, rest.strip()))
        elif keyword == "ARG":
            key, _, default = rest.partition("=")
            args[key] = default
    return args, stages


def _resolve(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], value)


def test_parse_stages_reads_a_two_stage_file() -> None:
    args, stages = parse_stages("ARG B=x:1\nFROM ${B} AS one\nRUN a \\\n b\nFROM ${B}\nUSER 1\n")
    assert args == {"B": "x:1"}
    assert [(s.base, s.name) for s in stages] == [("${B}", "one"), ("${B}", None)]
    assert stages[0].instructions == [("RUN", "a   b")]


def test_multi_stage_on_the_python_minor_of_the_debian_image() -> None:
    args, stages = parse_stages(DOCKERFILE.read_text())
    assert len(stages) == 2
    assert [_resolve(stage.base, args) for stage in stages] == [
        f"python:{spec.PYTHON_MINOR}-slim"
    ] * 2
    assert (
        tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
        == f">={spec.PYTHON_MINOR}"
    )
    build = stages[0]
    assert build.name == "build"
    runs = " ".join(rest for keyword, rest in build.instructions if keyword == "RUN")
    assert "pip wheel --no-deps --wheel-dir /wheels ." in runs
    # The same install as scripts/build-image's, from the same lock, into the same place.
    assert (
        f"sh deploy/image/install-venv python {spec.VENV} deploy/image/requirements.lock "
        "/wheels/*.whl"
    ) in runs


def test_final_stage_declares_what_the_image_build_declares() -> None:
    _, stages = parse_stages(DOCKERFILE.read_text())
    final = stages[-1]
    keywords = [keyword for keyword, _ in final.instructions]
    assert "RUN" not in keywords  # nothing installed or compiled in the final stage
    copies = [rest for keyword, rest in final.instructions if keyword == "COPY"]
    assert copies == [f"--from=build {spec.VENV} {spec.VENV}"]
    for keyword, rest in final.instructions:
        if keyword != "ENV":
            assert not BUILD_TOOLS.search(rest), (keyword, rest)

    def declared(keyword: str) -> list[str]:
        return [rest for key, rest in final.instructions if key == keyword]

    assert declared("USER") == [spec.USER]
    context = one(objects(SELF_SIGNED), "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert f"{context['runAsUser']}:{context['runAsGroup']}" == spec.USER
    assert [json.loads(rest) for rest in declared("ENTRYPOINT")] == [list(spec.ENTRYPOINT)]
    assert [json.loads(rest) for rest in declared("CMD")] == [list(spec.CMD)]
    # the console script pyproject.toml declares
    assert 'graceful-drain = "graceful_drain.cli:main"' in (REPO / "pyproject.toml").read_text()
    assert [int(port) for rest in declared("EXPOSE") for port in rest.split()] == list(
        spec.EXPOSED_PORTS
    )
    # ENV: the same variables; PATH is the virtualenv's bin before the base image's PATH.
    [env_line] = declared("ENV")
    docker_env = dict(item.split("=", 1) for item in env_line.split())
    image_env = dict(item.split("=", 1) for item in spec.ENV)
    assert docker_env.keys() == image_env.keys()
    assert docker_env.pop("PATH") == f"{spec.VENV}/bin:$PATH"
    assert image_env.pop("PATH").startswith(f"{spec.VENV}/bin:")
    assert docker_env == image_env


def test_build_context_is_what_the_image_build_uses() -> None:
    """The wheel's sources (the controller's package, not kubesim) and the install script and
    lock, as imagebuild/spec.py lists them."""
    lines = [line for line in DOCKERIGNORE.read_text().splitlines() if not line.startswith("#")]
    assert lines[0] == "*"
    allowed = {line.removeprefix("!").rstrip("/") for line in lines if line.startswith("!")}
    image_files = {str(path.relative_to(REPO)) for path in (spec.LOCK, spec.INSTALL_VENV)}
    assert allowed == set(spec.WHEEL_SOURCES) | image_files
    _, stages = parse_stages(DOCKERFILE.read_text())
    copied = [rest.split() for keyword, rest in stages[0].instructions if keyword == "COPY"]
    sources = {source for words in copied for source in words[:-1]}
    assert sources == set(spec.WHEEL_SOURCES) | image_files
