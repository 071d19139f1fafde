"""Under ``retry.profile: "pi-1.6"`` the system prompt is kept as pi 1.6.0 keeps it: a
``system`` message entry before the first prompt, with the declared tools; a resumed
file that holds one keeps its prompt (issue 42)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trio_session import FauxProvider, FauxReply, coding_tools, open_session
from trio_session._session.journal import system_text

PI16 = {"retry": {"profile": "pi-1.6"}}


def entries(path: Path) -> list[dict[str, Any]]:
    """The file's entries after its header."""
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


async def test_the_prompt_is_a_system_entry_before_the_first_prompt(tmp_path: Path) -> None:
    """pi-1.6: one system message entry, then the user's; its content is the prompt sent,
    its toolsAdded the declared tools; a second prompt writes none."""
    file = tmp_path / "s.jsonl"
    provider = FauxProvider([FauxReply("one"), FauxReply("two")])
    tools = coding_tools(tmp_path)
    async with open_session(
        provider, settings=PI16, system_prompt="Be brief.", tools=tools, history=file
    ) as session:
        await session.prompt("hello")
        await session.prompt("again")
    kinds = [(e["type"], e.get("message", {}).get("role")) for e in entries(file)]
    assert kinds == [
        ("model_change", None),
        ("thinking_level_change", None),
        ("message", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]
    system, user = entries(file)[2:4]
    assert system["parentId"] == entries(file)[1]["id"]
    assert user["parentId"] == system["id"]
    message = system["message"]
    assert message["content"] == "Be brief."
    assert message["timestamp"] == user["message"]["timestamp"]
    assert [t["name"] for t in message["toolsAdded"]] == ["read", "bash", "edit", "write"]
    assert message["toolsAdded"][0]["parameters"] == dict(tools[0].parameters)
    assert [r.system_prompt for r in provider.requests] == ["Be brief.", "Be brief."]


async def test_the_seed_profile_writes_no_system_entry(tmp_path: Path) -> None:
    """The seed profile (pi 0.73.1's) keeps the prompt out of the file, as pi 0.73.1 does."""
    file = tmp_path / "s.jsonl"
    async with open_session(
        FauxProvider([FauxReply("one")]), system_prompt="Be brief.", history=file
    ) as session:
        await session.prompt("hello")
    assert [e.get("message", {}).get("role") for e in entries(file)][2:] == ["user", "assistant"]


async def test_a_resumed_pi_session_keeps_its_prompt(tmp_path: Path) -> None:
    """A file with pi 1.6.0's system messages: its prompt, rendered as pi renders it, is
    sent instead of ours, and no other system entry is written."""
    file = tmp_path / "pi.jsonl"
    header = {
        "type": "session",
        "version": 3,
        "id": "abc",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": str(tmp_path),
    }
    system = {
        "type": "message",
        "id": "s1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {
            "role": "system",
            "content": "",
            "sections": {"preamble": "You are pi.", "cwd": "<cwd>\n/w\n</cwd>"},
            "timestamp": 1,
        },
    }
    file.write_text("".join(json.dumps(r) + "\n" for r in (header, system)))
    provider = FauxProvider([FauxReply("one")])
    async with open_session(
        provider, settings=PI16, system_prompt="Ours.", history=file
    ) as session:
        await session.prompt("hello")
    assert provider.requests[0].system_prompt == "You are pi.\n\n<cwd>\n/w\n</cwd>"
    roles = [e.get("message", {}).get("role") for e in entries(file)]
    assert roles.count("system") == 1


def test_system_text_merges_sections_as_pi_does() -> None:
    """Content first; a later section replaces an earlier one in its place; null removes."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "", "sections": {"preamble": "P", "tools": "T", "cwd": "C"}},
        {"role": "system", "content": "", "sections": {"tools": "T2", "cwd": None, "x": "X"}},
        {"role": "system", "content": [{"type": "text", "text": "forced"}]},
    ]
    assert system_text(messages) == "forced\n\nP\n\nT2\n\nX"
