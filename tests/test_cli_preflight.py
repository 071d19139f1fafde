"""``trio-session chat|rpc`` pre-flight, run as real subprocesses.

A base URL that is not an absolute http(s) URL with a host stops the command before any
session opens: exit 2, one line on stderr, no traceback, never a key. A missing key (where
the provider's own service needs one) does not: as in pi, the command starts and the
prompt that needs the key is refused, in pi's words. A custom endpoint (a local server)
needs no key; ``--provider gemini`` works end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from .http_server import ScriptedServer, event_stream, sse

KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "GEMINI_BASE_URL",
    "PI_CODING_AGENT_DIR",
)
KEY = "AIzaSyPreflightSecret0123456789abcd"


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment without keys or base URLs, with private config and data dirs."""
    environ = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    return environ | {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        **extra,
    }


def run(
    tmp_path: Path, *args: str, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m trio_session ARGS`` in ``tmp_path`` with :func:`clean_env`."""
    return subprocess.run(
        [sys.executable, "-m", "trio_session", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=clean_env(tmp_path, **env),
        cwd=tmp_path,
    )


async def run_async(
    tmp_path: Path, *args: str, stdin: bytes = b"", **env: str
) -> subprocess.CompletedProcess[bytes]:
    """The same, as a trio subprocess (for tests with a server in this process)."""
    return await trio.run_process(
        [sys.executable, "-m", "trio_session", *args],
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=clean_env(tmp_path, **env),
        cwd=tmp_path,
    )


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], expected: str) -> None:
    """Exit 2, nothing on stdout, exactly ``trio-session: <expected>`` on stderr."""
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"trio-session: {expected}\n"
    assert "Traceback" not in result.stderr


def no_key(provider: str, ways: str) -> str:
    """pi's words for a prompt whose provider has no key, then ours on how to give one."""
    return f"No API key found for {provider}.\n\nTo give one: {ways}."


OPENAI_WAYS = "set OPENAI_API_KEY, run 'trio-session auth add openai' or pass --api-key-file PATH"


def rpc_lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    """The JSON lines ``rpc`` wrote."""
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_rpc_without_a_key_starts_and_refuses_the_prompt_as_pi(tmp_path: Path) -> None:
    """rpc with no key starts and answers get_state; the prompt alone is refused, with an
    error response in pi's words (pi 1.6.0's formatNoApiKeyFoundMessage), and no run."""
    commands = [
        {"id": "s", "type": "get_state"},
        {"id": "p", "type": "prompt", "message": "hi"},
        {"id": "m", "type": "get_messages"},
    ]
    result = run(
        tmp_path,
        "rpc",
        "--provider",
        "openai",
        stdin="".join(json.dumps(c) + "\n" for c in commands),
    )
    assert (result.returncode, result.stderr) == (0, "")
    state, prompt, messages = rpc_lines(result)
    assert (state["id"], state["success"]) == ("s", True)
    assert prompt == {
        "id": "p",
        "type": "response",
        "command": "prompt",
        "success": False,
        "error": no_key("openai", OPENAI_WAYS),
    }
    assert messages["data"] == {"messages": []}


def test_chat_without_a_key_says_so_at_the_prompt(tmp_path: Path) -> None:
    """chat on a pipe with no key starts, and the line it cannot send is refused on stderr
    in pi's words; exit 1, nothing on stdout."""
    result = run(tmp_path, "chat", "--provider", "openai", "--no-session", stdin="hi\n")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"trio-session: {no_key('openai', OPENAI_WAYS)}\n"


def test_no_key_for_gemini_names_both_variables(tmp_path: Path) -> None:
    """gemini's key may be GEMINI_API_KEY or GOOGLE_API_KEY; both are named."""
    result = run(tmp_path, "chat", "--provider", "gemini", "--no-save", stdin="hi\n")
    ways = (
        "set GEMINI_API_KEY or GOOGLE_API_KEY, run 'trio-session auth add gemini' or pass "
        "--api-key-file PATH"
    )
    assert result.stderr == f"trio-session: {no_key('gemini', ways)}\n"


def test_no_key_with_pi_agent_dir_names_auth_json(tmp_path: Path) -> None:
    """With pi's agent directory, its auth.json is one more way."""
    agent = tmp_path / "agent"
    agent.mkdir()
    prompt = json.dumps({"type": "prompt", "message": "hi"}) + "\n"
    result = run(
        tmp_path, "rpc", "--agent-dir", str(agent), "--provider", "anthropic", stdin=prompt
    )
    ways = (
        "set ANTHROPIC_API_KEY, run 'trio-session auth add anthropic', pass --api-key-file "
        f"PATH or add it to {agent / 'auth.json'}"
    )
    (answer,) = rpc_lines(result)
    assert answer["error"] == no_key("anthropic", ways)


def test_a_stored_key_passes_the_preflight(tmp_path: Path) -> None:
    """A key from 'trio-session auth add' counts: the pre-flight lets rpc start, and it
    ends at the end of its (empty) input with 0."""
    added = run(tmp_path, "auth", "add", "anthropic", stdin=KEY + "\n")
    assert added.returncode == 0, added.stderr
    result = run(tmp_path, "rpc", "--provider", "anthropic", "--no-session")
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://127.0.0.1/v1", "is not an absolute http:// or https:// URL"),
        ("127.0.0.1:8080/v1", "is not an absolute http:// or https:// URL"),
        ("http:///v1", "has no host"),
        ("http://[::1/v1", "is not a URL"),
    ],
)
def test_a_malformed_base_url(tmp_path: Path, url: str, problem: str) -> None:
    """--base-url must be an absolute http(s) URL with a host; the key is never printed."""
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    key_file.chmod(0o600)
    result = run(
        tmp_path, "chat", "--provider", "openai", "--base-url", url, "--api-key-file", str(key_file)
    )
    assert_one_line_exit_2(
        result,
        f"--base-url {url!r} {problem}; give the API root, like https://api.example.com/v1 "
        "or http://127.0.0.1:8080/v1",
    )
    assert KEY not in result.stderr


def test_a_malformed_base_url_variable(tmp_path: Path) -> None:
    """OPENAI_BASE_URL is checked the same way, and named."""
    result = run(tmp_path, "rpc", "--provider", "openai", OPENAI_BASE_URL="localhost:8080")
    assert_one_line_exit_2(
        result,
        "OPENAI_BASE_URL='localhost:8080' is not an absolute http:// or https:// URL; give "
        "the API root, like https://api.example.com/v1 or http://127.0.0.1:8080/v1",
    )


def test_faux_needs_no_key(tmp_path: Path) -> None:
    """--provider faux has no key and no endpoint to check."""
    script = tmp_path / "s.json"
    script.write_text('[{"text": "hi"}]')
    result = run(tmp_path, "chat", "--provider", "faux", "--faux", str(script), "--no-save")
    assert result.returncode == 0, result.stderr


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A loopback server, empty script."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


async def test_a_local_server_from_openai_base_url_needs_no_key(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """OPENAI_BASE_URL at a loopback server, no key anywhere: the chat runs, no auth sent."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "local"}, "finish_reason": "stop"}]}
    server.script(event_stream([sse(chunk), "data: [DONE]\n\n"]))
    result = await run_async(
        tmp_path,
        "chat",
        "--provider",
        "openai",
        "--no-save",
        stdin=b"hi\n",
        OPENAI_BASE_URL=f"{server.url}/v1",
    )
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode().splitlines() == ["you: hi", "assistant: local"]
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert "authorization" not in request.headers


async def test_gemini_chat_end_to_end(tmp_path: Path, server: ScriptedServer) -> None:
    """--provider gemini with GOOGLE_API_KEY at GEMINI_BASE_URL: the key goes in the
    x-goog-api-key header (never the URL) and the answer is printed."""
    candidate = {"content": {"role": "model", "parts": [{"text": "Hallo"}]}, "finishReason": "STOP"}
    server.script(event_stream([sse({"candidates": [candidate]})]))
    result = await run_async(
        tmp_path,
        "chat",
        "--provider",
        "gemini",
        "--no-save",
        stdin=b"hi\n",
        GOOGLE_API_KEY=KEY,
        GEMINI_BASE_URL=f"{server.url}/v1beta",
    )
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode().splitlines() == ["you: hi", "assistant: Hallo"]
    [request] = server.requests
    assert request.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == KEY
