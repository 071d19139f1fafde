"""The agent under test: a subprocess speaking pi's RPC protocol (JSON lines).

``start_agent`` writes a pi-style agent directory (``models.json`` with one
OpenAI-compatible provider at the loopback server, ``settings.json`` with the
scenario's settings), starts the command with ``PI_CODING_AGENT_DIR`` pointing at it
and a private ``HOME``, and reads its stdout: every JSON line that is not a
``response`` is an event, kept with its arrival time on Trio's clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from .._core.classes import define, frozen

#: The provider and model the agent directory declares.
PROVIDER = "conformance"
MODEL = "conformance-model"
#: A key the agent sends to the loopback server; it never leaves this machine.
API_KEY = "conformance-key"
#: The model's context window, as declared in models.json.
CONTEXT_WINDOW = 32_000

#: How long a command may wait for its response, seconds.
RESPONSE_TIMEOUT = 30.0
#: The longest line the kit reads from the agent's stdout, bytes; a longer one is an error.
MAX_LINE = 4 * 1024 * 1024
#: The most the kit reads from one agent's stdout (one scenario): lines, and bytes.
MAX_LINES = 20_000
MAX_BYTES = 64 * 1024 * 1024
#: How long the agent has to exit once its stdin ends, and again after SIGTERM, seconds.
EXIT_GRACE = 3.0

_MIB = 1024 * 1024

#: Event names the kit accepts for pi's (read as pi's, with a note on the result): the
#: names a known agent writes, and whose agent it is.
ALIASES: Mapping[str, tuple[str, str]] = {
    "auto_compaction_start": ("compaction_start", "the seed's fork oh-my-pi's name"),
    "auto_compaction_end": ("compaction_end", "the seed's fork oh-my-pi's name"),
}


class AgentError(Exception):
    """The agent did not behave as an RPC agent at all (exited, no response, bad output)."""


@frozen
class Observed:
    """One event the agent wrote, and when it arrived (Trio clock, seconds)."""

    time: float
    event: Mapping[str, Any]

    @property
    def type(self) -> str:
        """The event's ``type``."""
        return str(self.event.get("type", ""))


def excerpt(data: bytes, limit: int = 60) -> str:
    """The start of ``data`` as a quoted, escaped string: control characters show as
    escapes, and ``…`` follows when there is more.

    Args:
        data: What the agent wrote.
        limit: How many characters to show at most.

    Returns:
        For example ``'not json\\x1b[31m'`` or ``'xxxxxxxx'…``.
    """
    text = data[: limit * 4].decode(errors="replace")
    more = len(text) > limit or len(data) > limit * 4
    return repr(text[:limit]) + ("…" if more else "")


def exit_status(returncode: int) -> str:
    """``status 3`` or ``signal SIGKILL``: how a process ended, in words.

    Args:
        returncode: The process's return code (negative: the signal that ended it).

    Returns:
        The words.
    """
    if returncode >= 0:
        return f"status {returncode}"
    try:
        return f"signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"signal {-returncode}"


def models_json(base_url: str, api_key: str = API_KEY) -> dict[str, Any]:
    """pi's ``models.json``: one OpenAI-compatible provider on the loopback server."""
    model = {
        "id": MODEL,
        "name": "Conformance",
        "reasoning": False,
        "input": ["text"],
        "contextWindow": CONTEXT_WINDOW,
        "maxTokens": 4096,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    }
    provider = {
        "baseUrl": base_url,
        "api": "openai-completions",
        "apiKey": api_key,
        "models": [model],
    }
    return {"providers": {PROVIDER: provider}}


def settings_json(
    retry: Mapping[str, Any], compaction: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """pi's ``settings.json``: the model, the scenario's ``retry`` and ``compaction``
    groups (compaction on, keeping 1 recent token, if not given), no SDK retries."""
    return {
        "defaultProvider": PROVIDER,
        "defaultModel": MODEL,
        "retry": {**retry, "provider": {"maxRetries": 0}},
        "compaction": dict(compaction or {"enabled": True, "keepRecentTokens": 1}),
    }


def agent_environment(agent_dir: Path, home: Path) -> dict[str, str]:
    """This process's environment with a private home and the agent directory set."""
    env = dict(os.environ)
    for name in list(env):
        if name.endswith("_API_KEY"):
            env[name] = ""  # the agent must use the loopback provider's key
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "PI_CODING_AGENT_DIR": str(agent_dir),
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
        }
    )
    return env


@define(eq=False)
class Agent:
    """A running agent: send commands, read events.

    What it writes is read within bounds: a line of at most ``MAX_LINE`` bytes, at most
    ``MAX_LINES`` lines and ``MAX_BYTES`` bytes in all. A line that is not a JSON object,
    or output past a bound, is a ``failure``: the kit reads no further (it closes its end
    of the pipe, so the agent's next write fails) and every command raises ``AgentError``
    saying what it saw.
    """

    process: trio.Process
    events: list[Observed] = attrs.field(factory=list)
    responses: list[Mapping[str, Any]] = attrs.field(factory=list)
    stderr: bytearray = attrs.field(factory=bytearray)
    changed: trio.Event = attrs.field(factory=trio.Event)
    closed: bool = False
    #: What was wrong with the agent's output, once something was; then ``closed`` too.
    failure: str | None = None
    #: Lines and bytes read from stdout; responses received to the kit's commands.
    lines: int = 0
    received: int = 0
    answered: int = 0
    #: What else the kit saw, for the result (an agent that would not exit).
    notes: list[str] = attrs.field(factory=list)
    #: How the agent ended, if it did before ``stop``.
    exited: str | None = None
    stderr_done: trio.Event = attrs.field(factory=trio.Event)
    _next_id: int = 0

    def _notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def _fail(self, failure: str) -> None:
        if self.failure is None:
            self.failure = failure

    async def read_stdout(self) -> None:
        """Read JSON lines until the agent closes its stdout, or its output fails."""
        stdout = self.process.stdout
        assert stdout is not None
        buffer = bytearray()
        scanned = 0  # no newline in buffer[:scanned]
        try:
            while self.failure is None and (data := await stdout.receive_some(65536)):
                self.received += len(data)
                buffer += data
                start = 0
                while self.failure is None and (end := buffer.find(b"\n", scanned)) >= 0:
                    self._line(bytes(buffer[start:end]))
                    start = scanned = end + 1
                del buffer[:start]
                scanned = len(buffer)
                if len(buffer) > MAX_LINE:
                    self._fail(
                        f"the agent wrote a line longer than {MAX_LINE // _MIB} MiB "
                        f"(the kit reads no further): {excerpt(bytes(buffer[:256]))}"
                    )
                elif self.received > MAX_BYTES:
                    self._fail(
                        f"the agent flooded its stdout: more than {MAX_BYTES // _MIB} MiB "
                        "in one scenario (the kit reads no further)"
                    )
            if self.failure is None and buffer.strip():
                self._line(bytes(buffer))  # the last line, without its newline
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        if self.failure is not None:
            await stdout.aclose()  # the agent's next write fails instead of blocking
        self.closed = True
        self._notify()

    def _line(self, line: bytes) -> None:
        self.lines += 1
        if self.lines > MAX_LINES:
            self._fail(
                f"the agent flooded its stdout: more than {MAX_LINES} lines in one "
                "scenario (the kit reads no further)"
            )
            return
        if not line.strip():
            return
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            self._fail(f"the agent wrote a line that is not JSON: {excerpt(line)}")
            return
        if not isinstance(data, dict):
            self._fail(f"the agent wrote a line that is not a JSON object: {excerpt(line)}")
            return
        if data.get("type") == "response":
            self.responses.append(data)
        else:
            alias = ALIASES.get(str(data.get("type")))
            if alias is not None:
                name, origin = alias
                note = f"the agent writes {data['type']} for {name} ({origin}): accepted"
                if note not in self.notes:
                    self.notes.append(note)
                data = {**data, "type": name}
            self.events.append(Observed(trio.current_time(), data))
        self._notify()

    async def read_stderr(self) -> None:
        """Keep the last 8 KiB of stderr, for a message when the agent misbehaves."""
        assert self.process.stderr is not None
        try:
            while data := await self.process.stderr.receive_some(65536):
                self.stderr += data
                del self.stderr[:-8192]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.stderr_done.set()

    async def send(self, command: Mapping[str, Any]) -> Mapping[str, Any]:
        """Send one command and wait for its response.

        Args:
            command: The command, without its ``id``.

        Returns:
            The agent's response.

        Raises:
            AgentError: The agent's output failed, it exited or closed its stdout, or no
                response came within ``RESPONSE_TIMEOUT``; the message says which.
        """
        self._next_id += 1
        ident = f"conf_{self._next_id}"
        name = str(command.get("type"))
        assert self.process.stdin is not None
        line = json.dumps({"id": ident, **command}) + "\n"
        with trio.move_on_after(RESPONSE_TIMEOUT):
            if self.failure is not None:
                raise AgentError(self.failure)
            try:
                await self.process.stdin.send_all(line.encode())
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise AgentError(await self._gone(name)) from exc
            while True:
                for response in self.responses:
                    if response.get("id") == ident:
                        self.answered += 1
                        return response
                if self.failure is not None:
                    raise AgentError(self.failure)
                if self.closed:
                    raise AgentError(await self._gone(name))
                await self.changed.wait()
        if self.lines == 0:
            raise AgentError(
                f"no response to {name} in {RESPONSE_TIMEOUT:g} s: the agent wrote "
                f"nothing on stdout; {self.stderr_tail()}"
            )
        raise AgentError(f"no response to {name} in {RESPONSE_TIMEOUT:g} s; {self.stderr_tail()}")

    async def _gone(self, name: str) -> str:
        """Why the agent cannot answer ``name``: it exited (how), or closed its pipes."""
        with trio.move_on_after(EXIT_GRACE):
            await self.process.wait()
        with trio.move_on_after(1):
            await self.stderr_done.wait()
        code = self.process.returncode
        if code is None:
            return (
                f"the agent closed its stdout before answering {name} (it still runs); "
                f"{self.stderr_tail()}"
            )
        return (
            f"the agent exited with {exit_status(code)} before answering {name}; "
            f"{self.stderr_tail()}"
        )

    async def wait_for(
        self, test: Callable[[Observed], bool], within: float, start: int = 0
    ) -> Observed | None:
        """The first event from index ``start`` on (so far or to come) passing ``test``;
        ``None`` after ``within`` s."""
        with trio.move_on_after(within):
            while True:
                for observed in self.events[start:]:
                    if test(observed):
                        return observed
                if self.closed:
                    return None
                await self.changed.wait()
        return None

    async def settle(self, start: int, quiet: float, within: float) -> bool:
        """Wait until the run begun at event ``start`` is over; whether it ended in time.

        Over means: an ``agent_end`` arrived after the last ``agent_start``, no compaction
        begun after it is still open or announced a re-send (``compaction_end {willRetry:
        true}``) still to come, no retry is announced after it (or three times its
        announced delay has passed), and then nothing new came for ``quiet`` seconds.

        A compaction is waited for by its events, not by the quiet time: its summary
        request may sit out a retry inside the provider's SDK (pi 0.73.1's OpenAI client
        retries a 503 after about half a second) with no event meanwhile.
        """
        with trio.move_on_after(within):
            while True:
                events = self.events[start:]
                ends = [i for i, e in enumerate(events) if e.type == "agent_end"]
                runs = [i for i, e in enumerate(events) if e.type == "agent_start"]
                if ends and (not runs or runs[-1] < ends[-1]):
                    after = events[ends[-1] :]
                    if _compaction_pending(after) and not self.closed:
                        await self.changed.wait()
                        continue
                    starts = [i for i, e in enumerate(after) if e.type == "auto_retry_start"]
                    wait = quiet
                    if starts and not any(
                        e.type in ("agent_start", "auto_retry_end") for e in after[starts[-1] :]
                    ):
                        # An agent that sleeps longer than it said is still running:
                        # give it three times the delay before the run counts as over.
                        announced = after[starts[-1]]
                        delay = float(announced.event.get("delayMs") or 0) / 1000
                        late = announced.time + 3 * delay + quiet - trio.current_time()
                        wait = max(quiet, late)
                    count = len(self.events)
                    with trio.move_on_after(wait):
                        while len(self.events) == count and not self.closed:
                            await self.changed.wait()
                    if len(self.events) == count:
                        return True
                    continue
                if self.closed:
                    return False
                await self.changed.wait()
        return False

    async def stop(self) -> None:
        """End the agent: close its stdin (an RPC agent exits on EOF), then SIGTERM, then
        SIGKILL, ``EXIT_GRACE`` seconds apart; a note says when EOF was not enough."""
        process = self.process
        if process.returncode is not None and self.failure is None:
            with trio.move_on_after(1):
                await self.stderr_done.wait()
            self.exited = (
                f"the agent exited with {exit_status(process.returncode)} before the kit "
                f"ended it; {self.stderr_tail()}"
            )
        if process.stdin is not None:
            with trio.move_on_after(1):
                await process.stdin.aclose()
        with trio.move_on_after(EXIT_GRACE):
            await process.wait()
            return
        late = f"the agent did not exit within {EXIT_GRACE:g} s of the end of its stdin"
        process.terminate()
        with trio.move_on_after(EXIT_GRACE):
            await process.wait()
            self.notes.append(f"{late}; SIGTERM ended it")
            return
        process.kill()
        self.notes.append(f"{late}, nor within {EXIT_GRACE:g} s of SIGTERM: the kit killed it")
        with trio.move_on_after(EXIT_GRACE):
            await process.wait()

    def stderr_tail(self) -> str:
        """The end of what the agent wrote to stderr, quoted and escaped, for a message."""
        text = self.stderr.decode(errors="replace").strip()
        if not text:
            return "nothing on its stderr"
        tail = repr(text[-200:])
        return f"its stderr ends: {'…' if len(text) > 200 else ''}{tail}"


def store_keys(home: Path, environ: Mapping[str, str], keys: Sequence[str]) -> None:
    """Put ``keys``, in order, in trio-session's credential store under the private home.

    pi's agent directory holds one key per provider (models.json's ``apiKey``); the
    SQLite store of ``trio-session auth add`` is where trio-session keeps more.
    """
    from .._dirs import user_data_dir
    from ..store._credentials_file import default_credentials_path
    from ..store._sqlite_credentials import SqliteCredentialStore

    data_dir = user_data_dir(environ=environ, home=home)
    store = SqliteCredentialStore.open(default_credentials_path(data_dir=data_dir), env_vars={})
    try:
        for number, key in enumerate(keys, 1):
            store.add(PROVIDER, key, label=f"conformance{number}")
    finally:
        store.close()


@asynccontextmanager
async def start_agent(
    command: Sequence[str],
    work: Path,
    base_url: str,
    retry: Mapping[str, Any],
    keys: Sequence[str] = (),
    compaction: Mapping[str, Any] | None = None,
) -> AsyncIterator[Agent]:
    """Start ``command`` pointed at ``base_url``; stop it when the block ends.

    With ``keys``, the first is models.json's ``apiKey`` and all of them, in order, are
    in trio-session's credential store (``store_keys``): every place the kit knows
    where an agent can hold keys.
    """
    agent_dir, home, project = work / "agent", work / "home", work / "project"
    for directory in (agent_dir, home, project):
        directory.mkdir(parents=True, exist_ok=True)
    env = agent_environment(agent_dir, home)
    models = models_json(base_url, keys[0] if keys else API_KEY)
    (agent_dir / "models.json").write_text(json.dumps(models, indent=2))
    (agent_dir / "settings.json").write_text(json.dumps(settings_json(retry, compaction), indent=2))
    if keys:
        store_keys(home, env, keys)
    try:
        process = await trio.lowlevel.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=project,
            env=env,
        )
    except OSError as exc:
        raise AgentError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from exc
    agent = Agent(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.read_stdout)
            nursery.start_soon(agent.read_stderr)
            try:
                yield agent
            finally:
                with trio.CancelScope(shield=True):
                    await agent.stop()
                nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()


def text_of(message: Mapping[str, Any]) -> str:
    """The text parts of a message, joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _compaction_pending(after: Sequence[Observed]) -> bool:
    """Whether ``after`` (the events since an ``agent_end``) holds a compaction still
    running: a ``compaction_start`` with no ``compaction_end`` after it, or a
    ``compaction_end`` announcing a re-send (``willRetry``) with no ``agent_start`` yet."""
    for observed in reversed(after):
        if observed.type == "agent_start":
            return False
        if observed.type == "compaction_start":
            return True
        if observed.type == "compaction_end":
            return observed.event.get("willRetry") is True
    return False
