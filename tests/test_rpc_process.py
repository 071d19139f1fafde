"""The real ``trio-session rpc`` process, driven by raw lines and through RpcClient."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from trio_session.rpc import RpcConnectionError, open_rpc_client
from trio_session.rpc import _client as rpc_client
from trio_session.rpc._client import default_command

from .rpc_helpers import (
    ERR_503,
    JSON,
    LONG_DELAY_MS,
    RUN_START,
    SCENARIOS,
    RawLines,
    Scenario,
    Summary,
    retry_end,
    run_raw,
    run_with_client,
    split_expected,
    summaries,
    summarize,
    write_json,
)

#: Backoff for the scenarios that let it run: short, so the tests take little real time.
BASE = 10


def rpc_args(tmp_path: Path, script: list[JSON], settings: JSON | None = None) -> list[str]:
    """``--faux`` and ``--settings`` arguments for a script and settings written to files."""
    args = ["--faux", str(write_json(tmp_path / "script.json", script))]
    if settings is not None:
        args += ["--settings", str(write_json(tmp_path / "settings.json", settings))]
    return args


def own_config(directory: Path) -> dict[str, str]:
    """An environment whose global settings file is the process's own.

    ``set_auto_retry`` writes the global settings file, and processes started later
    read it: side-by-side scenarios must not share one.
    """
    return {**os.environ, "XDG_CONFIG_HOME": str(directory / "config")}


@asynccontextmanager
async def raw_process(
    args: list[str], **options: Any
) -> AsyncIterator[tuple[trio.Process, RawLines]]:
    """``trio-session rpc ARGS`` with pipes; killed if the block leaves it running."""
    process = await trio.lowlevel.open_process(
        default_command(*args),
        stdin=options.pop("stdin", subprocess.PIPE),
        stdout=options.pop("stdout", subprocess.PIPE),
        stderr=subprocess.PIPE,
        **options,
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        yield process, RawLines(process.stdin, process.stdout)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def read_stderr(process: trio.Process) -> str:
    """Everything the process wrote to stderr (it must have exited)."""
    assert process.stderr is not None
    data = b""
    while chunk := await process.stderr.receive_some():
        data += chunk
    return data.decode()


# -- the scenarios of issue 4, against the real process ------------------------------------


# Each scenario has its own process; they run side by side (startup is most of the time).


async def test_scenarios_by_raw_lines(tmp_path: Path) -> None:
    """R-39, R-42, R-44, R-45a: each scenario's exact lines from the real process."""
    got: dict[str, list[Summary]] = {}

    async def one(scenario: Scenario) -> None:
        directory = tmp_path / scenario.name
        directory.mkdir()
        args = rpc_args(directory, scenario.script, scenario.settings(BASE))
        async with raw_process(args, env=own_config(directory)) as (process, raw):
            transcript = await run_raw(scenario, raw)
            await raw.send_stream.aclose()
            assert await raw.rest() == []
            assert await process.wait() == 0
            assert await read_stderr(process) == ""
        got[scenario.name] = summaries(transcript)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for scenario in SCENARIOS:
                nursery.start_soon(one, scenario)
    assert got == {s.name: s.expected(BASE) for s in SCENARIOS}


async def test_scenarios_through_client(tmp_path: Path) -> None:
    """R-40, R-41, R-45: RpcClient drives the real process through each scenario."""
    got: dict[str, tuple[list[Summary], list[Summary]]] = {}

    async def one(scenario: Scenario) -> None:
        directory = tmp_path / scenario.name
        directory.mkdir()
        args = rpc_args(directory, scenario.script, scenario.settings(BASE))
        async with open_rpc_client(args=args, env=own_config(directory)) as client:
            events, responses = await run_with_client(scenario, client)
        assert client.process is not None
        assert client.process.returncode == 0
        assert client.stderr == ""
        got[scenario.name] = (summaries(events), [summarize(r) for r in responses])

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for scenario in SCENARIOS:
                nursery.start_soon(one, scenario)
    assert got == {s.name: split_expected(s.expected(BASE)) for s in SCENARIOS}


async def test_retry_state_through_client(tmp_path: Path) -> None:
    """R-40, R-41: set_auto_retry, abort_retry and get_state as RpcClient methods."""
    settings = {"retry": {"baseDelayMs": LONG_DELAY_MS}}
    args = rpc_args(tmp_path, [{"error": ERR_503}, {"text": "x"}], settings)
    with trio.fail_after(30):
        async with open_rpc_client(args=args) as client:
            with client.events() as events:
                await client.prompt("hi")
                started = await events.next("auto_retry_start")
                during = await client.get_state()
                await client.abort_retry()
                ended = await events.next("auto_retry_end")
            await client.wait_for_idle()
            after = await client.get_state()
            await client.set_auto_retry(False)
            await client.set_auto_compaction(False)
            toggled = await client.get_state()
            assert await client.retry_now() is False
            messages = await client.get_messages()
            assert (await client.new_session()) == {"cancelled": False}
            fresh = await client.get_state()
    assert started["delayMs"] == LONG_DELAY_MS
    assert {k: during[k] for k in ("isStreaming", "isRetrying", "retryAttempt")} == {
        "isStreaming": True,
        "isRetrying": True,
        "retryAttempt": 1,
    }
    assert ended == retry_end(False, 1, "Retry cancelled")
    assert {k: after[k] for k in ("isStreaming", "isRetrying", "retryAttempt")} == {
        "isStreaming": False,
        "isRetrying": False,
        "retryAttempt": 0,
    }
    assert (toggled["autoRetryEnabled"], toggled["autoCompactionEnabled"]) == (False, False)
    assert [m["role"] for m in messages] == ["user"]  # the 503 left the runtime context
    assert fresh["messageCount"] == 0
    assert fresh["sessionId"] != after["sessionId"]


# -- a dead child ----------------------------------------------------------------------------


async def test_dead_child_raises_in_every_waiting_call(tmp_path: Path) -> None:
    """A killed server raises RpcConnectionError in each waiting call, and in later ones."""
    args = rpc_args(tmp_path, [{"text": "partial", "hang": True}])
    errors: list[str] = []

    async def expect_error(call: Callable[[], Any]) -> None:
        with pytest.raises(RpcConnectionError) as info:
            await call()
        assert info.value.returncode == -signal.SIGKILL
        errors.append(str(info.value))

    with trio.fail_after(30):
        async with open_rpc_client(args=args) as client:
            process = client.process
            assert process is not None
            with client.events() as events:
                await client.prompt("hi")
                await events.next("message_update")  # the reply now hangs
                process.send_signal(signal.SIGSTOP)  # no more answers

                async def next_event() -> None:
                    await events.next("agent_end")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(expect_error, client.get_state)
                    nursery.start_soon(expect_error, client.wait_for_idle)
                    nursery.start_soon(expect_error, next_event)
                    await trio.testing.wait_all_tasks_blocked(0.05)
                    process.kill()
            await expect_error(client.abort)
    prefix = f"the rpc server process (pid {process.pid}) was killed by SIGKILL (exit status -9)"
    assert sorted(errors) == [
        f"{prefix} while sending abort; it wrote nothing to stderr",
        f"{prefix} while waiting for events; it wrote nothing to stderr",
        f"{prefix} while waiting for the response to get_state (id req_2); "
        "it wrote nothing to stderr",
        f"{prefix} while waiting for the response to get_state (id req_3); "
        "it wrote nothing to stderr",
    ]


async def test_child_that_exits_at_once(tmp_path: Path) -> None:
    """A server that cannot start is reported with its exit status and its stderr."""
    missing = tmp_path / "missing.json"
    with trio.fail_after(30):
        async with open_rpc_client(args=["--faux", str(missing)]) as client:
            with pytest.raises(RpcConnectionError) as info:
                await client.get_state()
    assert client.process is not None
    assert str(info.value) == (
        f"the rpc server process (pid {client.process.pid}) exited with status 2 while waiting "
        f"for the response to get_state (id req_1); its stderr ends:\ntrio-session: cannot "
        f"read faux script {missing}: [Errno 2] No such file or directory: '{missing}'"
    )
    assert info.value.returncode == 2


# -- ending: end of input, SIGTERM -----------------------------------------------------------


async def _in_backoff(raw: RawLines) -> None:
    await raw.send({"type": "prompt", "message": "hi"})
    while (await raw.read())["type"] != "auto_retry_start":
        pass


async def test_end_of_input_aborts_and_exits(tmp_path: Path) -> None:
    """R-30, R-42: EOF on stdin during a backoff: the chain ends, the process exits 0."""
    args = rpc_args(tmp_path, [{"error": ERR_503}], {"retry": {"baseDelayMs": LONG_DELAY_MS}})
    with trio.fail_after(30):
        async with raw_process(args) as (process, raw):
            await _in_backoff(raw)
            await raw.send_stream.aclose()
            rest = await raw.rest()
            assert await process.wait() == 0
            assert await read_stderr(process) == ""
    assert [summarize(o) for o in rest] == [
        retry_end(False, 1, "Retry cancelled"),
        "agent_settled aborted",
    ]


@pytest.mark.parametrize(
    ("stops", "status"),
    [
        (["SIGTERM"], 143),
        (["SIGINT"], 130),
        (["SIGHUP"], 129),
        (["SIGINT", "EOF"], 130),
        (["SIGTERM", "EOF"], 143),
    ],
    ids=lambda v: "+".join(v) if isinstance(v, list) else str(v),
)
async def test_stop_signals_end_the_retry_chain_then_exit(
    tmp_path: Path, stops: list[str], status: int
) -> None:
    """Issue 11 #2, #14, R-30, R-54: SIGINT, SIGTERM or SIGHUP during a backoff, alone or
    with EOF: the owed auto_retry_end and agent_settled are written, then the exit
    status is pi 1.6.0's, 128 + the signal's number (SIGTERM 143, SIGHUP 129; SIGINT 130)."""
    args = rpc_args(tmp_path, [{"error": ERR_503}], {"retry": {"baseDelayMs": LONG_DELAY_MS}})
    with trio.fail_after(30):
        async with raw_process(args) as (process, raw):
            await _in_backoff(raw)
            rest: list[JSON] = []
            for stop in stops:
                if stop == "EOF":
                    await raw.send_stream.aclose()
                else:
                    process.send_signal(signal.Signals[stop])
                if not rest:  # the first stop has started the shutdown once it writes
                    rest.append(await raw.read())
            rest += await raw.rest()
            returncode = await process.wait()
            stderr = await read_stderr(process)
    assert [summarize(o) for o in rest] == [
        retry_end(False, 1, "Retry cancelled"),
        "agent_settled aborted",
    ]
    assert (returncode, stderr) == (status, "")


async def test_one_signal_after_end_of_input_changes_nothing(tmp_path: Path) -> None:
    """R-54, pi's shutdown protocol: once end of input has started the shutdown, one
    SIGTERM does not interrupt it (a supervisor closes stdin and signals together): every
    owed line is written and the exit status is end of input's, 0 — also when the signal
    lands after the last line, as the process exits (issue 25: under load it did, and
    the process died of it, -15)."""
    args = rpc_args(tmp_path, [{"error": ERR_503}], {"retry": {"baseDelayMs": LONG_DELAY_MS}})
    with trio.fail_after(30):
        async with raw_process(args) as (process, raw):
            await _in_backoff(raw)
            await raw.send_stream.aclose()
            first = await raw.read()  # written by the shutdown: it has started
            process.send_signal(signal.SIGTERM)
            rest = [first, *await raw.rest()]
            returncode = await process.wait()
            stderr = await read_stderr(process)
    assert [summarize(o) for o in rest] == [
        retry_end(False, 1, "Retry cancelled"),
        "agent_settled aborted",
    ]
    assert (returncode, stderr) == (0, "")


def _handles(pid: int, number: int) -> bool:
    """Whether a live process has a handler of its own for signal ``number`` (Linux's
    /proc/PID/status ``SigCgt``); false once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    if fields["State"].startswith("Z"):
        return False
    return bool(int(fields["SigCgt"], 16) >> (number - 1) & 1)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
async def test_a_signal_after_the_last_line_changes_nothing(tmp_path: Path) -> None:
    """The same, with the signal sent once the server no longer handles it: it has
    written everything and is on its way out (issue 25: the handlers it found were put
    back, and a supervisor's SIGTERM that landed then killed it); the exit status is
    still end of input's."""
    args = rpc_args(tmp_path, [{"error": ERR_503}], {"retry": {"baseDelayMs": LONG_DELAY_MS}})
    with trio.fail_after(30):
        async with raw_process(args) as (process, raw):
            await _in_backoff(raw)
            await raw.send_stream.aclose()
            owed = [await raw.read(), await raw.read()]  # the last line it writes
            # Another process's state: nothing to wait on but reading it again.
            while _handles(process.pid, signal.SIGTERM):
                await trio.lowlevel.checkpoint()
            process.send_signal(signal.SIGTERM)
            rest = await raw.rest()
            returncode = await process.wait()
            stderr = await read_stderr(process)
    assert [summarize(o) for o in owed] == [
        retry_end(False, 1, "Retry cancelled"),
        "agent_settled aborted",
    ]
    assert (rest, returncode, stderr) == ([], 0, "")


#: An extension whose handler holds up the shutdown (it is bounded by the handler timeout,
#: 5 s): it says on a pipe when it starts, and when it is over.
_SLOW_SHUTDOWN = """
import os, trio
def activate(api):
    async def hold(event):
        os.write({fd}, b"holding;")
        try:
            await trio.sleep(3600)
        finally:
            os.write({fd}, b"over;")
    api.on("auto_retry_end", hold)
"""


@pytest.mark.parametrize("second", ["SIGTERM", "SIGHUP", "SIGINT"])
async def test_a_second_signal_exits_at_once(tmp_path: Path, second: str) -> None:
    """R-54, pi's shutdown protocol: a second signal while the shutdown is under way (held
    up by an extension) ends the process at once, with that signal's status; the handler
    holding the shutdown never finishes."""
    read_end, write_end = os.pipe()
    extension = tmp_path / "hold.py"
    extension.write_text(_SLOW_SHUTDOWN.format(fd=write_end))
    args = [
        *rpc_args(tmp_path, [{"error": ERR_503}], {"retry": {"baseDelayMs": LONG_DELAY_MS}}),
        "--extension",
        str(extension),
    ]
    told = trio.lowlevel.FdStream(read_end)
    with trio.fail_after(4):  # under the handler's 5 s bound: only the second signal ends it
        async with told, raw_process(args, pass_fds=(write_end,)) as (process, raw):
            os.close(write_end)
            await _in_backoff(raw)
            process.send_signal(signal.SIGHUP)
            assert await told.receive_some() == b"holding;"
            process.send_signal(signal.Signals[second])
            returncode = await process.wait()
            stderr = await read_stderr(process)
            said = b"holding;"
            while chunk := await told.receive_some():
                said += chunk
    assert (returncode, stderr, said) == (128 + signal.Signals[second], "", b"holding;")


#: A long answer in many chunks: without merging, its updates would queue 200 MB.
LONG_ANSWER = [f"{i:04d}" + "y" * 96 for i in range(2000)]


def _peak_rss_kib(pid: int) -> int:
    """The process's peak resident set size (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
async def test_a_client_that_stops_reading_costs_bounded_memory(tmp_path: Path) -> None:
    """Issue 11 #5: a 200 kB answer in 2 000 chunks to a client that reads nothing grows
    the server's peak RSS by under 32 MiB (it was 390 MiB); then every delta comes."""
    text = "".join(LONG_ANSWER)
    done_read, done_write = os.pipe()  # the run's end, told without reading stdout
    extension = tmp_path / "tell_the_end.py"
    extension.write_text(
        "import os\n"
        "def activate(api):\n"
        "    def on_end(event):\n"
        "        if not event.will_retry:\n"
        f"            os.write({done_write}, b'done')\n"
        "    api.on('agent_end', on_end)\n"
    )
    args = [*rpc_args(tmp_path, [{"text": text, "chunks": LONG_ANSWER}]), "--extension"]
    done = trio.lowlevel.FdStream(done_read)
    with trio.fail_after(60):
        async with (
            done,
            raw_process([*args, str(extension)], pass_fds=(done_write,)) as (process, raw),
        ):
            os.close(done_write)
            await raw.send({"id": 1, "type": "get_state"})
            assert (await raw.read())["id"] == 1  # started: its memory is the baseline
            before = _peak_rss_kib(process.pid)
            await raw.send({"id": 2, "type": "prompt", "message": "hi"})
            assert await done.receive_some() == b"done"  # stdout unread all along
            grown = _peak_rss_kib(process.pid) - before
            await raw.send_stream.aclose()
            rest = await raw.rest()
            assert await process.wait() == 0
    assert grown < 32 * 1024
    updates = [o for o in rest if o["type"] == "message_update"]
    assert "".join(u["delta"] for u in updates) == text
    assert len(updates) < len(LONG_ANSWER)
    ends = [o for o in rest if o["type"] == "message_end"]
    assert ends[-1]["message"]["content"] == [{"type": "text", "text": text}]
    assert [summarize(o) for o in rest if o["type"] != "message_update"] == [
        "response prompt ok started",
        *RUN_START,
        "message_start assistant",
        "message_end assistant stop",
        "turn_end",
        "agent_end willRetry=false",
        "agent_settled",
    ]


async def test_ten_megabyte_line(tmp_path: Path) -> None:
    """R-42: a 10 MB line gets one error response; the next command works."""
    with trio.fail_after(30):
        async with raw_process(rpc_args(tmp_path, [])) as (_, raw):
            async with trio.open_nursery() as nursery:
                # write and read at once: the server answers before the line has ended
                nursery.start_soon(raw.send, b"x" * (10 * 1024 * 1024) + b"\n")
                first = await raw.read()
            await raw.send({"id": 2, "type": "abort_retry"})
            second = await raw.read()
    assert first == {
        "type": "response",
        "command": "parse",
        "success": False,
        "error": "Failed to parse command: the line is longer than 1048576 bytes",
    }
    assert second == {"id": 2, "type": "response", "command": "abort_retry", "success": True}


def test_shared_descriptors_stay_blocking(tmp_path: Path) -> None:
    """stdin/stdout are dup'ed before FdStream, and their blocking mode is put back."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    try:
        process = subprocess.Popen(
            default_command(*rpc_args(tmp_path, [])), stdin=stdin_r, stdout=stdout_w
        )
        os.write(stdin_w, b'{"id": 1, "type": "abort"}\n')
        os.close(stdin_w)
        assert process.wait(timeout=30) == 0
        # our copies share the child's open file descriptions
        assert os.get_blocking(stdin_r)
        assert os.get_blocking(stdout_w)
        os.close(stdout_w)
        with os.fdopen(stdout_r, "rb") as out:
            assert out.read() == b'{"id":1,"type":"response","command":"abort","success":true}\n'
    finally:
        for fd in (stdin_r,):
            os.close(fd)


# -- the command line ------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m trio_session ARGS`` with no input."""
    return subprocess.run(
        [sys.executable, "-m", "trio_session", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_bad_faux_script_is_a_clear_error(tmp_path: Path) -> None:
    """A malformed faux script names the file, the reply and the key; exit 2."""
    path = write_json(tmp_path / "script.json", [{"text": "ok"}, {"delay": -1}])
    result = run_cli("rpc", "--faux", str(path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"trio-session: faux script {path}: [1].delay must be a non-negative number of "
        "seconds, not -1\n"
    )


def test_rpc_unknown_provider_is_a_usage_error() -> None:
    """rpc with an unknown --provider is a usage error, exit 2 (any name is a provider's
    with --agent-dir, so the check is ours, not argparse's)."""
    result = run_cli("rpc", "--provider", "bogus")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "trio-session: unknown provider 'bogus'; choose openai, anthropic, gemini or faux "
        "(or a provider of pi's models.json, with --agent-dir)\n"
    )


async def test_sessions_left_unused_leave_no_file(tmp_path: Path) -> None:
    """As pi writes no session file until there is a message: a session the client never
    prompted -- the first one, or one made by ``new_session`` -- never has a file, though
    ``get_state`` names it; the file of a session that was prompted is written whole."""
    env = {**own_config(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    args = rpc_args(tmp_path, [{"text": "Hello"}])
    async with open_rpc_client(args=args, env=env) as client:
        unused = trio.Path(str((await client.get_state())["sessionFile"]))
        assert await unused.parent.is_dir()  # made at the start: the directory is checked
        assert not await unused.exists()
    assert client.stderr == ""
    assert not await unused.exists()

    async with open_rpc_client(args=args, env=env) as client:
        talked = trio.Path(str((await client.get_state())["sessionFile"]))
        await client.prompt("hi")
        await client.wait_for_idle()
        await client.new_session()
        fresh = trio.Path(str((await client.get_state())["sessionFile"]))
        assert fresh != talked
    assert client.stderr == ""
    assert not await fresh.exists()
    kept = await talked.read_text()
    assert '"hi"' in kept
    assert '"Hello"' in kept


def test_rpc_with_no_input_exits_cleanly(tmp_path: Path) -> None:
    """With stdin at end of file the server writes nothing and exits 0."""
    result = run_cli("rpc", *rpc_args(tmp_path, []))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


async def test_real_provider_unreachable_retries_then_fails(tmp_path: Path) -> None:
    """R-28a, R-52: --provider openai against a closed port: connection errors are
    retried by the session (once per attempt, no hidden retries) and the chain fails;
    the API key appears nowhere in the process's output (stdout or stderr)."""
    with trio.socket.socket() as probe:  # a port with nothing listening
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    secret = "sk-test-secret-123456789"
    settings = write_json(tmp_path / "s.json", {"retry": {"baseDelayMs": 10, "maxRetries": 2}})
    args = [
        "--provider",
        "openai",
        "--model",
        "gpt-test",
        "--api-key",
        secret,
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "--settings",
        str(settings),
    ]
    with trio.fail_after(60):
        async with raw_process(args) as (process, raw):
            await raw.send({"id": 1, "type": "prompt", "message": "Hi"})
            seen: list[JSON] = []
            while not (seen and seen[-1].get("type") == "auto_retry_end"):
                seen.append(await raw.read())
            await raw.send({"id": 2, "type": "get_messages"})
            seen.append(await raw.read())
            assert process.stdin is not None
            await process.stdin.aclose()
            seen += await raw.rest()
            await process.wait()
            stderr = await read_stderr(process)
    starts = [e for e in seen if e.get("type") == "auto_retry_start"]
    assert [e["attempt"] for e in starts] == [1, 2]
    assert all(
        e["errorMessage"].startswith("Connection error: could not connect to ") for e in starts
    )
    end = next(e for e in seen if e.get("type") == "auto_retry_end")
    assert (end["success"], end["attempt"]) == (False, 2)
    assert secret not in json.dumps(seen)
    assert secret not in stderr
    assert process.returncode == 0


async def test_a_server_that_ignores_end_of_input_is_terminated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Closing the client terminates a server that does not exit at end of input."""
    monkeypatch.setattr(rpc_client, "CLOSE_TIMEOUT", 0.2)
    stubborn = [sys.executable, "-c", "import time; time.sleep(60)"]
    with trio.fail_after(30):
        async with open_rpc_client(cmd=stubborn) as client:
            pass
    assert client.process is not None
    assert client.process.returncode == -signal.SIGTERM


#: A program that serves on stdio, is stopped by SIGHUP, then gets a late SIGTERM — as a
#: supervisor sends one after another — once ``serve_stdio`` has returned.
_LATE_SIGNAL = """
import os, signal, sys, trio
from trio_session import FauxProvider, open_session
from trio_session.rpc._stdio import serve_stdio

async def main():
    async def stop_soon():
        os.kill(os.getpid(), signal.SIGHUP)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stop_soon)
        first = await serve_stdio(lambda: open_session(FauxProvider([])))
    os.kill(os.getpid(), signal.SIGTERM)  # after the receiver closed: ignored, not fatal
    os.kill(os.getpid(), signal.SIGINT)
    print(f"survived {first.name}", file=sys.stderr)

trio.run(main)
"""


def test_a_stop_signal_after_the_server_returned_is_not_fatal(tmp_path: Path) -> None:
    """Issue 12 (CI): SIGHUP stops the server; a SIGTERM or SIGINT that comes after
    ``serve_stdio`` returned — the receiver closed — no longer kills the process by
    signal (exit -15): the stop signals stay ignored on the way out."""
    with subprocess.Popen(  # stdin stays open: only the signal ends the server
        [sys.executable, "-c", _LATE_SIGNAL],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    ) as done:
        returncode = done.wait(timeout=60)
        assert done.stderr is not None
        stderr = done.stderr.read().decode()
    assert (returncode, stderr) == (0, "survived SIGHUP\n")


# -- issue 39: every line answered once, and compact does not hold the reader -----------------


def _answered(lines: list[JSON]) -> dict[Any, int]:
    """How many responses each command id got."""
    counts: dict[Any, int] = {}
    for obj in lines:
        if obj.get("type") == "response":
            counts[obj.get("id")] = counts.get(obj.get("id"), 0) + 1
    return counts


async def _read_until(raw: RawLines, last: Callable[[JSON], bool]) -> list[JSON]:
    lines = []
    while True:
        lines.append(obj := await raw.read())
        if last(obj):
            return lines


def _response(command_id: str) -> Callable[[JSON], bool]:
    return lambda obj: obj.get("type") == "response" and obj.get("id") == command_id


@pytest.mark.parametrize("command", ["abort", "compact", "new_session"])
async def test_a_steer_a_prompt_and_at_once_a_command_answer_each_line_once(
    tmp_path: Path, command: str
) -> None:
    """F5: a steer queued while idle, a prompt, then at once abort, compact or
    new_session: each line answered once, every turn closed, no traceback, exit 0."""
    script = [{"text": "answer"}, {"text": "The summary."}, {"text": "spare"}]
    args = [*rpc_args(tmp_path, script), "--session-dir", str(tmp_path / "sessions")]
    with trio.fail_after(60):
        async with raw_process(args, env=own_config(tmp_path)) as (process, raw):
            for line in (
                {"id": "s", "type": "steer", "message": "queued while idle"},
                {"id": "p", "type": "prompt", "message": "hi"},
                {"id": "x", "type": command},
            ):
                await raw.send(line)
            lines = await _read_until(raw, _response("x"))
            while command == "compact" and not any(o.get("type") == "agent_settled" for o in lines):
                lines.append(await raw.read())  # the prompt's end may come after the answer
            await raw.send_stream.aclose()
            lines += await raw.rest()
            assert await process.wait() == 0
            assert await read_stderr(process) == ""
    assert _answered(lines) == {"s": 1, "p": 1, "x": 1}
    kinds = [obj["type"] for obj in lines]
    assert kinds.count("turn_start") == kinds.count("turn_end")
    assert kinds.count("agent_settled") == 1


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
async def test_a_full_disk_answers_each_prompt_once_and_end_of_input_exits_0(
    tmp_path: Path,
) -> None:
    """F7: under ``ulimit -f`` a prompt that cannot be saved gets one error response, a
    reply that cannot be saved its history_write_failed; stderr says each in one line
    (no traceback); end of input exits 0; the file holds what fit, whole."""
    import resource

    from trio_session.store._history import load_session
    from trio_session.store._session_file import SessionFile

    session = tmp_path / "s.jsonl"
    SessionFile.create(session, cwd=str(tmp_path)).close()
    script = [{"text": "Hello"}, {"text": "B" * 3000}]
    args = [*rpc_args(tmp_path, script), "--session", str(session)]

    def small_files() -> None:  # the first exchange fits in 2048 bytes; 3000 do not
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY))

    not_saved = f"cannot write session file {session}: File too large"
    with trio.fail_after(60):
        async with raw_process(args, env=own_config(tmp_path), preexec_fn=small_files) as (
            process,
            raw,
        ):
            await raw.send({"id": "1", "type": "prompt", "message": "hi"})
            lines = await _read_until(raw, lambda obj: obj.get("type") == "agent_settled")
            await raw.send({"id": "2", "type": "prompt", "message": "x" * 3000})
            lines += await _read_until(raw, _response("2"))
            await raw.send({"id": "3", "type": "prompt", "message": "again"})
            lines += await _read_until(raw, lambda obj: obj.get("type") == "agent_settled")
            await raw.send_stream.aclose()
            lines += await raw.rest()
            assert await process.wait() == 0
            stderr = await read_stderr(process)
    assert _answered(lines) == {"1": 1, "2": 1, "3": 1}
    answers = {o["id"]: o for o in lines if o.get("type") == "response"}
    assert answers["2"]["error"] == not_saved
    assert answers["3"]["data"] == {"disposition": "started"}
    assert [o["error"] for o in lines if o.get("type") == "history_write_failed"] == [not_saved] * 2
    assert stderr.splitlines() == [
        f"trio-session: {not_saved}",
        f"trio-session: {not_saved}",
        f"trio-session: {not_saved}; 1 entry could not be saved",
    ]
    loaded = load_session(session)
    assert loaded.warnings == ()
    assert [m.text for m in loaded.messages] == ["hi", "Hello", "again"]


async def test_sigterm_ends_a_compaction_whose_summary_never_comes(tmp_path: Path) -> None:
    """F3: get_state is answered while the summary request hangs, and SIGTERM ends the
    compaction at once — not after the request's idle timeout: compact is answered
    "Compaction cancelled" and the process exits 143."""
    script: list[JSON] = [{"text": "Hello"}, {"text": "never", "delay": 3600}]
    args = rpc_args(tmp_path, script)
    with trio.fail_after(30):  # the summary request's idle timeout is 120 s
        async with raw_process(args, env=own_config(tmp_path)) as (process, raw):
            await raw.send({"id": "p", "type": "prompt", "message": "hi"})
            await _read_until(raw, lambda obj: obj.get("type") == "agent_settled")
            await raw.send({"id": "c", "type": "compact"})
            await _read_until(raw, lambda obj: obj.get("type") == "compaction_start")
            await raw.send({"id": "g", "type": "get_state"})
            (state,) = await _read_until(raw, _response("g"))
            assert state["data"]["isCompacting"] is True
            process.send_signal(signal.SIGTERM)
            rest = await raw.rest()
            assert await process.wait() == 128 + signal.SIGTERM
            assert await read_stderr(process) == ""
    assert [summarize(obj) for obj in rest] == [
        {"type": "compaction_end", "reason": "manual", "aborted": True, "willRetry": False},
        "response compact failed",
    ]
    assert rest[1]["error"] == "Compaction cancelled"
