"""Nothing lost, nothing hung — the ``trio-session chat`` process (issue 11).

Real subprocesses: a file-size limit, signals while a reply streams, bytes that are
not UTF-8 on stdin, and session files a crash or a careless tool left behind.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_session import AssistantMessage, UserMessage
from trio_session.store._entries import SessionHeader, dump_line, encode_record
from trio_session.store._history import load_session
from trio_session.store._session_file import SessionFile

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and limits")

#: A bound on waits that must end by themselves; a hang fails the test instead of CI.
HANG_GUARD = 60


def environ(tmp_path: Path) -> dict[str, str]:
    """This environment with private config and data directories and no API keys."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    return env | {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def faux(tmp_path: Path, *replies: dict[str, Any]) -> Path:
    """A faux script file."""
    path = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(list(replies)))
    return path


def chat_command(script: Path, *args: str) -> list[str]:
    """``python -m trio_session chat`` on a faux script."""
    return [sys.executable, "-m", "trio_session", "chat", "--faux", str(script), *args]


def run_chat(
    tmp_path: Path, script: Path, session: Path, stdin: bytes, **options: Any
) -> subprocess.CompletedProcess[bytes]:
    """``chat --resume SESSION`` on a faux script, with ``stdin``, to the end."""
    return subprocess.run(
        [*chat_command(script), "--resume", str(session)],
        input=stdin,
        capture_output=True,
        timeout=HANG_GUARD,
        check=False,
        env=environ(tmp_path),
        cwd=tmp_path,
        **options,
    )


def texts(path: Path) -> list[tuple[str, str, str]]:
    """(role, stop reason, text) of every message in a session file."""
    out: list[tuple[str, str, str]] = []
    for message in load_session(path).messages:
        reason = message.stop_reason if isinstance(message, AssistantMessage) else ""
        out.append((message.role, reason, message.text))
    return out


def _new_session_file(tmp_path: Path) -> Path:
    """An empty session file (header only), for ``--resume``."""
    path = tmp_path / "s.jsonl"
    header = SessionHeader(id="s", timestamp="2026-01-01T00:00:00.000Z", cwd=str(tmp_path))
    path.write_bytes(dump_line(encode_record(header)))
    return path


# -- defect 1: a failed write under the CLI --------------------------------------------------


@posix_only
def test_chat_stops_with_a_clear_message_when_the_session_file_cannot_grow(
    tmp_path: Path,
) -> None:
    """Defect 1: under ``ulimit -f`` the first exchange fits, the second prompt cannot be
    saved: chat says so on stderr and exits 1 at once; the file is intact and resumes."""
    script = faux(tmp_path, {"text": "Hello"}, {"text": "never asked"})
    session = _new_session_file(tmp_path)
    limit = 2048  # header and the first exchange fit; a 3 000-character prompt does not

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    stdin = b"hi\n" + b"x" * 3000 + b"\nnever read\n"
    result = run_chat(tmp_path, script, session, stdin, preexec_fn=small_files)
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert stderr.splitlines()[-1] == (
        f"trio-session: cannot write session file {session}: File too large; stopping"
    )
    assert result.stdout.decode().splitlines() == [
        "you: hi",
        "assistant: Hello",
        f"  ✗ not saved: cannot write session file {session}: File too large",
    ]
    assert texts(session) == [("user", "", "hi"), ("assistant", "stop", "Hello")]
    assert load_session(session).warnings == ()
    SessionFile.resume(session).close()


# -- defect 2: the prompt survives signals, and SIGTERM/SIGHUP are handled ---------------------

HANGING_REPLY = {"chunks": ["partial ", "answer"], "chunkDelay": 3600}


async def _start_chat_and_wait_for_the_stream(
    tmp_path: Path, nursery: trio.Nursery, session: Path
) -> trio.Process:
    """A chat process whose reply has streamed its first chunk and then stalls."""
    script = faux(tmp_path, HANGING_REPLY)
    command = [*chat_command(script), "--resume", str(session)]
    process = await trio.lowlevel.open_process(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ(tmp_path),
        cwd=tmp_path,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    await process.stdin.send_all(b"keep this question\n")
    seen = b""
    while b"assistant: partial" not in seen:
        chunk = await process.stdout.receive_some()
        assert chunk, f"chat ended early: {seen!r}"
        seen += chunk
    return process


@posix_only
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_sigterm_and_sighup_abort_flush_and_exit(
    tmp_path: Path, nursery: trio.Nursery, signum: signal.Signals
) -> None:
    """Defect 2: SIGTERM/SIGHUP while a reply streams: the prompt and the partial reply
    (aborted) are saved, chat says why it stopped, and exits 128 + the signal."""
    session = _new_session_file(tmp_path)
    with trio.fail_after(HANG_GUARD):
        process = await _start_chat_and_wait_for_the_stream(tmp_path, nursery, session)
        process.send_signal(signum)
        assert process.stderr is not None
        stderr = b""
        while chunk := await process.stderr.receive_some():
            stderr += chunk
        status = await process.wait()
    assert status == 128 + signum
    assert stderr.decode().splitlines()[-1] == (
        f"trio-session: stopped by {signum.name}; the session is saved"
    )
    assert texts(session) == [
        ("user", "", "keep this question"),
        ("assistant", "aborted", "partial "),
    ]
    assert load_session(session).warnings == ()


@posix_only
async def test_sigkill_while_a_reply_streams_keeps_the_prompt(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """Defect 2: SIGKILL after the request went out: the prompt is already on disk."""
    session = _new_session_file(tmp_path)
    with trio.fail_after(HANG_GUARD):
        process = await _start_chat_and_wait_for_the_stream(tmp_path, nursery, session)
        process.kill()
        assert await process.wait() == -signal.SIGKILL
    assert texts(session) == [("user", "", "keep this question")]
    SessionFile.resume(session).close()


class Tmux:
    """A private tmux server (``-L``) with one 100×30 window running ``command``."""

    def __init__(self, command: str) -> None:
        self.socket = f"trio-session-durability-{uuid.uuid4().hex[:8]}"
        self.run("new-session", "-d", "-x", "100", "-y", "30", command)

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return done.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p")

    def kill(self) -> None:
        subprocess.run(
            ["tmux", "-L", self.socket, "kill-server"], check=False, capture_output=True, timeout=30
        )


@pytest.fixture
def tmux_factory() -> Iterator[list[Tmux]]:
    made: list[Tmux] = []
    yield made
    for tmux in made:
        tmux.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail after :data:`HANG_GUARD` seconds."""
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@posix_only
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_closing_the_terminal_saves_the_conversation(
    tmp_path: Path, tmux_factory: list[Tmux]
) -> None:
    """Defect 2: the terminal UI, its terminal closed (SIGHUP) while a reply streams:
    the prompt and the aborted partial reply are in the session file."""
    session = _new_session_file(tmp_path)
    script = faux(tmp_path, HANGING_REPLY)
    pidfile = tmp_path / "pid"
    env = " ".join(f"{k}={v}" for k, v in environ(tmp_path).items() if k.startswith("XDG_"))
    command = " ".join(chat_command(script, "--resume", str(session)))
    tmux = Tmux(f"cd {tmp_path} && echo $$ > {pidfile} && exec env {env} {command}")
    tmux_factory.append(tmux)
    wait_for(lambda: ">" in tmux.screen().splitlines(), "the input line")
    tmux.run("send-keys", "keep this question", "Enter")
    wait_for(lambda: "partial" in tmux.screen(), "the reply to stream")
    pid = int(pidfile.read_text())
    tmux.kill()  # the terminal goes away: the program gets SIGHUP
    wait_for(lambda: not _alive(pid), "chat to exit")
    assert texts(session) == [
        ("user", "", "keep this question"),
        ("assistant", "aborted", "partial "),
    ]


# -- defect 3: bytes that are not UTF-8 on stdin ---------------------------------------------


def test_invalid_utf8_on_stdin_is_replaced_with_a_warning(tmp_path: Path) -> None:
    """Defect 3: a line with a byte that is not UTF-8 is sent with U+FFFD in its place,
    with a warning naming the line; the next line works too."""
    script = faux(tmp_path, {"text": "one"}, {"text": "two"})
    session = _new_session_file(tmp_path)
    result = run_chat(tmp_path, script, session, b"caf\xe9 au lait\nplain\n")
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines()[-1] == (
        "trio-session: warning: input line 1 is not valid UTF-8; "
        "the invalid bytes were replaced with U+FFFD"
    )
    assert [t for t in texts(session) if t[0] == "user"] == [
        ("user", "", "caf\ufffd au lait"),
        ("user", "", "plain"),
    ]


# -- defects 9 and 15: files a crash or a tool left behind resume, and say what they skipped ---


def test_resume_shows_what_the_loader_skipped(tmp_path: Path) -> None:
    """Defects 9, 15: --resume on a file with a duplicated line and a line nested too deep
    starts, prints each load warning, and gives the model each message once."""
    session = tmp_path / "s.jsonl"
    with SessionFile.create(session, cwd=str(tmp_path)) as history:
        history.append_message_nowait(UserMessage("first", timestamp=1))
        history.append_message_nowait(AssistantMessage(stop_reason="stop", timestamp=2))
    lines = session.read_text().splitlines()
    deep = "[" * 50_000 + "]" * 50_000
    session.write_text("\n".join([*lines, lines[1], deep]) + "\n")
    first_id = json.loads(lines[1])["id"]

    script = faux(tmp_path, {"text": "ok"})
    result = run_chat(tmp_path, script, session, b"second\n")
    stderr = result.stderr.decode().splitlines()
    assert result.returncode == 0, result.stderr
    assert stderr[:2] == [
        f"trio-session: warning: {session}:4: entry id {first_id} repeats the one on line 2; "
        "skipped (a duplicated line)",
        f"trio-session: warning: {session}:5: not valid JSON (nested too deeply); skipped",
    ]
    assert [t[2] for t in texts(session) if t[0] == "user"] == ["first", "second"]
