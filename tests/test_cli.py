"""The ``trio-session`` command, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_session._commands import open_provider
from trio_session.providers._http import HttpProvider

from .http_server import ScriptedServer, Step, event_stream, sse
from .rpc_helpers import RawLines
from .wording import json_error

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX FIFOs")


def trio_session(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -m trio_session ARGS`` and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "trio_session", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def fast_settings(tmp_path: Path) -> Path:
    """A settings file that shortens the backoff so the demo runs in well under a second."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"retry": {"baseDelayMs": 10}}))
    return path


def test_demo_prints_the_retry_story(fast_settings: Path) -> None:
    """The demo (no TTY) shows two failures, two retries, success, and exits 0."""
    result = trio_session("demo", "--settings", str(fast_settings))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    story = [line.strip() for line in lines if line.startswith("  ")]
    error = "✗ error: 503 Service Unavailable: the server is temporarily overloaded"
    assert story == [
        error,
        "↻ retrying (1/3) in 0.01s…",
        error,
        "↻ retrying (2/3) in 0.02s…",
        "✓ retry succeeded on attempt 2",
    ]
    assert any(line.startswith("assistant: Hello!") for line in lines)
    assert result.stderr == ""


def test_demo_reply_names_the_attempt_the_story_names() -> None:
    """The demo's answer says the attempt that succeeded as the retry story does (retry 2)."""
    from trio_session.cli._demo import DEMO_ANSWER

    assert "retry 2 got through" in DEMO_ANSWER
    assert "third" not in DEMO_ANSWER


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0.2, "0.2s"), (0.01, "0.01s"), (0.5, "0.5s"), (0, "0s"), (1.0, "1s"), (4.4, "4s")],
)
def test_line_mode_says_a_short_wait_as_it_is(seconds: float, said: str) -> None:
    """A 200 ms retry wait reads "in 0.2s" in the line mode, not "in 0s"."""
    import io

    from trio_session import AutoRetryStart
    from trio_session.cli._output import Printer, wait_text

    assert wait_text(seconds) == said
    out = io.StringIO()
    Printer(out).event(AutoRetryStart(1, 3, int(seconds * 1000), "503"))
    assert out.getvalue() == f"  ↻ retrying (1/3) in {said}…\n"


def test_demo_json_events(fast_settings: Path) -> None:
    """demo --json writes one JSON event per line with the reference's field names."""
    result = trio_session("demo", "--json", "--settings", str(fast_settings))
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    retry = [e for e in events if e["type"].startswith("auto_retry")]
    assert retry == [
        {
            "type": "auto_retry_start",
            "attempt": 1,
            "maxAttempts": 3,
            "delayMs": 10,
            "errorMessage": "503 Service Unavailable: the server is temporarily overloaded",
        },
        {
            "type": "auto_retry_start",
            "attempt": 2,
            "maxAttempts": 3,
            "delayMs": 20,
            "errorMessage": "503 Service Unavailable: the server is temporarily overloaded",
        },
        {"type": "auto_retry_end", "success": True, "attempt": 2},
    ]
    assert (events[-2]["type"], events[-2]["willRetry"]) == ("agent_end", False)
    assert events[-1] == {"type": "agent_settled", "aborted": False}  # R-54, as pi's json mode


def test_demo_with_retries_exhausted(tmp_path: Path) -> None:
    """With maxRetries 1 the demo reports the final failure and exits 1."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"retry": {"maxRetries": 1, "baseDelayMs": 10}}))
    result = trio_session("demo", "--settings", str(path))
    assert result.returncode == 1
    assert (
        "  ✗ retry failed after 1 attempts: "
        "503 Service Unavailable: the server is temporarily overloaded"
    ) in result.stdout.splitlines()


def test_broken_settings_file_is_a_clear_error(tmp_path: Path) -> None:
    """R-38: a bad settings file names file and key on stderr; exit 2, no traceback."""
    path = tmp_path / "settings.json"
    path.write_text('{"retry": {"maxRetries": -1}}')
    result = trio_session("demo", "--settings", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"trio-session: retry.maxRetries must be an integer from 0 to 100, not -1 (in {path})"
        "; to start without this file, add --ignore-broken-settings\n"
    )


def test_ignore_broken_settings_starts_with_the_rest(tmp_path: Path, fast_settings: Path) -> None:
    """R-38: --ignore-broken-settings warns about the bad file and uses the others."""
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = trio_session(
        "demo",
        "--settings",
        str(fast_settings),
        "--settings",
        str(broken),
        "--ignore-broken-settings",
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"trio-session: warning: ignoring {broken}: settings file ")
    assert "↻ retrying (1/3) in 0.01s…" in result.stdout


def test_invalid_json_settings(tmp_path: Path) -> None:
    """R-38: invalid JSON names the file, line and column."""
    path = tmp_path / "settings.json"
    path.write_text('{"retry": {"maxRetries": 3,}}')
    result = trio_session("demo", "--settings", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith(f"trio-session: settings file {path} is not valid JSON: ")
    assert "Traceback" not in result.stderr


def test_version_and_help() -> None:
    """--version prints the version; no command prints usage and exits 2."""
    import trio_session as pkg

    assert trio_session("--version").stdout == f"trio-session {pkg.__version__}\n"
    result = trio_session()
    assert result.returncode == 2
    assert "usage: trio-session" in result.stderr


def run_env(
    tmp_path: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m trio_session ARGS`` with private config/data dirs and no API keys."""
    import os

    environ = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    environ |= {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    environ |= env or {}
    return subprocess.run(
        [sys.executable, "-m", "trio_session", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environ,
        cwd=tmp_path,
    )


def test_auth_add_list_remove(tmp_path: Path) -> None:
    """auth: keys are added from stdin, listed redacted, removed; the file is 0600."""
    key = "sk-proj-abcdefghijklmnop"
    added = run_env(tmp_path, "auth", "add", "openai", "--label", "work", stdin=key + "\n")
    assert (added.returncode, added.stdout) == (0, "added openai key work (sk-…mnop)\n")
    listed = run_env(tmp_path, "auth", "list", env={"OPENAI_API_KEY": "sk-env-key-1234567890"})
    assert listed.stdout == ("openai  #0  work  sk-…mnop\nopenai  env  OPENAI_API_KEY  sk-…7890\n")
    assert key not in added.stdout + listed.stdout + added.stderr + listed.stderr
    store = tmp_path / "data" / "trio-session" / "credentials.sqlite3"
    assert store.stat().st_mode & 0o777 == 0o600
    removed = run_env(tmp_path, "auth", "remove", "openai", "0")
    assert removed.stdout == "removed openai key work (sk-…mnop)\n"
    missing = run_env(tmp_path, "auth", "remove", "openai", "nope")
    assert missing.returncode == 2
    assert (
        missing.stderr == "trio-session: openai has no stored key labelled 'nope' (labels: none)\n"
    )


def test_chat_line_mode_saves_and_resumes(tmp_path: Path) -> None:
    """chat without a TTY: one prompt per line, retries shown; --continue resumes it."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"error": "503 Service Unavailable"}, {"text": "Hello there"}]))
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps({"retry": {"baseDelayMs": 10}}))
    common = ["chat", "--provider", "faux", "--faux", str(script), "--settings", str(fast)]
    first = run_env(tmp_path, *common, stdin="hi\n")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        "you: hi",
        "  ✗ error: 503 Service Unavailable",
        "  ↻ retrying (1/3) in 0.01s…",
        "assistant: Hello there",
        "  ✓ retry succeeded on attempt 1",
    ]
    assert first.stderr.startswith("trio-session: session file ")
    script.write_text(json.dumps([{"text": "I remember"}]))
    second = run_env(tmp_path, *common, "--continue", stdin="again\n")
    assert second.returncode == 0, second.stderr
    assert "assistant: I remember" in second.stdout
    sessions = list((tmp_path / "data" / "trio-session" / "sessions").glob("*/*.jsonl"))
    assert len(sessions) == 1
    lines = sessions[0].read_text().splitlines()
    assert sum('"stopReason":"error"' in line for line in lines) == 1  # the retried 503


def test_a_chat_left_before_its_first_prompt_leaves_no_session_file(tmp_path: Path) -> None:
    """A chat given nothing to send (end of input at once) writes its file's header, as
    every chat does, and removes the file as it ends: pi writes none until there is a
    message, and ``--continue`` then finds the last real conversation, not the empty one."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Hello there"}, {"text": "I remember"}]))
    common = ["chat", "--provider", "faux", "--faux", str(script)]
    sessions = tmp_path / "data" / "trio-session" / "sessions"
    talked = run_env(tmp_path, *common, stdin="hi\n")
    assert talked.returncode == 0, talked.stderr
    [kept] = sessions.glob("*/*.jsonl")
    silent = run_env(tmp_path, *common, "--name", "never used", stdin="")
    assert silent.returncode == 0, silent.stderr
    assert silent.stderr.startswith("trio-session: session file ")  # it was made, then let go
    assert list(sessions.glob("*/*.jsonl")) == [kept]
    again = run_env(tmp_path, *common, "--continue", stdin="again\n")
    assert again.returncode == 0, again.stderr
    assert list(sessions.glob("*/*.jsonl")) == [kept]
    assert '"again"' in kept.read_text()


@pytest.mark.parametrize("flag", ["--continue", "--resume"])
def test_chat_continue_without_a_session(tmp_path: Path, flag: str) -> None:
    """--continue (or --resume without a file) with no earlier session is a clear error
    naming the flag given, exit 2."""
    result = run_env(tmp_path, "chat", "--provider", "faux", "--faux", "x.json", flag)
    assert result.returncode == 2
    assert result.stderr.startswith(f"trio-session: {flag}: no earlier session in ")


# --- keys off the command line (issue 11, defect 7) ------------------------------------------

KEY = "sk-proj-KEYFILEaaaaaaaaaaaaaaaaaaaa"


def answer_stream(text: str) -> Step:
    """An OpenAI-compatible streamed answer of one chunk."""
    delta = sse({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
    done = sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return event_stream([delta, done, "data: [DONE]\n\n"])


def private_env(tmp_path: Path) -> dict[str, str]:
    """The environment with no API key variables and private config and data dirs."""
    environ = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    return environ | {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
    }


async def run_cli(
    tmp_path: Path, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """``python -m trio_session ARGS`` as a trio subprocess, with :func:`private_env`."""
    return await trio.run_process(
        [sys.executable, "-m", "trio_session", *args],
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=private_env(tmp_path),
        cwd=tmp_path,
    )


def key_file(tmp_path: Path, text: str = KEY + "\n", mode: int = 0o600) -> Path:
    """A key file holding ``text``, with ``mode``."""
    path = tmp_path / "key.txt"
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A loopback OpenAI-compatible server, empty script."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


def chat_args(server: ScriptedServer, *extra: str) -> list[str]:
    """``chat`` against ``server`` with no session file."""
    return ["chat", "--provider", "openai", "--base-url", f"{server.url}/v1", "--no-save", *extra]


async def test_api_key_file_sends_its_first_line(tmp_path: Path, server: ScriptedServer) -> None:
    """Defect 7: --api-key-file PATH sends the key of its first line; nothing is printed."""
    server.script(answer_stream("Hi"))
    path = key_file(tmp_path, KEY + "\nsecond line is ignored\n")
    result = await run_cli(tmp_path, *chat_args(server, "--api-key-file", str(path)), stdin=b"hi\n")
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode().splitlines() == ["you: hi", "assistant: Hi"]
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"]


async def test_api_key_file_dash_takes_one_line_of_chat_stdin(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """Defect 7: ``--api-key-file -`` takes the first line of stdin; the next lines are prompts."""
    server.script(answer_stream("One"), answer_stream("Two"))
    stdin = f"{KEY}\nfirst\nsecond\n".encode()
    result = await run_cli(tmp_path, *chat_args(server, "--api-key-file", "-"), stdin=stdin)
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode().splitlines() == [
        "you: first",
        "assistant: One",
        "you: second",
        "assistant: Two",
    ]
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"] * 2
    assert KEY not in result.stdout.decode()


async def test_api_key_file_dash_leaves_the_rpc_commands(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """Defect 7: in ``rpc`` the key line is read alone; every command after it is served."""
    server.script(answer_stream("Hi"))
    args = ["rpc", "--provider", "openai", "--base-url", f"{server.url}/v1", "--api-key-file", "-"]
    async with rpc_process(tmp_path, *args) as (_, lines):
        await lines.send(KEY.encode() + b"\n")
        await lines.send({"id": "p", "type": "prompt", "message": "hi"})
        seen = [await lines.read()]
        while seen[-1]["type"] != "agent_settled":
            seen.append(await lines.read())
        await lines.send({"id": "s", "type": "get_state"})
        seen.append(await lines.read())
    responses = [(o["id"], o["success"]) for o in seen if o["type"] == "response"]
    assert responses == [("p", True), ("s", True)]
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"]


@asynccontextmanager
async def rpc_process(tmp_path: Path, *args: str) -> AsyncIterator[tuple[trio.Process, RawLines]]:
    """``trio-session ARGS`` with pipes on stdin and stdout; on leaving, stdin is closed
    and the process must exit 0 (it is killed if the block failed)."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_session", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=private_env(tmp_path),
        cwd=tmp_path,
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        yield process, RawLines(process.stdin, process.stdout)
        await process.stdin.aclose()
        assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_api_key_flag_warns_and_never_echoes_the_key(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """Defect 7: --api-key still works, with one stderr line saying why and what instead."""
    server.script(answer_stream("Hi"))
    result = await run_cli(tmp_path, *chat_args(server, "--api-key", KEY), stdin=b"hi\n")
    assert result.returncode == 0
    assert result.stderr.decode() == (
        "trio-session: warning: --api-key puts the key on the command line, where every user "
        "of this machine can read it (ps, /proc/PID/cmdline); use --api-key-file PATH, "
        "--api-key-file - (one line of stdin), OPENAI_API_KEY, or trio-session auth add "
        "instead\n"
    )
    assert KEY not in (result.stdout + result.stderr).decode()
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"]


@pytest.mark.parametrize(
    ("content", "which", "message"),
    [
        pytest.param(None, "{path}", "cannot read it: No such file or directory", id="missing"),
        pytest.param("\n" + KEY, "{path}", "no key (the first line is empty)", id="empty-line"),
        pytest.param(
            KEY + " trailing words\n",
            "{path}",
            "the first line holds spaces or control characters",
            id="spaces",
        ),
        pytest.param(None, "-", "no key (the first line is empty)", id="empty-stdin"),
    ],
)
async def test_api_key_file_mistakes_are_one_line(
    tmp_path: Path, content: str | None, which: str, message: str
) -> None:
    """Defect 7: a missing or unusable key file is a one-line error (exit 2) without its text."""
    if content is not None:
        key_file(tmp_path, content)
    which = which.format(path=tmp_path / "key.txt")
    args = ["chat", "--provider", "openai", "--no-save", "--api-key-file", which]
    result = await run_cli(tmp_path, *args)
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode() == f"trio-session: --api-key-file {which}: {message}\n"


async def test_api_key_file_readable_by_others_warns(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """Defect 7: a key file other users can read is used, with a warning to chmod it."""
    server.script(answer_stream("Hi"))
    path = key_file(tmp_path, mode=0o644)
    result = await run_cli(tmp_path, *chat_args(server, "--api-key-file", str(path)), stdin=b"hi\n")
    assert result.returncode == 0
    assert result.stderr.decode() == (
        f"trio-session: warning: other users can read {path} (mode 0644); chmod 600 {path}\n"
    )


def test_api_key_and_api_key_file_exclude_each_other(tmp_path: Path) -> None:
    """Defect 7: giving both is a usage error."""
    result = run_env(tmp_path, "chat", "--api-key", "x", "--api-key-file", "k")
    assert result.returncode == 2
    assert result.stderr.endswith(
        "trio-session chat: error: argument --api-key-file: not allowed with argument --api-key\n"
    )


# --- provider timeouts (issue 11, defect 10) -------------------------------------------------


def silent_stream() -> Step:
    """Headers, then nothing, forever."""
    return event_stream([], after="silence")


async def test_idle_timeout_flag_ends_a_silent_attempt(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """Defect 10: --idle-timeout 1 ends an attempt whose server sends headers, then silence."""
    server.script(silent_stream())
    settings = write_settings(tmp_path, {"retry": {"maxRetries": 0}})
    key = key_file(tmp_path)
    args = chat_args(server, "--api-key-file", str(key), "--settings", str(settings))
    result = await run_cli(tmp_path, *args, "--idle-timeout", "1", stdin=b"hi\n")
    assert result.returncode == 1
    error = "Connection error: timed out after 1s waiting for more of the response from "
    error += f"127.0.0.1:{server.port}"
    assert result.stdout.decode().splitlines() == [
        "you: hi",
        f"  ✗ error: {error}",
        f"  ✗ retry failed after 0 attempts: {error}",
    ]


async def test_idle_timeout_setting_applies_and_the_flag_wins(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """Defect 10: retry.provider.idleTimeoutMs is used without the flag; the flag wins over it."""
    server.script(silent_stream(), silent_stream())
    key = key_file(tmp_path)
    where = f"127.0.0.1:{server.port}"
    short = write_settings(
        tmp_path, {"retry": {"maxRetries": 0, "provider": {"idleTimeoutMs": 1000}}}
    )
    args = chat_args(server, "--api-key-file", str(key), "--settings", str(short))
    first = await run_cli(tmp_path, *args, stdin=b"hi\n")
    assert (
        f"timed out after 1s waiting for more of the response from {where}" in first.stdout.decode()
    )
    long = write_settings(
        tmp_path, {"retry": {"maxRetries": 0, "provider": {"idleTimeoutMs": 3_600_000}}}
    )
    args = chat_args(server, "--api-key-file", str(key), "--settings", str(long))
    second = await run_cli(tmp_path, *args, "--idle-timeout", "1.5", stdin=b"hi\n")
    assert (
        f"timed out after 1.5s waiting for more of the response from {where}"
        in second.stdout.decode()
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--timeout", "0", "must be a number of seconds from 1 to 86400, not '0'"),
        ("--timeout", "nan", "must be a number of seconds from 1 to 86400, not 'nan'"),
        ("--idle-timeout", "3601", "must be a number of seconds from 1 to 3600, not '3601'"),
        ("--idle-timeout", "soon", "must be a number of seconds from 1 to 3600, not 'soon'"),
    ],
)
def test_timeout_flags_out_of_range(tmp_path: Path, flag: str, value: str, message: str) -> None:
    """Defect 10: the timeout flags take the settings' ranges, in seconds."""
    result = run_env(tmp_path, "rpc", "--provider", "faux", "--faux", "x.json", flag, value)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"trio-session rpc: error: argument {flag}: {message}"


async def test_open_provider_builds_the_timeouts() -> None:
    """Defect 10: the idle timeout bounds every phase but connecting (10 s); the attempt
    deadline is passed on (600 s unless given)."""
    async with open_provider(
        "openai", base_url="http://127.0.0.1:9/v1", attempt_timeout=30.0, idle_timeout=5.0
    ) as (provider, _):
        assert isinstance(provider, HttpProvider)
        assert provider.timeout == httpx.Timeout(5.0, connect=10.0)
        assert provider.attempt_timeout == 30.0
    async with open_provider("anthropic", base_url="http://127.0.0.1:9") as (provider, _):
        assert isinstance(provider, HttpProvider)
        assert provider.timeout == httpx.Timeout(120.0, connect=10.0)
        assert provider.attempt_timeout == 600.0


# --- settings files that are not files (issue 11, defects 8, 9, 10) --------------------------


def write_settings(tmp_path: Path, data: Any, name: str = "settings.json") -> Path:
    """A settings file holding ``data`` as JSON."""
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


HINT = "; to start without this file, add --ignore-broken-settings\n"


@posix_only
def test_settings_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """Defect 10: --settings on a FIFO with no writer is an error, not a hang."""
    fifo = tmp_path / "settings.fifo"
    os.mkfifo(fifo)
    result = trio_session("demo", "--settings", str(fifo), timeout=30)
    assert result.returncode == 2
    assert result.stderr == (
        f"trio-session: cannot read settings file {fifo}: it is a named pipe, "
        f"not a regular file{HINT}"
    )


def limit_memory() -> None:  # pragma: no cover - runs in the child
    """Cap the child's address space at 2 GiB, so reading /dev/zero cannot eat the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_settings_dev_zero_is_refused_at_once() -> None:
    """Defect 10: --settings /dev/zero is an error, not an endless read."""
    result = subprocess.run(
        [sys.executable, "-m", "trio_session", "demo", "--settings", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
        preexec_fn=limit_memory,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "trio-session: cannot read settings file /dev/zero: it is a character device, "
        f"not a regular file{HINT}"
    )


def test_out_of_range_setting_stops_rpc_before_it_serves(tmp_path: Path) -> None:
    """Defect 8: baseDelayMs 10**400 is refused at start, so no prompt can crash on it later."""
    path = tmp_path / "settings.json"
    path.write_text('{"retry": {"baseDelayMs": 1' + "0" * 400 + "}}", encoding="utf-8")
    result = trio_session("rpc", "--provider", "faux", "--faux", "x.json", "--settings", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "trio-session: retry.baseDelayMs must be an integer from 0 to 3600000, "
        f"not 100000000000… (401 digits) (in {path}){HINT}"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            '{"retry": {"maxRetries": ' + "9" * 5000 + "}}",
            "retry.maxRetries must be an integer from 0 to 100, "
            "not 999999999999… (5000 digits) (in {path})",
            id="5000-digits",
        ),
        pytest.param(
            "[" * 100_000 + "]" * 100_000,
            "settings file {path} is nested too deeply to read",
            id="deep",
        ),
    ],
)
def test_malformed_settings_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    """Defect 9: a 5000-digit integer or deep nesting: one line naming the file, exit 2."""
    path = tmp_path / "settings.json"
    path.write_text(text, encoding="utf-8")
    result = trio_session("demo", "--settings", str(path))
    assert result.returncode == 2
    assert result.stderr == f"trio-session: {message.format(path=path)}{HINT}"


def test_continue_skips_a_file_nested_too_deeply(tmp_path: Path) -> None:
    """Defect 9: --continue passes over a .jsonl whose first line is nested 100 000 deep."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Hello"}]))
    common = ["chat", "--provider", "faux", "--faux", str(script)]
    sessions = tmp_path / "data" / "trio-session" / "sessions"
    sessions.mkdir(parents=True)
    deep = "[" * 100_000 + "]" * 100_000 + "\n"
    (sessions / "stray.jsonl").write_text(deep)  # not this directory's: never looked at
    alone = run_env(tmp_path, *common, "--continue", stdin="hi\n")
    assert (alone.returncode, alone.stdout) == (2, "")
    assert alone.stderr.startswith("trio-session: --continue: no earlier session in ")
    first = run_env(tmp_path, *common, stdin="hi\n")
    assert first.returncode == 0, first.stderr
    (directory,) = sessions.glob("--*")
    (directory / "9999-zz-newest.jsonl").write_text(deep)
    script.write_text(json.dumps([{"text": "I remember"}]))
    second = run_env(tmp_path, *common, "--continue", stdin="again\n")
    assert second.returncode == 0, second.stderr
    assert "assistant: I remember" in second.stdout
    assert "Traceback" not in second.stderr


async def test_failed_write_back_over_rpc_changes_nothing(tmp_path: Path) -> None:
    """Defect 13: set_auto_retry whose file write fails answers success:false, and
    autoRetryEnabled is still what it was."""
    settings = write_settings(tmp_path, {"retry": {"enabled": True}})
    script = write_settings(tmp_path, [], name="script.json")
    args = ["rpc", "--provider", "faux", "--faux", str(script), "--settings", str(settings)]
    async with rpc_process(tmp_path, *args) as (_, lines):
        await lines.send({"id": "1", "type": "get_state"})
        assert (await lines.read())["data"]["autoRetryEnabled"] is True
        settings.write_text('{"retry": {"enabled": true,}}')  # broken by an editor meanwhile
        await lines.send({"id": "2", "type": "set_auto_retry", "enabled": False})
        await lines.send({"id": "3", "type": "get_state"})
        failed, state = await lines.read(), await lines.read()
    assert failed == {
        "id": "2",
        "type": "response",
        "command": "set_auto_retry",
        "success": False,
        "error": f"SettingsError: settings file {settings} is not valid JSON: "
        + json_error('{"retry": {"enabled": true,}}'),
    }
    assert (state["id"], state["data"]["autoRetryEnabled"]) == ("3", True)


@pytest.mark.parametrize(
    "command",
    [
        ("rpc",),
        ("chat",),
        ("auth", "list"),
        ("demo",),
    ],
)
def test_commands_leave_no_resource_warning_under_dev_mode(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """Under ``-X dev -W error`` a command that opened the SQLite credential store closes
    it: Python 3.13 reports an unclosed database as a ResourceWarning at exit."""
    environ = private_env(tmp_path) | {"OPENAI_API_KEY": "sk-test-dev-mode-0123456789"}
    provider = ["--provider", "openai", "--base-url", "http://127.0.0.1:9/v1"]
    args = [*command, *provider] if command[0] in ("rpc", "chat") else list(command)
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", "-m", "trio_session", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environ,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr
    assert "Exception ignored" not in result.stderr
    if command[0] in ("rpc", "chat", "auth"):
        assert (tmp_path / "data" / "trio-session" / "credentials.sqlite3").exists()
