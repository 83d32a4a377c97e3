"""deploy/Dockerfile, read as text (no Docker engine on these machines to build it)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

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


def test_multi_stage_on_python_3_11_slim() -> None:
    args, stages = parse_stages(DOCKERFILE.read_text())
    assert len(stages) == 2
    assert [_resolve(stage.base, args) for stage in stages] == ["python:3.11-slim"] * 2
    build = stages[0]
    assert build.name == "build"
    runs = " ".join(rest for keyword, rest in build.instructions if keyword == "RUN")
    assert "pip wheel --no-deps" in runs
    assert "pip install --only-binary=:all: /wheels/" in runs


def test_final_stage_is_non_root_and_carries_no_build_tools() -> None:
    _, stages = parse_stages(DOCKERFILE.read_text())
    final = stages[-1]
    keywords = [keyword for keyword, _ in final.instructions]
    assert "RUN" not in keywords  # nothing installed or compiled in the final stage
    copies = [rest for keyword, rest in final.instructions if keyword == "COPY"]
    assert copies == ["--from=build /opt/graceful-drain /opt/graceful-drain"]
    for keyword, rest in final.instructions:
        if keyword != "ENV":
            assert not BUILD_TOOLS.search(rest), (keyword, rest)
    users = [rest for keyword, rest in final.instructions if keyword == "USER"]
    assert users == ["65532:65532"]
    context = one(objects(SELF_SIGNED), "Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert users[0] == f"{context['runAsUser']}:{context['runAsGroup']}"
    entrypoint = [
        json.loads(rest) for keyword, rest in final.instructions if keyword == "ENTRYPOINT"
    ]
    assert entrypoint == [["graceful-drain"]]  # the console script pyproject.toml declares
    assert 'graceful-drain = "graceful_drain.cli:main"' in (REPO / "pyproject.toml").read_text()


def test_build_context_is_limited_to_what_the_wheel_needs() -> None:
    lines = [line for line in DOCKERIGNORE.read_text().splitlines() if not line.startswith("#")]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!src/"} <= set(lines)
    _, stages = parse_stages(DOCKERFILE.read_text())
    copied = [rest for keyword, rest in stages[0].instructions if keyword == "COPY"]
    assert copied == ["pyproject.toml README.md ./", "src ./src"]
