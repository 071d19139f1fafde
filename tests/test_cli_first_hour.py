"""A newcomer's first hour with ``trio-session``, as real subprocesses (issue 32).

Keys named as ``auth list`` prints them, a misspelt provider refused, a missing
``--settings`` file said, a bad flag answered with its subcommand's usage, a refused
connection said before the retries end, and pi's print mode (``-p``) and initial
prompt (``chat MESSAGE``) against a loopback server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio

from .http_server import ScriptedServer, closed_port, respond
from .test_cli import answer_stream, private_env, run_cli, run_env

OVERLOADED = {"error": {"message": "overloaded", "type": "server_error"}}
#: How the OpenAI adapter words that 503.
ERROR = "503 Service Unavailable: overloaded (server_error)"


def fast_settings(tmp_path: Path) -> Path:
    """Settings whose retries wait 10 ms, 20 ms, 40 ms."""
    path = tmp_path / "fast.json"
    path.write_text(json.dumps({"retry": {"baseDelayMs": 10}}))
    return path


# --- auth --------------------------------------------------------------------------------


def test_auth_remove_takes_the_index_auth_list_prints(tmp_path: Path) -> None:
    """``auth remove openai '#1'`` removes the key ``auth list`` shows as ``#1``."""
    for label, key in (
        ("a", "sk-proj-aaaaaaaaaaaaaaaa1111"),
        ("b", "sk-proj-bbbbbbbbbbbbbbbb2222"),
    ):
        added = run_env(tmp_path, "auth", "add", "openai", "--label", label, stdin=key + "\n")
        assert added.returncode == 0, added.stderr
    listed = run_env(tmp_path, "auth", "list")
    assert listed.stdout == "openai  #0  a  sk-…1111\nopenai  #1  b  sk-…2222\n"
    removed = run_env(tmp_path, "auth", "remove", "openai", "#1")
    assert (removed.returncode, removed.stdout, removed.stderr) == (
        0,
        "removed openai key b (sk-…2222)\n",
        "",
    )
    assert run_env(tmp_path, "auth", "list").stdout == "openai  #0  a  sk-…1111\n"


KNOWN = (
    "amazon-bedrock, anthropic, azure-openai-responses, cerebras, cloudflare-ai-gateway, "
    "cloudflare-workers-ai, deepseek, fireworks, gemini, github-copilot, google, "
    "google-vertex, groq, huggingface, kimi-coding, minimax, minimax-cn, mistral, "
    "moonshotai, moonshotai-cn, openai, openai-codex, opencode, opencode-go, openrouter, "
    "vercel-ai-gateway, xai, xiaomi, zai"
)


def test_auth_add_refuses_a_misspelt_provider(tmp_path: Path) -> None:
    """``auth add opneai`` is refused in one line naming the nearest provider; nothing is stored."""
    result = run_env(tmp_path, "auth", "add", "opneai", stdin="sk-proj-cccccccccccccccc3333\n")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"trio-session: unknown provider 'opneai'; did you mean 'openai'? (known: {KNOWN})\n"
    )
    far = run_env(tmp_path, "auth", "add", "zzzz", stdin="sk-proj-cccccccccccccccc3333\n")
    assert far.stderr == f"trio-session: unknown provider 'zzzz' (known: {KNOWN})\n"
    listed = run_env(tmp_path, "auth", "list")
    assert listed.stdout == "no credentials (add one with: trio-session auth add PROVIDER)\n"


# --- usage mistakes ------------------------------------------------------------------------


def test_a_missing_settings_file_is_an_error(tmp_path: Path) -> None:
    """``--settings`` naming no file stops the command with one line, exit 2."""
    for command in ("demo", "chat", "rpc"):
        result = run_env(tmp_path, command, "--settings", "nope.json")
        assert (result.returncode, result.stdout) == (2, ""), command
        assert result.stderr == (
            "trio-session: settings file nope.json does not exist (--settings); "
            "to start without it, add --ignore-broken-settings\n"
        )


def test_ignore_broken_settings_skips_a_missing_file(tmp_path: Path) -> None:
    """With ``--ignore-broken-settings`` a missing ``--settings`` file is a warning."""
    result = run_env(tmp_path, "demo", "--settings", "nope.json", "--ignore-broken-settings")
    assert result.stderr == "trio-session: warning: ignoring nope.json: it does not exist\n"


def test_a_bad_flag_shows_the_subcommands_usage(tmp_path: Path) -> None:
    """An unknown flag after a subcommand is refused with that subcommand's usage."""
    chat = run_env(tmp_path, "chat", "--bogus")
    assert chat.returncode == 2
    assert chat.stderr.startswith("usage: trio-session chat [-h] [-p] ")
    assert chat.stderr.endswith("trio-session chat: error: unrecognized arguments: --bogus\n")
    listing = run_env(tmp_path, "auth", "list", "--all")
    assert (listing.returncode, listing.stderr) == (
        2,
        "usage: trio-session auth list [-h]\n"
        "trio-session auth list: error: unrecognized arguments: --all\n",
    )


# --- a refused connection -------------------------------------------------------------------


async def read_until(stream: trio.abc.ReceiveStream, marker: bytes) -> bytes:
    """What ``stream`` says until ``marker`` is in it (a minute at most)."""
    seen = b""
    with trio.fail_after(60):
        while marker not in seen:
            chunk = await stream.receive_some()
            assert chunk, "the stream ended"
            seen += chunk
    return seen


async def test_a_refused_connection_is_said_before_the_retries(tmp_path: Path) -> None:
    """Nothing on the port: stderr says so at the first error, while the retries still wait."""
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"retry": {"baseDelayMs": 600_000}}))
    port = closed_port()
    args = ["chat", "--provider", "openai", "--base-url", f"http://127.0.0.1:{port}/v1"]
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_session", *args, "--no-save", "--settings", str(slow)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=private_env(tmp_path),
        cwd=tmp_path,
    )
    assert process.stdin is not None
    assert process.stderr is not None
    try:
        await process.stdin.send_all(b"hi\n")
        seen = await read_until(process.stderr, b"\n")
        assert seen.decode() == (
            f"trio-session: nothing listens on 127.0.0.1:{port} (connection refused); retrying\n"
        )
        assert process.returncode is None  # the first retry waits ten minutes
    finally:
        process.kill()
        await process.wait()


async def test_rpc_says_on_stderr_that_nothing_listens(tmp_path: Path) -> None:
    """``trio-session rpc``: the same note on stderr at the first retry; stdout keeps the
    protocol (the prompt's answer, then its events)."""
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"retry": {"baseDelayMs": 600_000}}))
    port = closed_port()
    args = ["rpc", "--provider", "openai", "--base-url", f"http://127.0.0.1:{port}/v1"]
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_session", *args, "--no-session", "--settings", str(slow)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**private_env(tmp_path), "OPENAI_API_KEY": "sk-test-0123456789"},
        cwd=tmp_path,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        await process.stdin.send_all(b'{"id":"1","type":"prompt","message":"hi"}\n')
        seen = await read_until(process.stderr, b"\n")
        assert seen.decode() == (
            f"trio-session: nothing listens on 127.0.0.1:{port} (connection refused); retrying\n"
        )
        out = await read_until(process.stdout, b'"auto_retry_start"')
        lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
        assert lines[0]["type"] == "response"
        assert all(isinstance(line, dict) for line in lines)
        assert process.returncode is None  # the first retry waits ten minutes
    finally:
        process.kill()
        await process.wait()


# --- print mode and the initial prompt -------------------------------------------------------


async def test_print_mode_prints_the_answer(tmp_path: Path, nursery: trio.Nursery) -> None:
    """``trio-session -p QUESTION``: the answer on stdout, exit 0; the retry on stderr."""
    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(respond(503, OVERLOADED), answer_stream("Four."))
    args = ["--provider", "openai", "--base-url", f"{server.url}/v1", "--no-session"]
    settings = ["--settings", str(fast_settings(tmp_path))]
    result = await run_cli(tmp_path, "-p", "What is 2+2?", *args, *settings)
    assert (result.returncode, result.stdout.decode()) == (0, "Four.\n")
    assert result.stderr.decode().splitlines() == [
        f"  ✗ error: {ERROR}",
        "  ↻ retrying (1/3) in 0.01s…",
        "  ✓ retry succeeded on attempt 1",
    ]
    asked = [m["content"] for m in server.bodies[-1]["messages"] if m["role"] == "user"]
    assert asked == [[{"type": "text", "text": "What is 2+2?"}]]  # parts, as pi sends them


async def test_print_mode_fails_after_the_retries(tmp_path: Path, nursery: trio.Nursery) -> None:
    """``chat -p``: retries exhausted, nothing on stdout, exit 1, the story and error on stderr."""
    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(*[respond(503, OVERLOADED)] * 4)
    args = ["chat", "-p", "hi", "--provider", "openai", "--base-url", f"{server.url}/v1"]
    settings = ["--settings", str(fast_settings(tmp_path))]
    result = await run_cli(tmp_path, *args, "--no-session", *settings)
    assert (result.returncode, result.stdout) == (1, b"")
    error = ERROR
    assert result.stderr.decode().splitlines() == [
        f"  ✗ error: {error}",
        "  ↻ retrying (1/3) in 0.01s…",
        f"  ✗ error: {error}",
        "  ↻ retrying (2/3) in 0.02s…",
        f"  ✗ error: {error}",
        "  ↻ retrying (3/3) in 0.04s…",
        f"  ✗ error: {error}",
        f"  ✗ retry failed after 3 attempts: {error}",
        f"trio-session: {error}",
    ]
    assert len(server.requests) == 4


async def test_print_mode_puts_piped_stdin_first(tmp_path: Path, nursery: trio.Nursery) -> None:
    """``git diff | trio-session -p "Review"``: stdin, a blank line, then the message."""
    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(answer_stream("Looks fine."))
    args = ["-p", "Review this", "--provider", "openai", "--base-url", f"{server.url}/v1"]
    result = await run_cli(tmp_path, *args, "--no-session", stdin=b"+ a line\n")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"Looks fine.\n", b"")
    asked = [m["content"] for m in server.bodies[-1]["messages"] if m["role"] == "user"]
    assert asked == [[{"type": "text", "text": "+ a line\n\nReview this"}]]


def test_print_mode_without_a_message_is_a_usage_error(tmp_path: Path) -> None:
    """``trio-session -p`` with nothing to send: one line, exit 2, no session file."""
    result = run_env(tmp_path, "-p", "--faux", "x.json")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == 'trio-session: -p needs a message: trio-session -p "QUESTION"\n'
    assert not (tmp_path / "data").exists()


async def test_chat_message_goes_first_then_the_lines(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """``chat MESSAGE`` on a pipe: MESSAGE is the first prompt, then stdin's lines."""
    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(answer_stream("One."), answer_stream("Two."))
    args = ["chat", "first", "--provider", "openai", "--base-url", f"{server.url}/v1"]
    result = await run_cli(tmp_path, *args, "--no-save", stdin=b"second\n")
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode().splitlines() == [
        "you: first",
        "assistant: One.",
        "you: second",
        "assistant: Two.",
    ]
