"""``chat`` and ``rpc`` as coding agents (issue 42): which tools they give the model
(``--tools``, ``--no-tools``, ``defaultTools``) and the system prompt they send
(context files, ``SYSTEM.md`` / ``APPEND_SYSTEM.md``, ``--system-prompt``,
``--append-system-prompt``, ``--no-context-files``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_session import SettingsLayer, SettingsStore
from trio_session._coding_tools import default_tools
from trio_session._coding_tools._prompt import context_files, system_prompt
from trio_session._commands import CommandError
from trio_session._settings.store import resolve
from trio_session.cli._coding import coding_inputs, tool_names

from .http_server import ScriptedServer, event_stream, sse
from .test_cli import answer_stream, private_env


def flags(**given: Any) -> argparse.Namespace:
    """The namespace ``coding_inputs`` reads, with pi's defaults for what is not given."""
    values: dict[str, Any] = {
        "tools": None,
        "no_tools": False,
        "system_prompt": None,
        "append_system_prompt": [],
        "no_context_files": False,
        "agent_dir_config": None,
    }
    return argparse.Namespace(**(values | given))


def store(*layers: dict[str, Any]) -> SettingsStore:
    """A settings store of these settings-file layers, lowest first."""
    return SettingsStore(
        [SettingsLayer.from_mapping(layer, source=f"layer{i}") for i, layer in enumerate(layers)]
    )


# -- selection -------------------------------------------------------------------------------


def test_tools_flag_replaces_or_changes_the_defaults() -> None:
    """--tools names replace read,bash,edit,write; +name/-name change them; --no-tools empties."""
    settings = store()
    assert tool_names(flags(), settings) == ["read", "bash", "edit", "write"]
    assert tool_names(flags(tools="read,grep,find,ls"), settings) == ["read", "grep", "find", "ls"]
    assert tool_names(flags(tools="+grep,-bash"), settings) == ["read", "edit", "write", "grep"]
    assert tool_names(flags(no_tools=True), settings) == []
    assert tool_names(flags(no_tools=True, tools="+read"), settings) == ["read"]


def test_tools_flag_errors_name_the_problem() -> None:
    """Mixing names and +/- entries, or an unknown tool, is a one-line error."""
    with pytest.raises(
        CommandError,
        match=r"^--tools: plain tool names and \+name/-name entries cannot be mixed: "
        r"'read,\+grep'$",
    ):
        tool_names(flags(tools="read,+grep"), store())
    with pytest.raises(
        CommandError,
        match=r"^no tool is called 'cat' \(the tools: read, bash, edit, write, grep, find, ls\)$",
    ):
        tool_names(flags(tools="read,cat"), store())


def test_default_tools_setting_and_its_layers() -> None:
    """defaultTools: names replace pi's four, +/- change them, and a +/- list in a higher
    file adds to the list below it (pi's mergeDefaultTools)."""
    assert default_tools(None) == ["read", "bash", "edit", "write"]
    assert default_tools(["+ls"]) == ["read", "bash", "edit", "write", "ls"]
    assert default_tools([]) == []
    merged = resolve(
        [
            SettingsLayer.from_mapping({"defaultTools": ["read", "grep"]}, source="global"),
            SettingsLayer.from_mapping({"defaultTools": ["+ls", "-grep"]}, source="project"),
        ]
    )
    assert merged.default_tools == ("read", "grep", "+ls", "-grep")
    assert default_tools(merged.default_tools) == ["read", "ls"]
    settings = store({"defaultTools": ["+find"]})
    assert tool_names(flags(), settings) == ["read", "bash", "edit", "write", "find"]
    assert tool_names(flags(tools="read"), settings) == ["read"]


def test_default_tools_names_pi_knows_and_we_do_not(capsys: pytest.CaptureFixture[str]) -> None:
    """A pi tool in defaultTools (``+codemode``) is left out with a warning, not an error."""
    settings = store({"defaultTools": ["+codemode", "-write"]})
    assert tool_names(flags(), settings) == ["read", "bash", "edit"]
    assert capsys.readouterr().err == (
        "trio-session: warning: defaultTools: no tool is called 'codemode'\n"
    )


def test_default_tools_must_be_a_list_of_names() -> None:
    """A defaultTools that is not a list of names is refused, naming the file."""
    with pytest.raises(
        Exception,
        match=r"^defaultTools must be a list of tool names, or null, not 'read' \(in f\)$",
    ):
        SettingsLayer.from_mapping({"defaultTools": "read"}, source="f")


# -- the system prompt -----------------------------------------------------------------------


def test_prompt_names_the_tools_rules_and_cwd(tmp_path: Path) -> None:
    """The default prompt lists the selected tools, their rules, and the cwd last."""
    text = system_prompt(cwd=tmp_path, tools=["read", "bash", "edit", "write"])
    assert text.startswith("You are a coding assistant working inside trio-session")
    assert "<tools>\n- read: Show the contents of a file\n- bash: Run a bash command" in text
    assert "- Use bash for file work such as ls, rg and find." in text
    assert "- Use write only for a new file or for rewriting a whole one." in text
    assert text.endswith(f"<cwd>\n{tmp_path}\n</cwd>")
    with_ls = system_prompt(cwd=tmp_path, tools=["bash", "ls"])
    assert "Use bash for file work" not in with_ls
    assert "- ls: List a directory" in with_ls
    assert "<tools>\n(none)\n\nOther tools may also be available.\n</tools>" in system_prompt(
        cwd=tmp_path, tools=[]
    )


def test_context_files_from_the_agent_dir_and_the_ancestors(tmp_path: Path) -> None:
    """The agent dir's file first, then the ancestors' from the top down; in a directory
    AGENTS.override.md wins over AGENTS.md, which wins over CLAUDE.md."""
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "AGENTS.md").write_text("global")
    project = tmp_path / "project"
    work = project / "pkg"
    work.mkdir(parents=True)
    (project / "CLAUDE.md").write_text("project")
    (work / "AGENTS.md").write_text("plain")
    (work / "AGENTS.override.md").write_text("\ufeffoverride")
    found = context_files(work, agent)
    assert [(f.path, f.content) for f in found] == [
        (agent / "AGENTS.md", "global"),
        (project / "CLAUDE.md", "project"),
        (work / "AGENTS.override.md", "override"),
    ]
    text = system_prompt(cwd=work, tools=[], context=found)
    assert (
        "<project_context>\nInstructions and guidelines for this project:\n\n"
        f'<project_instructions path="{agent / "AGENTS.md"}">\nglobal\n</project_instructions>'
    ) in text


def test_system_files_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """.pi/SYSTEM.md replaces the preamble, tools and rules; APPEND_SYSTEM.md adds an
    addendum; the flags win over both; --no-context-files leaves AGENTS.md out."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "SYSTEM.md").write_text("Project prompt.")
    (tmp_path / ".pi" / "APPEND_SYSTEM.md").write_text("Also this.")
    (tmp_path / "AGENTS.md").write_text("Use tabs.")
    args = flags()
    coding_inputs(args, store())
    assert args.system_prompt == (
        "Project prompt.\n\n<addendum>\nAlso this.\n</addendum>\n\n<project_context>\n"
        "Instructions and guidelines for this project:\n\n"
        f'<project_instructions path="{tmp_path / "AGENTS.md"}">\nUse tabs.\n'
        f"</project_instructions>\n</project_context>\n\n<cwd>\n{tmp_path}\n</cwd>"
    )
    assert [t.name for t in args.tools] == ["read", "bash", "edit", "write"]
    (tmp_path / "more.md").write_text("From a file.")
    args = flags(
        system_prompt="Flag prompt.",
        append_system_prompt=["One.", "more.md"],
        no_context_files=True,
        no_tools=True,
    )
    coding_inputs(args, store())
    assert args.system_prompt == (
        "Flag prompt.\n\n<addendum>\nOne.\n\nFrom a file.\n</addendum>\n\n"
        f"<cwd>\n{tmp_path}\n</cwd>"
    )
    assert args.tools == ()


# -- through the command ---------------------------------------------------------------------


def tool_call_stream(call_id: str, name: str, arguments: dict[str, Any]) -> Any:
    """An OpenAI-compatible streamed answer that calls one tool."""
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return event_stream(
        [
            sse(
                {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
            ),
            sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            "data: [DONE]\n\n",
        ]
    )


async def test_print_mode_runs_the_tools(tmp_path: Path, nursery: trio.Nursery) -> None:
    """``-p`` declares pi's four tools, sends the prompt with AGENTS.md, runs a write the
    model asks for, and sends its result back."""
    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(
        tool_call_stream("call_1", "write", {"path": "notes/todo.txt", "content": "done\n"}),
        answer_stream("written"),
    )
    (tmp_path / "AGENTS.md").write_text("Be brief.")
    model = ["--base-url", f"{server.url}/v1", "--model", "openai/gpt-4o"]
    result = await trio.run_process(
        [sys.executable, "-m", "trio_session", "-p", "write it", "--no-session", *model],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=private_env(tmp_path) | {"OPENAI_API_KEY": "sk-test"},
        cwd=tmp_path,
    )
    assert (result.returncode, result.stderr, result.stdout) == (0, b"", b"written\n")
    assert (tmp_path / "notes" / "todo.txt").read_text() == "done\n"
    first, second = server.bodies
    assert [t["function"]["name"] for t in first["tools"]] == ["read", "bash", "edit", "write"]
    system = first["messages"][0]
    assert system["role"] == "system"
    assert "Be brief." in system["content"]
    assert system["content"].endswith(f"<cwd>\n{tmp_path}\n</cwd>")
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Successfully wrote to notes/todo.txt",
    }


async def test_rpc_takes_the_tool_flags(tmp_path: Path, nursery: trio.Nursery) -> None:
    """``rpc --tools read,ls`` declares those two; ``--no-tools`` declares none."""
    from .test_cli_pi_flags import prompted

    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(answer_stream("one"), answer_stream("two"))
    base = ["--base-url", f"{server.url}/v1", "--model", "openai/gpt-4o", "--no-session"]
    await prompted(tmp_path, *base, "--tools", "read,ls")
    await prompted(tmp_path, *base, "--no-tools")
    first, second = server.bodies
    assert [t["function"]["name"] for t in first["tools"]] == ["read", "ls"]
    assert "tools" not in second
