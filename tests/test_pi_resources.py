"""pi's prompt templates and skills (issue 27 item 4), against pi 1.6.0 itself.

The RPC tests run a real ``trio-session rpc`` process on an agent directory holding two
templates and a skill. The cases below are also run through pi 1.6.0's own
``parseCommandArgs``/``substituteArgs`` and ``parseFrontmatter`` under node, by
tests/interop/test_pi16_resources.py: the answers must be equal.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_session._pi.resources import (
    MAX_RESOURCE_FILE_BYTES,
    ResourceFileError,
    load_resources,
    read_resource_file,
)
from trio_session.rpc._client import default_command

from .rpc_helpers import RawLines

REVIEW = """---
description: Review the staged changes
argument-hint: "[focus]"
---
Review $1. All: $@. From 2: ${@:2}. One from 2: ${@:2:1}. Args: $ARGUMENTS. Third: ${3:-none}.
"""
EXPLAIN = "Explain the code in $1\nand nothing else\n"
DEPLOY = """---
name: deploy
description: Deploy the app. Use when asked to ship.
---

# Deploy

Run scripts/deploy.sh.
"""


def agent_dir(root: Path) -> Path:
    """An agent directory: templates review.md and explain.md, skill deploy."""
    agent = root / "agent"
    (agent / "prompts").mkdir(parents=True)
    (agent / "skills" / "deploy").mkdir(parents=True)
    (agent / "prompts" / "review.md").write_text(REVIEW)
    (agent / "prompts" / "explain.md").write_text(EXPLAIN)
    (agent / "skills" / "deploy" / "SKILL.md").write_text(DEPLOY)
    return agent


def pi_commands(agent: Path) -> list[dict[str, Any]]:
    """What pi 1.6.0's get_commands answered for ``agent_dir`` (run by hand once, the
    paths made relative to it): the templates sorted by name, then the skill."""

    def info(path: str) -> dict[str, Any]:
        return {
            "path": str(agent / path),
            "source": "auto",
            "scope": "user",
            "origin": "top-level",
            "baseDir": str(agent),
        }

    return [
        {
            "name": "explain",
            "description": "Explain the code in $1",
            "source": "prompt",
            "sourceInfo": info("prompts/explain.md"),
        },
        {
            "name": "review",
            "description": "Review the staged changes",
            "source": "prompt",
            "sourceInfo": info("prompts/review.md"),
        },
        {
            "name": "skill:deploy",
            "description": "Deploy the app. Use when asked to ship.",
            "source": "skill",
            "sourceInfo": info("skills/deploy/SKILL.md"),
        },
    ]


async def rpc_session(tmp_path: Path, agent: Path, commands: list[dict[str, Any]]) -> list[Any]:
    """Run ``trio-session rpc --agent-dir AGENT`` on a faux model; send each command, wait
    for its response (and for ``agent_end`` after a prompt); the responses, in order."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "ok"}] * len(commands)))
    environ = os.environ | {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path)}
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    args = ["--agent-dir", str(agent), "--faux", str(script), "--no-session"]
    process = await trio.lowlevel.open_process(
        default_command(*args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=environ,
        cwd=project,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    raw = RawLines(process.stdin, process.stdout)
    answers: list[Any] = []
    try:
        with trio.fail_after(60):
            for command in commands:
                await raw.send(command)
                while (line := await raw.read()).get("type") != "response":
                    pass
                answers.append(line)
                if command["type"] == "prompt" and line["success"]:
                    while (await raw.read()).get("type") != "agent_end":
                        pass
            await raw.send_stream.aclose()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return answers


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of each user message in a get_messages answer."""
    return [
        "".join(part["text"] for part in m["content"] if part["type"] == "text")
        if isinstance(m["content"], list)
        else m["content"]
        for m in messages
        if m["role"] == "user"
    ]


async def test_rpc_get_commands_lists_templates_and_skills_in_pis_shape(tmp_path: Path) -> None:
    """get_commands lists the agent directory's templates and skill exactly as pi 1.6.0."""
    agent = agent_dir(tmp_path)
    (answer,) = await rpc_session(tmp_path, agent, [{"id": "c", "type": "get_commands"}])
    assert answer == {
        "id": "c",
        "type": "response",
        "command": "get_commands",
        "success": True,
        "data": {"commands": pi_commands(agent)},
    }


async def test_rpc_prompt_expands_templates_and_skills_and_keeps_unknown_names(
    tmp_path: Path,
) -> None:
    """A template call is sent (and kept in history) with pi's substitution; /skill:NAME
    becomes pi's skill block with the arguments after it; an unknown /name goes as typed."""
    agent = agent_dir(tmp_path)
    prompts = [
        '/review arg1 "arg two" doesn\'t',
        "/explain",
        "/skill:deploy  to staging ",
        "/nope a b",
    ]
    commands = [{"type": "prompt", "message": text} for text in prompts]
    answers = await rpc_session(tmp_path, agent, [*commands, {"type": "get_messages"}])
    assert all(a["success"] for a in answers)
    skill = agent / "skills" / "deploy"
    assert user_texts(answers[-1]["data"]["messages"]) == [
        "Review arg1. All: arg1 arg two doesn't. From 2: arg two doesn't. One from 2: arg two."
        " Args: arg1 arg two doesn't. Third: doesn't.",
        "Explain the code in \nand nothing else\n",
        f'<skill name="deploy" location="{skill / "SKILL.md"}">\n'
        f"References are relative to {skill}.\n\n# Deploy\n\nRun scripts/deploy.sh.\n</skill>"
        "\n\nto staging",
        "/nope a b",
    ]


def test_without_an_agent_dir_nothing_is_read(tmp_path: Path) -> None:
    """pi's directories are read only when asked for: no agent dir, no commands."""
    agent_dir(tmp_path)
    resources = load_resources(None, cwd=tmp_path)
    assert (resources.commands(), resources.expand("/review x")) == ([], "/review x")


def test_project_resources_need_trust(tmp_path: Path) -> None:
    """A project's .pi/prompts counts only when AGENT_DIR/trust.json trusts the project
    (pi 1.6.0 without a UI), and then comes first; a name given twice keeps the first."""
    agent = agent_dir(tmp_path)
    project = tmp_path / "project"
    (project / ".pi" / "prompts").mkdir(parents=True)
    (project / ".pi" / "prompts" / "review.md").write_text("Project review of $1\n")
    untrusted = load_resources(agent, cwd=project, home=tmp_path)
    assert untrusted.expand("/review x").startswith("Review x.")
    (agent / "trust.json").write_text(json.dumps({str(project.resolve()): True}))
    trusted = load_resources(agent, cwd=project, home=tmp_path)
    assert trusted.expand("/review x") == "Project review of x\n"  # no frontmatter: untrimmed
    assert trusted.commands()[0]["sourceInfo"]["scope"] == "project"
    assert trusted.warnings == (
        f'{agent / "prompts" / "review.md"}: name "/review" collision; '
        f"{project / '.pi' / 'prompts' / 'review.md'} is kept",
    )


def test_files_that_are_not_read(tmp_path: Path) -> None:
    """A file over the size bound is left out with a warning, a FIFO silently (pi lists
    regular files only; read_resource_file refuses it without blocking, should one
    appear between the listing and the read); a SKILL.md without a description is left
    out as pi does."""
    agent = agent_dir(tmp_path)
    os.mkfifo(agent / "prompts" / "pipe.md")
    (agent / "prompts" / "huge.md").write_text("x" * (MAX_RESOURCE_FILE_BYTES + 1))
    (agent / "skills" / "bare").mkdir()
    (agent / "skills" / "bare" / "SKILL.md").write_text("no frontmatter\n")
    resources = load_resources(agent, cwd=tmp_path, home=tmp_path)
    assert [c["name"] for c in resources.commands()] == ["explain", "review", "skill:deploy"]
    assert resources.warnings == (
        f"{agent / 'prompts' / 'huge.md'}: left out (larger than {MAX_RESOURCE_FILE_BYTES} bytes)",
        f"{agent / 'skills' / 'bare' / 'SKILL.md'}: description is required",
    )
    with pytest.raises(ResourceFileError, match=r"^not a regular file$"):
        read_resource_file(agent / "prompts" / "pipe.md")


# -- the same inputs through pi 1.6.0's own functions ------------------------------------

ARGUMENT_CASES = [
    'arg1 "arg two"',
    "doesn't matter",
    '"the \\"fast\\" path" x',
    "'single quoted' \"\" ''",
    '"unclosed quote here',
    "a\tb\n c   ",
    "it's 'ok' \"\\'\"",
    "",
]
TEMPLATE = (
    "1=$1 2=$2 9=$9 0=$0 @=$@ A=$ARGUMENTS s=${@:2} s0=${@:0} l=${@:2:1} d=${3:-dflt} D=${@:-all}"
)

FRONTMATTER_CASES = [
    REVIEW,
    EXPLAIN,
    DEPLOY,
    "\ufeff---\r\ndescription: x\r\n---\r\n\r\n body \r\n",
    "---\ndescription: Use when: x\n---\nb",
    "---\ndescription: >\n  folded\n  text\n\n  para\n---\nb",
    "---\ndescription: |-\n  literal\n  text\n---\nb",
    '---\ndescription: "q \\"x\\" \\u00e9"\n---\nb',
    "---\ndescription: 'it''s'\n---\nb",
    "---\ndescription: long plain\n  continued here\n---\nb",
    "---\nmetadata:\n  a: 1\n  b: [1, 2]\ndescription: d # comment\n---\nb",
    "---\ndescription: 123\nname: true\n---\nb",
    "---\ndisable-model-invocation: true\n---\n",
    "---\na: 1\na: 2\n---\n",
    "---\n  indented: x\n---\n",
    "---\n- a\n---\nbody",
    "---\n---\nbody",
    '---\ndescription: "unclosed\n---\nbody',
    "---\ndescription:\n---\nbody",
    "---\ndescription: x\n---more\nbody",
    "---\ndescription: 2024-01-01\n---\n",
]
