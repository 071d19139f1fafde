"""pi's command-line flags on ``trio-session rpc`` and ``chat``, as real subprocesses.

pi's clients start ``pi --mode rpc`` with pi's session and model flags; each is taken
here with pi's meaning (docs/cli.md), and no long flag is read as a prefix of another.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from trio_session.rpc._client import open_rpc_client

from .http_server import ScriptedServer
from .test_cli import answer_stream, private_env

FAUX = [{"text": "first answer"}, {"text": "second answer"}, {"text": "third answer"}]


def run(tmp_path: Path, *args: str, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``python -m trio_session ARGS`` in ``tmp_path`` fed ``commands``; its JSON lines.

    It must exit 0 with nothing on stderr.
    """
    result = subprocess.run(
        [sys.executable, "-m", "trio_session", *args],
        input="".join(json.dumps(c) + "\n" for c in commands),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=private_env(tmp_path),
        cwd=tmp_path,
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def faux(tmp_path: Path) -> list[str]:
    """``--faux SCRIPT`` of three answers."""
    path = tmp_path / "faux.json"
    path.write_text(json.dumps(FAUX))
    return ["--faux", str(path)]


def state(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The data of the ``get_state`` answer among ``lines``."""
    (answer,) = [line for line in lines if line.get("command") == "get_state"]
    data: dict[str, Any] = answer["data"]
    return data


GET_STATE = [{"type": "get_state"}]


async def prompted(tmp_path: Path, *args: str) -> dict[str, Any]:
    """``rpc ARGS`` prompted once, through pi's protocol; its state after the answer."""
    with trio.fail_after(60):
        async with open_rpc_client(
            args=list(args), env=private_env(tmp_path), cwd=str(tmp_path)
        ) as client:
            with client.events() as events:
                await client.prompt("hello")
                await events.next("agent_end")
            data: dict[str, Any] = await client.get_state()
    assert client.stderr == ""
    return data


def test_mode_rpc_is_accepted_not_read_as_model(tmp_path: Path) -> None:
    """``rpc --mode rpc`` (pi's clients pass it) is pi's mode flag, not ``--model rpc``."""
    lines = run(
        tmp_path, "rpc", "--mode", "rpc", *faux(tmp_path), "--no-session", commands=GET_STATE
    )
    assert state(lines)["model"]["id"] == "faux-model"


def test_no_long_flag_is_taken_by_its_prefix(tmp_path: Path) -> None:
    """``--mod rpc`` is an unknown flag (exit 2), not a prefix of --model or --mode."""
    result = subprocess.run(
        [sys.executable, "-m", "trio_session", "rpc", "--mod", "rpc"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=private_env(tmp_path),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert (
        result.stderr.splitlines()[-1]
        == "trio-session rpc: error: unrecognized arguments: --mod rpc"
    )


def test_model_provider_id_and_thinking_suffix(tmp_path: Path) -> None:
    """``--model openai/gpt-5:low`` names the provider, the model and the thinking level;
    ``--thinking high`` wins over the suffix (pi's docs/cli.md)."""
    base = ["rpc", "--base-url", "http://127.0.0.1:9/v1", "--no-session"]
    suffix = state(run(tmp_path, *base, "--model", "openai/gpt-5:low", commands=GET_STATE))
    assert (suffix["model"]["provider"], suffix["model"]["id"]) == ("openai", "gpt-5")
    assert suffix["thinkingLevel"] == "low"
    both = ["--model", "openai/gpt-5:low", "--thinking", "high"]
    assert state(run(tmp_path, *base, *both, commands=GET_STATE))["thinkingLevel"] == "high"


def test_name_offline_and_no_session(tmp_path: Path) -> None:
    """``--name`` names the session, ``--offline`` is accepted, ``--no-session`` keeps no file."""
    args = ["rpc", *faux(tmp_path), "--no-session", "--offline", "--name", "  my  work "]
    data = state(run(tmp_path, *args, commands=GET_STATE))
    assert data["sessionName"] == "my work"
    assert "sessionFile" not in data


async def test_continue_session_id_and_fork(tmp_path: Path) -> None:
    """``--continue``, ``-c``, ``--resume`` and ``--session ID-PREFIX`` open the session kept
    in ``--session-dir``; ``--fork ID`` opens a new file holding the same conversation."""
    sessions = tmp_path / "sessions"
    where = ["--session-dir", str(sessions)]
    first = Path((await prompted(tmp_path, *faux(tmp_path), *where))["sessionFile"])
    assert first.parent == sessions
    session_id = first.stem.split("_", 1)[1]
    for flag in (["--continue"], ["-c"], ["--session", session_id[:8]], ["--resume"]):
        data = state(run(tmp_path, "rpc", *faux(tmp_path), *where, *flag, commands=GET_STATE))
        assert (data["sessionFile"], data["messageCount"]) == (str(first), 2), flag
    forked = state(
        run(tmp_path, "rpc", *faux(tmp_path), *where, "--fork", session_id, commands=GET_STATE)
    )
    assert forked["sessionFile"] != str(first)
    assert Path(forked["sessionFile"]).parent == sessions
    assert forked["messageCount"] == 2
    header = json.loads((await trio.Path(forked["sessionFile"]).read_text()).splitlines()[0])
    assert header["parentSession"] == str(first)


def test_fork_refuses_company_and_unknown_ids(tmp_path: Path) -> None:
    """``--fork`` with ``--continue`` is refused as pi refuses it; an id that matches no
    session is one line, exit 2."""
    for args, message in (
        (["--fork", "abc", "--continue"], "--fork cannot be combined with --continue"),
        (["--session", "nosuchid"], "No session found matching 'nosuchid'"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "trio_session", "rpc", *faux(tmp_path), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=private_env(tmp_path),
            cwd=tmp_path,
        )
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == f"trio-session: {message}\n"


async def test_system_prompt_file_reaches_the_model(tmp_path: Path, nursery: trio.Nursery) -> None:
    """``rpc --system-prompt FILE`` sends the file's text as the system prompt, in place
    of the coding assistant's, the working directory after it as pi's does; ``chat``
    takes text too, with ``--no-session`` for our ``--no-save``."""
    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(answer_stream("one"), answer_stream("two"))
    prompt_file = tmp_path / "system.md"
    prompt_file.write_text("You are terse.")
    base = ["--base-url", f"{server.url}/v1", "--model", "openai/gpt-4o", "--no-session"]
    await prompted(tmp_path, *base, "--system-prompt", str(prompt_file))
    chat = await trio.run_process(
        [sys.executable, "-m", "trio_session", "chat", *base, "--system-prompt", "Be kind."],
        stdin=b"hi\n",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=private_env(tmp_path),
        cwd=tmp_path,
    )
    assert (chat.returncode, chat.stderr) == (0, b"")
    systems = [body["messages"][0] for body in server.bodies]
    cwd = f"\n\n<cwd>\n{tmp_path}\n</cwd>"
    assert systems == [
        {"role": "system", "content": "You are terse." + cwd},
        {"role": "system", "content": "Be kind." + cwd},
    ]
