"""A new session file is written with its first message, so none is ever removed (issue 39).

Real ``trio-session rpc`` and ``chat`` processes: a session left before its first prompt
leaves no file to remove (F1, F2), and ``--continue`` finds the last conversation (F10).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import trio

from trio_session import AssistantMessage, TextContent, UserMessage
from trio_session.rpc import open_rpc_client
from trio_session.store._entries import SessionHeader, dump_line, encode_record
from trio_session.store._history import load_session
from trio_session.store._session_file import SessionFile

#: A bound on what must end by itself; a hang fails the test instead of CI.
HANG_GUARD = 60


def environ(tmp_path: Path) -> dict[str, str]:
    """This environment with private config and data directories and no API keys."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    return env | {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def faux(tmp_path: Path, name: str, *texts: str) -> str:
    """A faux script file of replies with ``texts``; its path."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps([{"text": t} for t in texts]), encoding="utf-8")
    return str(path)


def conversation(path: Path, *said: str, cwd: Path) -> bytes:
    """Write a session file at ``path`` holding ``said`` (prompts, each with a reply);
    its bytes."""
    with SessionFile.create(path, cwd=cwd) as file:
        for text in said:
            file.append_message_nowait(UserMessage(text, timestamp=1))
            file.append_message_nowait(
                AssistantMessage(content=[TextContent(f"re: {text}")], stop_reason="stop")
            )
    return path.read_bytes()


def header_only(path: Path, *, cwd: Path) -> None:
    """A file with a session header and nothing else, as an older version left for a
    session ended before its first prompt."""
    header = SessionHeader(id="old-empty", timestamp="2026-01-01T00:00:00.000Z", cwd=str(cwd))
    path.write_bytes(dump_line(encode_record(header)))


def user_texts(path: Path) -> list[str]:
    """The user messages of a session file, in order."""
    return [m.text for m in load_session(path).messages if isinstance(m, UserMessage)]


def newer(path: Path, seconds: int) -> None:
    """Make ``path``'s modification time ``seconds`` later than now."""
    stamp = int(path.stat().st_mtime) + seconds
    os.utime(path, (stamp, stamp))


def chat(tmp_path: Path, script: str, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``trio-session chat`` in line mode on a faux script, to its end."""
    return subprocess.run(
        [sys.executable, "-m", "trio_session", "chat", "--faux", script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
        env=environ(tmp_path),
        cwd=tmp_path,
    )


# -- F1: what another program put at the path is never removed ---------------------------------


async def test_rpc_left_unused_leaves_what_another_program_wrote_at_its_path(
    tmp_path: Path,
) -> None:
    """F1: while ``rpc --session NEW`` idles unprompted, another program appends a
    conversation to that path, then another renames a file over it: at exit, both times,
    the file and its content are as they left them (it was deleted)."""
    env = environ(tmp_path)
    args = ["--faux", faux(tmp_path, "script", "unused")]
    for how in ("append", "rename"):
        path = tmp_path / f"{how}.jsonl"
        with trio.fail_after(HANG_GUARD):
            async with open_rpc_client(args=[*args, "--session", str(path)], env=env) as client:
                assert (await client.get_state())["sessionFile"] == str(path)
                theirs = conversation(tmp_path / f"theirs-{how}.jsonl", "mine", cwd=tmp_path)
                if how == "append":
                    with path.open("ab") as file:
                        file.write(theirs)
                else:
                    os.replace(tmp_path / f"theirs-{how}.jsonl", path)
        assert client.process is not None
        assert (client.process.returncode, client.stderr) == (0, "")
        assert path.read_bytes() == theirs


# -- F2: a second process on the same path loses nothing --------------------------------------


async def test_a_second_rpc_on_the_same_new_path_keeps_every_prompt(tmp_path: Path) -> None:
    """F2: ``rpc --session P`` idles unprompted; a second ``rpc --session P`` starts and is
    prompted, the first exits, the second is prompted again: the file holds both prompts
    of the second (the first held P's lock and later unlinked it, losing them)."""
    env = environ(tmp_path)
    path = tmp_path / "shared.jsonl"
    idle_args = ["--faux", faux(tmp_path, "idle", "never"), "--session", str(path)]
    busy_args = ["--faux", faux(tmp_path, "busy", "r1", "r2"), "--session", str(path)]
    with trio.fail_after(HANG_GUARD):
        async with open_rpc_client(args=busy_args, env=env) as busy:
            async with open_rpc_client(args=idle_args, env=env) as idle:
                assert (await idle.get_state())["sessionFile"] == str(path)
                await busy.prompt("one")
                await busy.wait_for_idle()
            assert idle.process is not None
            assert (idle.process.returncode, idle.stderr) == (0, "")
            await busy.prompt("two")
            await busy.wait_for_idle()
    assert busy.stderr == ""
    assert user_texts(path) == ["one", "two"]
    assert [m.text for m in load_session(path).messages if isinstance(m, AssistantMessage)] == [
        "r1",
        "r2",
    ]


# -- F10: --continue finds the last conversation ----------------------------------------------


def test_continue_passes_by_a_header_only_file(tmp_path: Path) -> None:
    """F10: the newest file holds only a header (a killed empty session of an older
    version): ``chat --continue`` goes on with the last conversation instead, and leaves
    the header-only file alone."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    talked = sessions / "2026-01-01T00-00-00-000Z_talked.jsonl"
    conversation(talked, "first", cwd=tmp_path)
    empty = sessions / "2026-01-02T00-00-00-000Z_empty.jsonl"
    header_only(empty, cwd=tmp_path)
    newer(empty, 60)
    before = empty.read_bytes()
    go_on = ("--continue", "--session-dir", str(sessions))
    result = chat(tmp_path, faux(tmp_path, "s", "ok"), "second\n", *go_on)
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"trio-session: session file {talked}\n"
    assert user_texts(talked) == ["first", "second"]
    assert empty.read_bytes() == before


async def test_continue_works_while_another_process_idles_in_a_new_session(
    tmp_path: Path,
) -> None:
    """F10: while an ``rpc`` idles in a new session of the same directory, ``chat
    --continue`` goes on with the last conversation (it found the idle session's
    header-only file, locked, and exited 2)."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    talked = sessions / "2026-01-01T00-00-00-000Z_talked.jsonl"
    conversation(talked, "first", cwd=tmp_path)
    os.utime(talked, (1_000_000_000, 1_000_000_000))
    args = ["--faux", faux(tmp_path, "idle", "never"), "--session-dir", str(sessions)]
    with trio.fail_after(HANG_GUARD):
        async with open_rpc_client(args=args, env=environ(tmp_path), cwd=str(tmp_path)) as idle:
            assert Path((await idle.get_state())["sessionFile"]).parent == sessions
            go_on = ("--continue", "--session-dir", str(sessions))
            script = faux(tmp_path, "s", "ok")
            result = await trio.to_thread.run_sync(
                partial(chat, tmp_path, script, "second\n", *go_on)
            )
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"trio-session: session file {talked}\n"
    assert user_texts(talked) == ["first", "second"]
    assert list(sessions.iterdir()) == [talked]


async def test_continue_passes_by_a_conversation_open_in_another_process(
    tmp_path: Path,
) -> None:
    """F10: the newest conversation is open in another process: ``chat --continue`` says
    so and goes on with the one before it, instead of exiting 2."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    older = sessions / "2026-01-01T00-00-00-000Z_older.jsonl"
    conversation(older, "first", cwd=tmp_path)
    os.utime(older, (1_000_000_000, 1_000_000_000))
    busy = sessions / "2026-01-02T00-00-00-000Z_busy.jsonl"
    before = conversation(busy, "elsewhere", cwd=tmp_path)
    args = ["--faux", faux(tmp_path, "idle", "never"), "--session", str(busy)]
    with trio.fail_after(HANG_GUARD):
        async with open_rpc_client(args=args, env=environ(tmp_path), cwd=str(tmp_path)) as idle:
            assert (await idle.get_state())["sessionFile"] == str(busy)
            go_on = ("--continue", "--session-dir", str(sessions))
            script = faux(tmp_path, "s", "ok")
            result = await trio.to_thread.run_sync(
                partial(chat, tmp_path, script, "second\n", *go_on)
            )
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        f"trio-session: warning: --continue: {busy} is open in another process; "
        f"continuing {older}\n"
        f"trio-session: session file {older}\n"
    )
    assert user_texts(older) == ["first", "second"]
    assert busy.read_bytes() == before
