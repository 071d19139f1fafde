"""The ``trio-session`` command, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


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
        "↻ retrying (1/3) in 0s…",
        error,
        "↻ retrying (2/3) in 0s…",
        "✓ retry succeeded on attempt 2",
    ]
    assert any(line.startswith("assistant: Hello!") for line in lines)
    assert result.stderr == ""


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
    assert (events[-1]["type"], events[-1]["willRetry"]) == ("agent_end", False)


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
        f"trio-session: retry.maxRetries must be a non-negative integer, not -1 (in {path})"
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
    assert "↻ retrying (1/3) in 0s…" in result.stdout


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
        "  ↻ retrying (1/3) in 0s…",
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


def test_chat_continue_without_a_session(tmp_path: Path) -> None:
    """--continue with no earlier session is a clear error, exit 2."""
    result = run_env(tmp_path, "chat", "--provider", "faux", "--faux", "x.json", "--continue")
    assert result.returncode == 2
    assert result.stderr.startswith("trio-session: --continue: no earlier session in ")
