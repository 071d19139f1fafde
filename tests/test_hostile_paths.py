"""Paths that are not regular files, or too large, are refused at once; what we create is private.

Issue 25: a session path that is a named pipe hung ``trio-session rpc`` for good, and
``/dev/zero`` made it read without end; neither EOF nor SIGTERM ended it. An exported
page was 0644, and the data directories above a session's were 0755.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_session import FauxProvider, FauxReply, Model, UserMessage, open_session
from trio_session._dirs import make_private_dirs
from trio_session._export import write_html
from trio_session._files import RefusedFileError, check_regular, open_regular, read_fd
from trio_session.rpc._client import default_command
from trio_session.store._entries import MAX_SESSION_FILE_BYTES, HistoryError
from trio_session.store._history import load_session
from trio_session.store._open_history import open_history
from trio_session.store._session_file import SessionFile
from trio_session.store._session_list import latest_session, list_sessions
from trio_session.store._sqlite_credentials import SqliteCredentialStore
from trio_session.tui._input_history import (
    MAX_HISTORY_FILE_BYTES,
    InputHistory,
    default_history_path,
)

from .test_rpc_process import raw_process, read_stderr, rpc_args

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes, devices, modes")

PLAIN = Model(id="plain", provider="faux")

#: How long a process may take to answer or to exit once told to: generous, for a loaded
#: machine; the hang it guards against is forever.
BOUND = 20

LOOP = os.strerror(errno.ELOOP)
TOO_LARGE = f"it is larger than the limit of {MAX_SESSION_FILE_BYTES} bytes (512 MiB)"


def hostile_paths(directory: Path) -> dict[str, Path]:
    """A named pipe, /dev/zero, a directory, a 2 GiB sparse file and a loop of links."""
    fifo = directory / "pipe.jsonl"
    os.mkfifo(fifo)
    folder = directory / "folder.jsonl"
    folder.mkdir()
    sparse = directory / "sparse.jsonl"
    sparse.touch()
    os.truncate(sparse, 2 << 30)  # truncate(1)'s call: 2 GiB of holes, no disk used
    loop = directory / "loop.jsonl"
    loop.symlink_to(directory / "loop2.jsonl")
    (directory / "loop2.jsonl").symlink_to(loop)
    return {
        "fifo": fifo,
        "zero": Path("/dev/zero"),
        "directory": folder,
        "sparse": sparse,
        "loop": loop,
    }


#: Why each hostile path is refused, as the errors say it.
REASONS = {
    "fifo": "it is a named pipe, not a regular file",
    "zero": "it is a character device, not a regular file",
    "directory": "it is a directory, not a regular file",
    "sparse": TOO_LARGE,
    "loop": LOOP,
}


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, so a missing mode shows as 0644 / 0755 whatever the runner's is."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def full(text: str) -> str:
    """A regex matching exactly ``text``."""
    return f"^{re.escape(text)}$"


def mode(path: Path) -> int:
    """The permission bits of ``path`` (not following a link)."""
    return stat.S_IMODE(path.lstat().st_mode)


@contextlib.contextmanager
def released(fifo: Path) -> Iterator[None]:
    """On the way out, open and close ``fifo``'s other end, so that code that was stuck
    opening it (the code before the fix) gets on; the test has failed by then anyway."""
    try:
        yield
    finally:
        for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, flags))


async def bounded(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a thread, failing the test if it takes more than ``BOUND`` seconds."""
    with trio.fail_after(BOUND):
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)


# -- the shared checks ----------------------------------------------------------------------


def test_check_regular_names_each_kind_without_opening(tmp_path: Path) -> None:
    """check_regular: a regular file is there, nothing is not, and everything else is refused
    with its kind (a pipe without waiting: nothing opens it)."""
    paths = hostile_paths(tmp_path)
    regular = tmp_path / "s.jsonl"
    regular.write_bytes(b"{}\n")
    assert check_regular(regular) is True
    assert check_regular(tmp_path / "missing") is False
    got = {}
    for name, path in paths.items():
        with pytest.raises(OSError, match=re.escape(REASONS[name])) as info:
            check_regular(path, MAX_SESSION_FILE_BYTES)
        got[name] = info.value.strerror
    assert got == REASONS


def test_open_regular_gives_a_blocking_descriptor(tmp_path: Path) -> None:
    """The descriptor is opened with O_NONBLOCK, then has it cleared, as os.open gives one."""
    import fcntl  # POSIX only, as this module

    path = tmp_path / "f"
    path.write_bytes(b"x")
    fd = open_regular(path, os.O_RDONLY)
    try:
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK == 0
    finally:
        os.close(fd)


def test_a_read_stops_one_byte_past_its_bound(tmp_path: Path) -> None:
    """read_fd reads at most the bound: a file that holds more (it grew after the open) is
    refused with a message naming it and the bound."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    fd = open_regular(path, os.O_RDONLY, max_bytes=11)
    try:
        assert read_fd(fd, path, 11) == b"x" * 11
        with pytest.raises(RefusedFileError) as info:
            read_fd(fd, path, 10)
    finally:
        os.close(fd)
    assert str(info.value) == f"{path}: it is larger than the limit of 10 bytes"


def test_make_private_dirs_makes_every_missing_level_0700(tmp_path: Path, umask_022: None) -> None:
    """Each level it creates is 0700; one that exists keeps its mode; a file in the way is
    named."""
    tmp_path.chmod(0o755)
    make_private_dirs(tmp_path / "a" / "b" / "c")
    assert [mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3
    assert mode(tmp_path) == 0o755
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError) as info:
        make_private_dirs(tmp_path / "file" / "d")
    assert info.value.strerror == f"{tmp_path / 'file'} is not a directory"


# -- session files ------------------------------------------------------------------------


async def test_session_files_refuse_each_hostile_path(tmp_path: Path) -> None:
    """load_session, SessionFile.resume and open_history refuse a pipe, a device, a
    directory, a 2 GiB file and a loop of links at once, naming the path and why."""
    paths = hostile_paths(tmp_path)
    del paths["zero"]  # it too is refused at the stat; read, it would never end
    got: dict[str, list[str]] = {}

    async def history(path: Path) -> None:
        async with open_history(path):
            pass  # pragma: no cover - refused

    with released(paths["fifo"]):
        for name, path in paths.items():
            messages = []
            for fn in (load_session, SessionFile.resume):
                with pytest.raises(HistoryError) as info:
                    await bounded(fn, path)
                messages.append(str(info.value))
            with trio.fail_after(BOUND), pytest.raises(HistoryError) as info:
                await history(path)
            messages.append(str(info.value))
            got[name] = messages
    assert got == {
        name: [
            f"cannot read session file {path}: {REASONS[name]}",
            f"cannot open session file {path}: {REASONS[name]}",
            f"cannot open session file {path}: {REASONS[name]}",
        ]
        for name, path in paths.items()
    }


async def test_session_lists_skip_a_pipe(tmp_path: Path) -> None:
    """list_sessions (the /resume picker) and latest_session (--continue) pass over a named
    pipe called *.jsonl instead of waiting on it for good (list_sessions did)."""
    async with open_history(tmp_path / "real.jsonl") as history:
        await history.append_message(UserMessage("hello"))  # a conversation: listed
    os.mkfifo(tmp_path / "zz-pipe.jsonl")
    with released(tmp_path / "zz-pipe.jsonl"):
        found = await bounded(list_sessions, tmp_path)
        latest = await bounded(latest_session, tmp_path)
    assert [s.path for s in found] == [tmp_path / "real.jsonl"]
    assert latest == tmp_path / "real.jsonl"


# -- regression: switch_session to a pipe or /dev/zero (issue 25, defects 1 and 2) --------


def own_dirs(directory: Path) -> dict[str, str]:
    """An environment whose data and config directories are the test's own."""
    return {
        **os.environ,
        "XDG_DATA_HOME": str(directory / "data"),
        "XDG_CONFIG_HOME": str(directory / "config"),
    }


async def _switch_then_end(tmp_path: Path, names: list[str], stop: str) -> None:
    """Start ``trio-session rpc``, switch_session to each hostile path, check each answer,
    then end it by EOF or SIGTERM and check it exits at once, as pi 1.6.0 does: 0 after
    EOF, 143 (128 + SIGTERM) after the signal."""
    paths = hostile_paths(tmp_path)
    args = rpc_args(tmp_path, [{"text": "hi"}])
    with released(paths["fifo"]), trio.fail_after(3 * BOUND):
        async with raw_process(args, env=own_dirs(tmp_path)) as (process, raw):
            await raw.send({"id": "before", "type": "get_state"})
            before = (await raw.read())["data"]["sessionFile"]
            answers = []
            for name in names:
                await raw.send(
                    {"id": name, "type": "switch_session", "sessionPath": str(paths[name])}
                )
                with trio.fail_after(BOUND):
                    answers.append(await raw.read())
            await raw.send({"id": "after", "type": "get_state"})
            after = (await raw.read())["data"]["sessionFile"]
            if stop == "EOF":
                await raw.send_stream.aclose()
            else:
                process.send_signal(signal.SIGTERM)
            with trio.fail_after(BOUND):
                rest = await raw.rest()
                returncode = await process.wait()
            stderr = await read_stderr(process)
    assert answers == [
        {
            "id": name,
            "type": "response",
            "command": "switch_session",
            "success": False,
            "error": f"cannot open session file {paths[name]}: {REASONS[name]}",
        }
        for name in names
    ]
    assert after == before  # the session it had is still open
    assert (rest, returncode, stderr) == ([], 0 if stop == "EOF" else 143, "")


async def test_switch_session_to_a_pipe_is_answered_and_eof_still_ends_it(tmp_path: Path) -> None:
    """Issue 25 #1: switch_session to a named pipe nobody writes gets an error response at
    once (it was never answered), and EOF then ends the process (only SIGKILL did)."""
    await _switch_then_end(tmp_path, ["fifo"], "EOF")


async def test_switch_session_to_dev_zero_is_answered_and_sigterm_still_ends_it(
    tmp_path: Path,
) -> None:
    """Issue 25 #2: switch_session to /dev/zero gets an error response at once (it read
    without end, 3.2 GiB in 30 s), and SIGTERM then ends the process."""
    await _switch_then_end(tmp_path, ["zero"], "SIGTERM")


@pytest.mark.parametrize("stop", ["EOF", "SIGTERM"])
async def test_every_hostile_path_over_rpc_then_a_clean_exit(tmp_path: Path, stop: str) -> None:
    """Issue 25: a pipe, /dev/zero, a directory, a 2 GiB sparse file and a loop of links,
    one after the other: each a one-line error response, the session unchanged; then EOF
    or SIGTERM ends the process with status 0 within the bound."""
    await _switch_then_end(tmp_path, list(REASONS), stop)


async def test_hostile_paths_at_start_up_exit_2_with_one_line(tmp_path: Path) -> None:
    """Issue 25: ``rpc --session PATH`` and ``chat --resume PATH`` with each hostile path
    exit 2 at once, with one line on stderr naming the path and why."""
    paths = hostile_paths(tmp_path)
    script = rpc_args(tmp_path, [{"text": "hi"}])
    got: dict[tuple[str, str], tuple[int, str]] = {}

    async def run(command: str, name: str) -> None:
        if command == "rpc":
            argv = default_command(*script, "--session", str(paths[name]))
        else:
            argv = [sys.executable, "-m", "trio_session", "chat", *script]
            argv += ["--resume", str(paths[name])]
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=own_dirs(tmp_path),
        )
        try:
            with trio.fail_after(BOUND):
                returncode = await process.wait()
            got[command, name] = (returncode, await read_stderr(process))
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                assert process.stderr is not None
                await process.stderr.aclose()

    with released(paths["fifo"]):
        async with trio.open_nursery() as nursery:
            for command in ("rpc", "chat"):
                for name in paths:
                    nursery.start_soon(run, command, name)
    assert got == {
        (command, name): (
            2,
            f"trio-session: cannot open session file {path}: {REASONS[name]}\n"
            if command == "rpc"
            else f"trio-session: --resume: cannot use {path}: {REASONS[name]}\n",
        )
        for command in ("rpc", "chat")
        for name, path in paths.items()
    }


# -- regression: what we create is private (issue 25, defects 4 and 5) ---------------------


async def test_exported_html_is_0600(tmp_path: Path, umask_022: None) -> None:
    """Issue 25 #4: export_html writes the page 0600, as the session file is (it was 0644),
    also over an older 0644 export, in directories it creates 0700."""
    async with open_session(FauxProvider([FauxReply(text="secret")]), PLAIN) as session:
        await session.prompt("my password is hunter2")
        fresh = await session.export_html(tmp_path / "new" / "page.html")
        old = tmp_path / "old.html"
        old.write_text("stale")
        old.chmod(0o644)
        again = await session.export_html(old)
    assert (mode(fresh), mode(fresh.parent), mode(again)) == (0o600, 0o700, 0o600)
    assert "hunter2" in again.read_text()


async def test_export_to_a_pipe_is_refused(tmp_path: Path) -> None:
    """An export target that is a named pipe is refused at once, not waited on."""
    fifo = tmp_path / "page.html"
    os.mkfifo(fifo)
    expected = f"{fifo}: it is a named pipe, not a regular file"
    with released(fifo), trio.fail_after(BOUND), pytest.raises(OSError, match=full(expected)):
        await write_html(fifo, "<p>x</p>")


def test_data_directories_are_private_all_the_way_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_022: None
) -> None:
    """Issue 25 #5: every directory made for sessions, the input history and the credential
    store is 0700 from the data root down (trio-session/ and sessions/ were 0755, listing
    the working directories); a directory that was there keeps its mode."""
    tmp_path.chmod(0o755)
    root = tmp_path / "xdg"
    monkeypatch.setenv("XDG_DATA_HOME", str(root / "data"))
    with SessionFile.create(cwd=tmp_path / "work") as history:
        session_dir = history.path.parent
    InputHistory.load(default_history_path()).add("hello")
    SqliteCredentialStore.open(env_vars={}).close()
    made = [root, root / "data", root / "data" / "trio-session", session_dir.parent, session_dir]
    assert session_dir.parent == root / "data" / "trio-session" / "sessions"
    assert {str(p): mode(p) for p in made} == {str(p): 0o700 for p in made}
    assert mode(tmp_path) == 0o755


# -- the input history --------------------------------------------------------------------


async def test_input_history_refuses_a_pipe_and_a_huge_file(tmp_path: Path) -> None:
    """The chat's input history: a named pipe is not waited on (a warning, entries kept in
    memory); a file over the bound is not read nor grown (a warning naming it and the bound)."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with released(fifo):
        piped = await bounded(InputHistory.load, fifo)
        await bounded(piped.add, "one")
    huge = tmp_path / "huge.jsonl"
    huge.touch()
    os.truncate(huge, MAX_HISTORY_FILE_BYTES + 1)
    big = InputHistory.load(huge)
    big.add("two")
    assert (piped.entries, piped.warning) == (
        ["one"],
        f"input history: cannot read {fifo}: it is a named pipe, not a regular file",
    )
    assert (big.entries, big.path, big.warning) == (
        ["two"],
        None,
        f"input history: {huge} is larger than the limit of 67108864 bytes (64 MiB); "
        "not read, and this chat's input is not saved",
    )
    assert huge.stat().st_size == MAX_HISTORY_FILE_BYTES + 1
